"""The sweep example's README shows real output: re-running its commands reproduces it."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import REPO

pytest.importorskip("stepscope.replay.sweep.run", reason="needs stepscope sweep")

EXAMPLE = REPO / "examples" / "sweep_capacity"


def _refresh_module() -> object:
    """The example's `refresh.py`, by path (the other examples have a `refresh` module too)."""
    spec = importlib.util.spec_from_file_location("sweep_capacity_refresh", EXAMPLE / "refresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(text: str) -> str:
    """The text without table borders and runs of spaces (they vary with rich's version)."""
    return re.sub(r"[\s\u2500-\u257f]+", " ", text)


@pytest.mark.slow
def test_the_sweep_example_readme_is_current() -> None:
    readme = (EXAMPLE / "README.md").read_text()
    fresh = _refresh_module().render(readme)  # type: ignore[attr-defined]
    assert _cells(fresh) == _cells(readme), (
        "examples/sweep_capacity/README.md is stale: run python examples/sweep_capacity/refresh.py"
    )
