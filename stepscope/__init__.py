"""stepscope: record, replay and diff a vLLM-style LLM-serving scheduler, step by step."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.schema import Trace

__version__ = metadata.version("stepscope")
"""The installed distribution's version: `pyproject.toml` is its one source."""


def open(path: str | Path) -> Trace:
    """Open a trace for reading: read-only, no file access from SQL, views ready.

    >>> trace = stepscope.open("run.duckdb")
    >>> trace.sql("SELECT * FROM why_preempted").to_arrow_table()
    """
    from stepscope.schema import open_trace

    return open_trace(path)
