"""The command line's own options: its version, shell completion, and the declared extras."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tomllib

from conftest import TESTS
from test_cli import stepscope

import stepscope as package
from stepscope.cli import app


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


def test_each_paragraph_of_a_commands_help_flows_as_one_line() -> None:
    """The terminal wraps the help's prose; a docstring's own line breaks never cut it
    (list items keep a line each)."""
    for command in app.registered_commands:
        name = command.callback.__name__  # type: ignore[union-attr]
        shown = [
            " ".join(line.split())
            for line in stepscope(name, "--help", columns=2000).stdout.splitlines()
        ]
        doc = inspect.cleandoc(command.callback.__doc__ or "")  # type: ignore[union-attr]
        for paragraph in doc.split("\n\n"):
            for item in paragraph.split("\n- "):
                text = " ".join(item.split())
                assert any(text in line for line in shown), f"stepscope {name} --help: {text!r}"
