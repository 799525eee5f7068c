"""The example READMEs show real output: re-running their commands reproduces it exactly."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))
from refresh import EXAMPLES, render
from stepscope.engine import load_workload


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_readme_output_is_current(name: str) -> None:
    folder = REPO / "examples" / name
    readme = (folder / "README.md").read_text()
    assert "```console" in readme
    fresh = render(readme, folder / "workload.json")
    assert _cells(fresh) == _cells(readme), (
        f"examples/{name}/README.md is stale: run python examples/refresh.py"
    )


def _cells(text: str) -> str:
    """The text without table borders and runs of spaces (they vary with rich's version)."""
    return re.sub(r"[\s\u2500-\u257f]+", " ", text)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_workload_loads(name: str) -> None:
    assert load_workload(REPO / "examples" / name / "workload.json").requests
