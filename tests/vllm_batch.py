"""Record workloads through vLLM's real scheduler: run inside the vLLM venv, one process.

    python vllm_batch.py OUT_DIR WORKLOAD.json... [--set KNOB=VALUE]...

Writes OUT_DIR/<workload stem>.duckdb for each workload (vLLM's import is paid once).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stepscope.engine.workload import load_workload
from stepscope.tracer.vllm.driver import record_with_vllm


def main(argv: list[str]) -> None:
    out_dir = Path(argv[0])
    knobs = {}
    paths = []
    args = iter(argv[1:])
    for arg in args:
        if arg == "--set":
            name, _, value = next(args).partition("=")
            knobs[name] = json.loads(value)
        else:
            paths.append(Path(arg))
    for path in paths:
        workload = load_workload(path)
        if knobs:
            workload = workload.with_config(workload.config.with_knobs(knobs))
        record_with_vllm(workload, out_dir / f"{path.stem}.duckdb")


if __name__ == "__main__":
    main(sys.argv[1:])
