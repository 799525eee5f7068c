"""What every detector reads: the trace, the window it examines, and the window's totals."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import EngineConfig
from stepscope.schema import Trace, sql_files

from ..from_step import StepWindow, window_bounds
from ..inputs import recorded_config
from ..sql import query

_PACKAGE = "stepscope.replay"
_PARAMETER = re.compile(r"\$(\w+)")


@dataclass(frozen=True)
class Examined:
    trace: Trace
    path: Path
    """The trace as the user named it, for the evidence command lines."""
    window: StepWindow
    config: EngineConfig
    first_step: int
    last_step: int
    num_busy_steps: int
    """Steps in the window that ran schedule()."""
    num_scheduled_tokens: int

    @classmethod
    def of(cls, trace: Trace, path: Path, window: StepWindow) -> Examined:
        first, last = window_bounds(window)
        totals = _rows(trace, "doctor_window", first, last)[0]
        return cls(
            trace=trace,
            path=path,
            window=window,
            config=recorded_config(trace),
            first_step=totals["first_step"],
            last_step=totals["last_step"],
            num_busy_steps=totals["num_busy_steps"],
            num_scheduled_tokens=totals["num_scheduled_tokens"],
        )

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The rows of `replay/sql/<name>.sql` over the window."""
        return _rows(self.trace, name, self.first_step, self.last_step)

    def evidence(self, kind: str, **values: int | str) -> str:
        """The `stepscope sql` command line that runs `sql/evidence/<kind>.sql` on this
        trace, its parameters written in as literals (`$from_step` and `$to_step` the
        window's unless given)."""
        values = {"from_step": self.first_step, "to_step": self.last_step, **values}
        text = " ".join(sql_files.query(_PACKAGE, kind, "sql/evidence").split())
        sql = _PARAMETER.sub(lambda match: _literal(values[match.group(1)]), text)
        return f"stepscope sql {shell_word(str(self.path))} {shell_word(sql)}"


def _rows(trace: Trace, name: str, first: int, last: int) -> list[dict[str, Any]]:
    relation = trace.sql(query(name), {"from_step": first, "to_step": last})
    columns = relation.columns
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]


def _literal(value: int | str) -> str:
    """`value` as a SQL literal: a string quoted, an integer as it is."""
    return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(int(value))


def shell_word(text: str) -> str:
    """`text` as one word for a POSIX shell: in double quotes when it holds a single quote
    and nothing a double-quoted word expands (SQL's literals stay readable), else as
    `shlex.quote` writes it."""
    if "'" in text and not any(char in text for char in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)
