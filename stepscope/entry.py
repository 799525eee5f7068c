"""The `stepscope` console script: Ctrl-C while the command line loads ends it in one line too.

Loading the commands (DuckDB, pyarrow, Textual, rich) takes the first fraction of a
second of every run; a Ctrl-C then is answered as it is once a command runs
(`interrupted`, exit status 130), not with a traceback through the imports.
"""

from __future__ import annotations

import sys

from .exit_status import INTERRUPTED_EXIT_CODE


def main() -> None:
    try:
        from stepscope.cli import main as run_command
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT_CODE) from None
    run_command()
