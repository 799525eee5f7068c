"""Runs in vLLM's venv: the oracle's scenarios through vLLM's own scheduler, each group's
held blocks counted after every `schedule()` as the vLLM recorder counts them.

    python vllm_held_blocks.py ORACLE.py OUT.json WORKLOAD.json...

OUT.json maps each workload's path to its list of counts, one per `schedule()` call.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from typing import Any

from stepscope.tracer.vllm.attach.held_blocks import held_blocks_counter


def _oracle(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("vllm_oracle", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _counted_scheduler(build: Any, counts: list[list[int] | None]) -> Any:
    """The oracle's `build_scheduler`, its scheduler counting after each `schedule()`."""

    def build_counted(cfg: dict[str, Any]) -> Any:
        scheduler, *rest = build(cfg)
        count = held_blocks_counter(scheduler)
        schedule = scheduler.schedule

        def schedule_and_count(*args: Any, **kwargs: Any) -> Any:
            output = schedule(*args, **kwargs)
            counts.append(None if count is None else list(count()))
            return output

        scheduler.schedule = schedule_and_count
        return (scheduler, *rest)

    return build_counted


def main() -> None:
    oracle_path, out, *workloads = sys.argv[1:]
    oracle = _oracle(oracle_path)
    build = oracle.build_scheduler
    counted: dict[str, list[list[int] | None]] = {}
    for path in workloads:
        counts: list[list[int] | None] = []
        oracle.build_scheduler = _counted_scheduler(build, counts)
        with open(path) as f:
            oracle.run(json.load(f), io.StringIO())
        counted[path] = counts
    with open(out, "w") as f:
        json.dump(counted, f)


if __name__ == "__main__":
    main()
