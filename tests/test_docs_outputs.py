"""The README and the docs pages show real output: re-running their commands reproduces it."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "docs"))
from refresh_docs import pages, render


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_page_output_is_current(page) -> None:
    current = page.read_text()
    assert "```console" in current
    assert _cells(render(current)) == _cells(current), (
        f"{page.relative_to(REPO)} is stale: run python docs/refresh_docs.py"
    )


def _cells(text: str) -> str:
    """The text without table borders and runs of spaces (they vary with rich's version)."""
    return re.sub(r"[\s\u2500-\u257f]+", " ", text)
