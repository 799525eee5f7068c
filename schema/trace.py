"""One trace read: its tables and views at the top level, with its facts (`_meta`, config).

The trace is a file, or a recording folder of segments read as one trace; either way
the same `_` tables and views answer, and the steps held are `first_step` to
`last_step`, less any `gaps` (steps a recording's writer dropped); a recording whose
writer was still behind when it closed lost every step after `last_step` too.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

from .reader import TraceReader
from .recording_tables import Recording
from .sql_files import query
from .step_gaps import StepGap, step_gaps
from .step_window import WHOLE, StepWindow
from .trace_checks import check_every_block, check_every_table
from .trace_error import TraceError
from .trace_keys import key_problem

__all__ = ["Trace", "check_readable", "open_trace"]


_DATABASE = "trace_file"
"""The trace file's alias in the reader's database (a recording's schema of file views)."""


class Trace(TraceReader):
    """An open trace, a file or a recording folder, read-only and sandboxed (see
    `TraceReader`).

    A query in a trace someone else made cannot read or write the reader's files.
    """

    def __init__(self, path: str | Path, window: StepWindow = WHOLE) -> None:
        super().__init__(Path(path))
        self.path: Path = Path(path)
        self.window = window
        """The steps read (`step_window`): every query answers with their rows only."""
        self._keys_checked = False
        self._open(self._add_trace)

    def _add_trace(self) -> None:
        read = self._read_trace(_DATABASE, self.path)
        self.meta = read.meta
        self.recording: Recording | None = read.recording
        """What the recording folder held when opened (None: a trace file)."""
        self._held: tuple[int, int, int] | None = self._add_main(
            _DATABASE, read, self.path, self.window
        )
        """(steps, first, last) of the whole trace, read when a window cuts it."""

    @property
    def complete(self) -> bool:
        """The run ended and the trace holds its last step."""
        return self.meta.get("complete") == "true" and self.dropped_from is None

    @property
    def dropped_from(self) -> int | None:
        """The first step of those a recording lost at its end, its writer still behind
        when the recording closed (None: it lost none there)."""
        segments = self.recording.segments if self.recording is not None else ()
        if segments and segments[-1].fell_behind:
            return self.held[1] + 1
        return None

    @property
    def schema_version(self) -> int:
        return int(self.meta["schema_version"])

    @cached_property
    def config(self) -> dict[str, Any]:
        cursor = self.execute(query(__package__, "config"))
        rows = cursor.fetchall()
        columns = [column[0] for column in cursor.description or ()]
        return dict(zip(columns, rows[0], strict=True)) if rows else {}

    @cached_property
    def _step_range(self) -> tuple[int, int, int]:
        """(steps held, first, last): what the file or the folder holds, complete or not
        (in the window read)."""
        ((count, first, last),) = self.execute(query(__package__, "step_range")).fetchall()
        if not count:
            return 0, 0, -1
        return int(count), int(first), int(last)

    @property
    def held(self) -> tuple[int, int]:
        """The first and last step the whole trace holds, whatever the window read."""
        _, first, last = self._step_range if self._held is None else self._held
        return first, last

    @property
    def num_steps(self) -> int:
        """Steps recorded, idle ones included (what the trace holds, complete or not)."""
        return self._step_range[0]

    @property
    def first_step(self) -> int:
        """The first step held: 0, unless a recording's oldest segments were deleted (a
        trace that holds no step starts at 0)."""
        return self._step_range[1]

    @property
    def last_step(self) -> int:
        """The last step held (`first_step - 1` when none is)."""
        return self._step_range[2]

    @cached_property
    def gaps(self) -> tuple[StepGap, ...]:
        """The runs of steps missing between `first_step` and `last_step`, in order."""
        if self.last_step - self.first_step + 1 == self.num_steps:
            return ()
        return step_gaps(self, self.recording)

    def stored_files(self) -> list[tuple[str, Path]]:
        """The files the trace is read from, each with its name: the trace file, or each
        file of the recording (named by its path in the folder)."""
        if self.recording is None:
            return [(self.path.name, self.path)]
        folder = self.recording.folder
        return [(path.relative_to(folder).as_posix(), path) for path in self.recording.files()]

    def read_all(self) -> None:
        """Read every stored byte, so a damaged block is an error now, not a missed difference."""
        try:
            if self.recording is None:
                check_every_block(self._con, _DATABASE, self.path)
            else:
                check_every_table(self._con)
        except duckdb.Error as error:
            raise self._error(error) from None

    def check_keys(self) -> None:
        """Refuse a trace whose rows cannot be found by their keys (`trace_keys`): replay and
        diff read every row by them. Checked once: the file is open read-only."""
        if self._keys_checked:
            return
        try:
            problem = key_problem(self._con, self.path, numbered_from_0=self.recording is None)
        except duckdb.Error as error:
            raise self._error(error) from None
        if problem is not None:
            raise TraceError(problem)
        self._keys_checked = True


def open_trace(path: str | Path, window: StepWindow = WHOLE) -> Trace:
    """Open a trace for reading (see `Trace`), all of it or the steps of `window`."""
    return Trace(path, window)


def check_readable(path: str | Path) -> None:
    """Open the trace and read every stored byte: a TraceError naming what cannot be read."""
    with open_trace(path) as trace:
        trace.read_all()
