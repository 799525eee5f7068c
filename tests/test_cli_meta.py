"""The command line's own options: its version, shell completion, and the declared extras."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from conftest import TESTS
from test_cli import stepscope

import stepscope as package


def test_version_prints_the_installed_version() -> None:
    result = stepscope("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"stepscope {package.__version__}\n"


def test_completion_is_offered_and_completes_commands() -> None:
    assert "--install-completion" in stepscope("--help").stdout
    env = {
        **os.environ,
        "_STEPSCOPE_COMPLETE": "complete_bash",
        "COMP_WORDS": "stepscope re",
        "COMP_CWORD": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "stepscope"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["record", "replay"]


def test_data_frame_extras_are_declared() -> None:
    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(requirement.startswith("pandas") for requirement in extras["pandas"])
    assert any(requirement.startswith("polars") for requirement in extras["polars"])
