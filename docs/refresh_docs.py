"""Re-runs the `$ stepscope ...` commands of README.md and the docs pages; writes their output.

    python docs/refresh_docs.py           # rewrite the pages
    python docs/refresh_docs.py --check   # exit 1 if any page shows stale output

A page's ```console blocks run in order, in one scratch folder per page in which this
checkout's `examples/` and `tests/` are linked, 100 columns wide with no colour, exactly as
a reader would type them there (a `$ mkdir` makes a folder a later command writes into).
A command runs on until its quotes close and it ends without a `\\`. What reads the
machine's clock (step timings, the step-time fit fitted to them, creation times, and a
trace's size on disk, which its timed flushes change) is shown as `…`, so a page's output
is the same on every run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINKED = ("examples", "tests")
_CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
_CLOCK_FIGURES = (
    re.compile(r"(?<=mean schedule us) +[\d.,]+"),
    re.compile(r"(?<=mean model us) +[\d.,]+"),
    re.compile(r"(?<=mean update us) +[\d.,]+"),
    re.compile(r"(?<=created_at )\S+"),
    re.compile(r"(?<=\()[\d.]+(?= MB, (?:complete|incomplete)\))"),
    re.compile(r"(?<=\.duckdb  )[\d.]+(?= MB  )"),
)
_STEP_TIME_FIT = re.compile(
    r"^(?:no modelled seconds|in seconds, modelled).*?(?=^\d+ tokens were sampled past|\Z)",
    re.DOTALL | re.MULTILINE,
)
STEP_TIME_FIT_SHOWN = "… (the step-time fit of this recording's own step timings)\n"


def pages() -> list[Path]:
    """README.md and every docs page that shows a command's output."""
    docs = sorted((REPO / "docs").rglob("*.md"))
    return [REPO / "README.md", *(page for page in docs if "```console" in page.read_text())]


def stepscope(args: list[str], cwd: Path, columns: int) -> str:
    """What `stepscope ARGS` prints in `cwd`, `columns` wide, its clock's figures as `…`."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return without_clock(result.stdout + result.stderr).replace(f"{REPO}/", "")


def without_clock(output: str) -> str:
    """The output with every figure read from the machine's clock shown as `…`."""
    for pattern in _CLOCK_FIGURES:
        output = pattern.sub(_elided, output)
    return _STEP_TIME_FIT.sub(STEP_TIME_FIT_SHOWN, output)


def _elided(match: re.Match[str]) -> str:
    """`…` in the figure's place; a figure aligned right by spaces before it stays so."""
    figure = match.group(0)
    return "…".rjust(len(figure)) if figure.startswith(" ") else "…"


def commands(block: str) -> list[str]:
    """Each `$ ` command of a console block as written, continuation lines included."""
    found: list[str] = []
    pending: list[str] = []
    for line in block.splitlines():
        if pending or line.startswith("$ "):
            pending.append(line)
            if is_complete("\n".join(pending)):
                found.append("\n".join(pending))
                pending = []
    if pending:
        raise ValueError(f"a command does not end: {pending[0]}")
    return found


def is_complete(command: str) -> bool:
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def output(command: str, cwd: Path, columns: int) -> str:
    """What the command prints; `mkdir` makes a folder a later command writes into."""
    program, *args = shlex.split(command[2:].replace("\\\n", " "))
    if program == "mkdir":
        for name in args:
            (cwd / name).mkdir()
        return ""
    if program != "stepscope":
        raise ValueError(f"not a stepscope command: {command}")
    return stepscope(args, cwd, columns)


def link_checkout(folder: Path) -> None:
    """Make this checkout's `examples/` and `tests/` reachable from `folder`."""
    for name in LINKED:
        (folder / name).symlink_to(REPO / name)


def render(page: str, prepare: Callable[[Path], None] = link_checkout, columns: int = 100) -> str:
    """The page with every console block's output regenerated, in a folder `prepare` sets up."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        prepare(folder)

        def rerun(match: re.Match[str]) -> str:
            blocks = []
            for command in commands(match.group(1)):
                printed = output(command, folder, columns).strip("\n")
                blocks.append(f"{command}\n{printed}\n" if printed else f"{command}\n")
            return "```console\n" + "".join(blocks) + "```"

        return _CONSOLE_BLOCK.sub(rerun, page)


def refresh(renders: dict[Path, Callable[[str], str]], *, check: bool) -> None:
    """Rewrite each page as its render makes it; with `check`, exit 1 naming the stale ones."""
    stale = []
    for page, render_page in renders.items():
        current = page.read_text()
        fresh = render_page(current)
        if fresh != current:
            stale.append(str(page.relative_to(REPO)))
            if not check:
                page.write_text(fresh)
    if check and stale:
        print(f"stale output: {', '.join(stale)}", file=sys.stderr)
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is stale")
    args = parser.parse_args()
    refresh({page: render for page in pages()}, check=args.check)


if __name__ == "__main__":
    main()
