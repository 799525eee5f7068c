"""Random workloads through real vLLM (the oracle) and through the engine: same decisions.

Both supported versions: 0.33.0 where its venv exists (`.ci/vllm-venv`, which `.ci/run`
builds, or the oracle's own from `../shared/oracle/build_venv.sh`), 0.32.0 in the
live venv (`.ci/vllm-live-venv`), each where the oracle script is beside the checkout;
skipped elsewhere. The engine follows the version each workload names. Each kind of
workload (plain, async scheduling, speculative decoding, LoRA, EAGLE-style drafters, the
prefill cadence, a third of the time with EAGLE-style drafters, hybrid KV cache groups)
has its own seeds.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, oracle_python, read_jsonl
from oracle_compare import first_difference, run_lines
from random_workloads import (
    for_eagle_drafts,
    random_workload,
    with_eagle_style_drafts,
    with_hybrid_groups,
    with_lora,
    with_prefill_interval,
    with_spec_decoding,
)
from vllm_env import LIVE_VENV

ORACLE_SCRIPT = REPO.parent / "shared" / "oracle" / "vllm_oracle.py"
NUM_WORKLOADS = 60
MAX_REQUESTS = 24

Generator = Callable[[random.Random, str], dict[str, Any]]


def _plain(rng: random.Random, version: str) -> dict[str, Any]:
    return random_workload(rng, MAX_REQUESTS)


def _async(rng: random.Random, version: str) -> dict[str, Any]:
    return random_workload(rng, MAX_REQUESTS, async_scheduling=True)


def _spec(rng: random.Random, version: str) -> dict[str, Any]:
    """Speculative decoding, a third of the time under async scheduling."""
    return with_spec_decoding(
        rng, random_workload(rng, MAX_REQUESTS, async_scheduling=rng.random() < 0.3)
    )


def _lora(rng: random.Random, version: str) -> dict[str, Any]:
    """The LoRA gate, a third of the time under async scheduling, a third with drafts."""
    mode = rng.random()
    workload = with_lora(rng, random_workload(rng, MAX_REQUESTS, async_scheduling=mode < 1 / 3))
    return with_spec_decoding(rng, workload) if mode > 2 / 3 else workload


def _eagle(rng: random.Random, version: str) -> dict[str, Any]:
    """EAGLE, EAGLE-3 or MTP drafts, a third of the time under async scheduling."""
    workload = random_workload(rng, MAX_REQUESTS, async_scheduling=rng.random() < 1 / 3)
    return with_eagle_style_drafts(rng, workload, version)


def _interval(rng: random.Random, version: str) -> dict[str, Any]:
    """The prefill cadence, a third of the time under async scheduling, a third with
    EAGLE-style drafts (0.32 keeps the setting and holds nothing)."""
    mode = rng.random()
    workload = random_workload(rng, MAX_REQUESTS, async_scheduling=mode < 1 / 3)
    if mode > 2 / 3:
        workload = with_eagle_style_drafts(rng, workload, version)
    return with_prefill_interval(rng, workload)


def _hybrid(rng: random.Random, version: str) -> dict[str, Any]:
    """Hybrid KV cache groups, a third of the time under async scheduling, a third with
    drafts (EAGLE-style under 0.33, whose lookahead hashes the groups need)."""
    mode = rng.random()
    workload = with_hybrid_groups(
        rng, random_workload(rng, MAX_REQUESTS, async_scheduling=mode < 1 / 3)
    )
    if mode <= 2 / 3:
        return workload
    if version == "0.33.0" and rng.random() < 0.5:
        return for_eagle_drafts(with_eagle_style_drafts(rng, workload, version))
    return with_spec_decoding(rng, workload)


KINDS = [
    pytest.param(_plain, 7_000, id="plain"),
    pytest.param(_async, 8_000, id="async"),
    pytest.param(_spec, 9_000, id="spec"),
    pytest.param(_lora, 10_000, id="lora"),
    pytest.param(_eagle, 11_000, id="eagle"),
    pytest.param(_interval, 12_000, id="interval"),
    pytest.param(_hybrid, 13_000, id="hybrid"),
]
"""Each kind of workload: its generator and its first seed."""


def _oracle_python(version: str) -> Path | None:
    if version == "0.32.0":
        python = LIVE_VENV / "bin" / "python"
        return python if python.exists() else None
    return oracle_python()


@pytest.mark.slow
@pytest.mark.parametrize(("generate", "first_seed"), KINDS)
@pytest.mark.parametrize("version", ["0.33.0", "0.32.0"])
def test_random_workloads_match_the_oracle(
    tmp_path: Path, version: str, generate: Generator, first_seed: int
) -> None:
    """The engine, told the oracle's vLLM version, decides as that version does."""
    python = _oracle_python(version)
    if python is None or not ORACLE_SCRIPT.exists():
        pytest.skip(f"no vLLM {version} venv or no ../shared/oracle script here")
    paths = []
    for seed in range(first_seed, first_seed + NUM_WORKLOADS):
        path = tmp_path / f"w{seed}.json"
        workload = generate(random.Random(seed), version)
        workload["config"]["vllm_version"] = version
        path.write_text(json.dumps(workload))
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
        cwd=tmp_path,
    )
    for path in paths:
        expected = read_jsonl(path.with_name(path.stem + ".expected.jsonl"))
        assert expected[-1]["vllm_version"] == version
        difference = first_difference(run_lines(path), expected)
        assert difference is None, f"{path.name} (seed {path.stem[1:]}): {difference}"
