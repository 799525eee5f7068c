"""DuckDB errors met while the TUI reads a trace, as one-line TraceErrors.

A damaged file's (`TraceDamagedError`, naming the file) is told apart from a query's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from stepscope.schema import TraceDamagedError, TraceError
from stepscope.schema.trace_file import damaged, first_line, is_file_error


@contextmanager
def reading(path: Path | None) -> Iterator[None]:
    """DuckDB errors in the body become one-line TraceErrors (see `damaged_error`)."""
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as error:
        if is_file_error(error):
            raise damaged_error(error, path) from None
        raise TraceError(first_line(error)) from None


def damaged_error(error: duckdb.Error, path: Path | None) -> TraceDamagedError:
    """A query the file's bytes failed, naming the file (`path`, when one file was read)."""
    return TraceDamagedError(first_line(error) if path is None else damaged(path, error))
