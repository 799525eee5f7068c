"""Who recorded a trace: the identity columns every exported row carries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stepscope.schema import Trace


@dataclass(frozen=True)
class TraceIdentity:
    """The trace's name (its file name without `.duckdb`, a recording's folder name) and
    the engine that recorded it."""

    name: str
    engine: str | None
    host: str | None
    rank: int | None
    created_at: str | None

    @classmethod
    def of(cls, trace: Trace) -> TraceIdentity:
        """Read from the trace's `meta`; `rank` is its data-parallel rank (None when not DP)."""
        meta = trace.meta
        rank = meta.get("dp_rank")
        return cls(
            name=trace_name(trace.path if trace.recording is None else trace.recording.folder),
            engine=meta.get("engine"),
            host=meta.get("host"),
            rank=int(rank) if rank is not None and rank.isdigit() else None,
            created_at=meta.get("created_at"),
        )


def trace_name(path: Path) -> str:
    """A trace's name: its file name without the `.duckdb` suffix."""
    return path.name.removesuffix(".duckdb")
