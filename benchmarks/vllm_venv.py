"""Runs a benchmark worker under vLLM 0.33.0: the venv `.ci/vllm-venv` builds, with this
checkout's stepscope installed into a scratch directory for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from stepscope.tracer.vllm.drive.site_install import install_site

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = Path(os.environ.get("STEPSCOPE_VLLM_VENV", Path.home() / ".cache" / "stepscope-vllm-venv"))


def available() -> bool:
    return (VENV / "bin" / "python").exists()


def run_worker(script: str, payload: Any, *args: str, source: Path = REPO) -> Any:
    """Run `benchmarks/<script> PAYLOAD.json ARGS... SCRATCH`; returns its last line as JSON.

    `source`: the stepscope checkout the worker imports (this one unless told otherwise).
    """
    python = VENV / "bin" / "python"
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch) / "site"
        install_site(python, source, site)
        payload_path = Path(scratch) / "payload.json"
        payload_path.write_text(json.dumps(payload))
        result = subprocess.run(
            [str(python), str(HERE / script), str(payload_path), *args, scratch],
            capture_output=True,
            text=True,
            cwd=HERE,
            env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{HERE}"},
        )
    if result.returncode != 0:
        sys.exit(f"{script} failed under vLLM:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
