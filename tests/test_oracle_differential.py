"""Random workloads through real vLLM 0.33.0 (the oracle) and through the engine: same decisions.

Runs where vLLM's venv exists (`.ci/vllm-venv`, which `.ci/run` builds, or the oracle's own
from `../shared/oracle/build_venv.sh`) and the oracle script is beside the checkout;
skipped elsewhere.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, oracle_python, read_jsonl
from decisions import first_difference, run_lines
from random_workloads import random_workload

ORACLE_SCRIPT = REPO.parent / "shared" / "oracle" / "vllm_oracle.py"
NUM_WORKLOADS = 60
FIRST_SEED = 7_000


@pytest.mark.slow
def test_random_workloads_match_the_oracle(tmp_path: Path) -> None:
    python = oracle_python()
    if python is None or not ORACLE_SCRIPT.exists():
        pytest.skip("no vLLM venv (.ci/vllm-venv) or no ../shared/oracle script here")
    paths = []
    for seed in range(FIRST_SEED, FIRST_SEED + NUM_WORKLOADS):
        path = tmp_path / f"w{seed}.json"
        path.write_text(json.dumps(random_workload(random.Random(seed), max_requests=24)))
        paths.append(path)
    subprocess.run(
        [
            str(python),
            str(ORACLE_SCRIPT),
            *map(str, paths),
            "--save",
            "--suffix",
            ".expected.jsonl",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    for path in paths:
        expected = read_jsonl(path.with_name(path.stem + ".expected.jsonl"))
        difference = first_difference(run_lines(path), expected)
        assert difference is None, f"{path.name} (seed {path.stem[1:]}): {difference}"
