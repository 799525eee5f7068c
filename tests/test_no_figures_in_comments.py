"""No benchmark figure in the package's comments or docstrings: they go in benchmarks/RESULTS.md.

A measured number drifts the day the code around it changes; `RESULTS.md` keeps it with
its method and date. Sizes and limits a constant sets are not measurements, nor is a
setting's value written as it is typed (`30s`), so the patterns look for what only a
measurement says: a time, a before -> after, a speed-up.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from conftest import REPO

PARTS = ("engine", "tracer", "schema", "replay", "tui", "stepscope")
FIGURE = re.compile(
    r"\d(\.\d+)? ?(ms|µs|us|ns)\b"  # a time
    # a time in seconds, not a setting's value (`30s`, CHECKPOINT=30s, "30s")
    r"|(?<![\d.=`\"'])\d+(\.\d+)? ?(s|seconds)\b(?! (and|or)\b)"
    r"|\d[\d.,]* ?(->|→) ?\d[\d.,]* ?(ms|µs|ns|s|B|KB|MB|GB|KiB|MiB|GiB|%)"  # before -> after
    r"|\d(\.\d+)? ?(x|×|%) (faster|slower|smaller|larger)"  # a speed-up
    r"|\d+ times (one|as|the)\b"  # a ratio
    r"|(?i:\bmeasured:)"
)


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else ():
            value = statement.value if isinstance(statement, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.append((statement.lineno, value.value))
    return found


def test_no_comment_or_docstring_holds_a_measured_figure() -> None:
    hits = [
        f"{path.relative_to(REPO)}:{line}: {match.group()!r}"
        for part in PARTS
        for path in sorted((REPO / part).rglob("*.py"))
        for line, text in _comments_and_docstrings(path)
        for match in [FIGURE.search(text)]
        if match is not None
    ]
    assert not hits, "figures belong in benchmarks/RESULTS.md:\n" + "\n".join(hits)
