"""How much memory, and scratch disk, one reader's queries may use.

DuckDB lets a query take 80 % of the machine's memory by default. On the host of a vLLM
server that is memory the server needs, and one `why_waiting` query over an overloaded
server's recording takes most of it (`benchmarks/reader_memory.py`). A reader's database
may use a quarter of the machine's memory, at most 8 GiB, or what `STEPSCOPE_MEMORY_LIMIT`
says (`4GB`, `512MB`, `16GiB`). What a query cannot hold spills to a folder of the
process's own under the temp folder (at most four times the memory, not DuckDB's default
of 90 % of the free disk, which a recorder writing beside it would run out of), removed
when the process exits.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import tempfile
from pathlib import Path

from stepscope.quantities import MEMORY_LIMIT_ENV as ENV
from stepscope.quantities import memory_limit_setting

from .trace_error import TraceError

DEFAULT_CAP = 8 << 30
"""The most a reader takes by default, however much memory the machine has."""
SPILL_TIMES = 4
"""The spill folder's cap, in multiples of the memory limit."""

_databases = itertools.count()


def reader_limits() -> dict[str, str]:
    """A new reader database's `memory_limit`, `max_temp_directory_size` and
    `temp_directory`: a folder of its own (DuckDB names its files alike in each), which
    DuckDB makes when it first spills and removes when the database closes."""
    limit = memory_limit()
    return {
        "memory_limit": f"{limit}B",
        "max_temp_directory_size": f"{limit * SPILL_TIMES}B",
        "temp_directory": str(_spill_folder() / f"db-{next(_databases)}"),
    }


def memory_limit() -> int:
    """The bytes a reader's database may hold: `STEPSCOPE_MEMORY_LIMIT` (the setting a run's
    memory check reads too), or the default; at least 1 MiB."""
    try:
        given = memory_limit_setting()
    except ValueError as error:
        raise TraceError(str(error)) from None
    if given is None:
        return min(_physical_memory() // 4, DEFAULT_CAP)
    return max(given, 1 << 20)


def memory_hint() -> str:
    """What to say beside DuckDB's out-of-memory error."""
    limit = memory_limit()
    return (
        f"a reader holds at most {_size(limit)} in memory and spills at most "
        f"{_size(limit * SPILL_TIMES)} to disk; {ENV} sets more, e.g. {ENV}=16GB"
    )


def _size(num_bytes: int) -> str:
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.0f} MB"


def _physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@functools.cache
def _spill_folder() -> Path:
    """This process's spill folder, made on first use and removed when it exits (by this
    process: a forked child that inherits it leaves it be)."""
    folder = Path(tempfile.mkdtemp(prefix="stepscope-spill-"))
    atexit.register(_remove, folder, os.getpid())
    return folder


def _remove(folder: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
