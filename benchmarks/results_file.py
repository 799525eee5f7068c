"""`RESULTS.md` holds one section per benchmark, each between its own start and end markers."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the section `name` of the results file, or append it; other sections stay."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n{text}\n{end}"
    current = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in current:
        before, rest = current.split(start, 1)
        current = before + section + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(current)
