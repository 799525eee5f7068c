"""Writes a benchmark's figures into its own section of RESULTS.md."""

from __future__ import annotations

import platform
from datetime import date
from pathlib import Path


def heading(script: str) -> str:
    """`## script (date, machine, Python)`: where and when the figures were taken."""
    return (
        f"## {script} ({date.today()}, {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"Python {platform.python_version()})"
    )


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the section between `<!-- name:start -->` and `<!-- name:end -->`, or append it."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n{text}\n{end}"
    current = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in current:
        before, rest = current.split(start, 1)
        current = before + section + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(current)
