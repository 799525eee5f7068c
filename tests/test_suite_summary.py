"""A run names the suites that need an optional part, and says when and why one skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SUITE_SUMMARY_FILE


def _suite_lines(tmp_path: Path, env: dict[str, str], *tests: str) -> list[str]:
    summary = tmp_path / "suites.txt"
    environment = {**os.environ, **env, SUITE_SUMMARY_FILE: str(summary)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "suites that need an optional part" in result.stdout
    return summary.read_text().splitlines()


def _live_line(lines: list[str]) -> str:
    return next(line for line in lines if line.startswith("a real vLLM engine"))


def test_a_live_venv_that_failed_its_checks_shows_as_skipped_with_why(tmp_path: Path) -> None:
    venv = tmp_path / "live-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    lines = _suite_lines(
        tmp_path,
        {"STEPSCOPE_VLLM_LIVE_VENV": str(venv)},
        "tests/test_live_vllm_engine.py::test_the_pool_was_short",  # sync and async
    )
    line = _live_line(lines)
    assert line.startswith("a real vLLM engine and server (.ci/vllm-live-venv): SKIPPED: 2 skipped")
    assert f"the venv at {venv} did not pass its checks" in line


def test_a_missing_venv_names_the_script_that_builds_it(tmp_path: Path) -> None:
    lines = _suite_lines(
        tmp_path,
        {"STEPSCOPE_VLLM_VENV": str(tmp_path / "none")},
        "tests/test_vllm_recorder.py::test_the_v2_model_runners_output_records_alike",
        "tests/test_workload.py::test_a_good_workload_loads_with_defaults",
    )
    line = next(line for line in lines if line.startswith("vLLM 0.33.0's scheduler"))
    assert "SKIPPED: 1 skipped" in line and ".ci/vllm-venv builds it" in line
    assert _live_line(lines).endswith("no tests collected")
