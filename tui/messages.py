"""Every message the TUI posts: workers post results, widgets post what the user did."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
from stepscope.schema import StepDetail, TraceDamagedError
from stepscope.schema.trace_file import is_file_error
from textual.message import Message

from .models import PlotSeries, QueryResult, RequestLife, TailState, TraceInfo

if TYPE_CHECKING:
    from stepscope.replay.diff import StepComparison
    from stepscope.replay.doctor import Finding
    from stepscope.replay.sweep.table import SweepTable

    from .console_session import ConsoleSession
    from .replay_session import ReplayedStep, ReplaySession
    from .trace_source import TraceSource


class TraceOpened(Message):
    """A trace (and the one to diff against, if any) opened for reading."""

    def __init__(self, source: TraceSource, other: TraceSource | None) -> None:
        super().__init__()
        self.source = source
        self.other = other

    @property
    def info(self) -> TraceInfo:
        return self.source.info


class TraceGrew(Message):
    """Followed, the recording holds more (or other) steps than the trace open now: `source`
    is the recording opened again, `state` what it holds."""

    def __init__(self, source: TraceSource, state: TailState) -> None:
        super().__init__()
        self.source = source
        self.state = state


class TraceFailed(Message):
    """A trace could not be opened; `error` says why in one line."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class StepCursorMoved(Message):
    """The step timeline's cursor is on a new step."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class PagesWanted(Message):
    """The step timeline needs these pages of rows to paint."""

    def __init__(self, pages: tuple[int, ...]) -> None:
        super().__init__()
        self.pages = pages


class PageLoaded(Message):
    """A page of step rows, as Arrow, starting at page index × page size."""

    def __init__(self, page: int, table: pa.Table) -> None:
        super().__init__()
        self.page = page
        self.table = table


class PlotLoaded(Message):
    def __init__(self, series: PlotSeries) -> None:
        super().__init__()
        self.series = series


class StepDetailLoaded(Message):
    """A step's detail, the other trace's when diffing, and which parts of its decision differ."""

    def __init__(
        self, detail: StepDetail, other: StepDetail | None, differences: tuple[str, ...]
    ) -> None:
        super().__init__()
        self.detail = detail
        self.other = other
        self.differences = differences


class StepFound(Message):
    """A search for a step (next interesting step, ...) ended; `step` is None when none matched."""

    def __init__(self, step: int | None, what: str) -> None:
        super().__init__()
        self.step = step
        self.what = what


class DiffComputed(Message):
    def __init__(self, diff: StepComparison, note: str | None = None) -> None:
        super().__init__()
        self.diff = diff
        self.note = note
        """Where the comparison started when not at step 0, and why."""


class FailedOn(enum.Enum):
    """What made a query fail."""

    USER_QUERY = "user_query"
    """The SQL the user typed."""
    TRACE = "trace"
    """One of the TUI's own reads: the trace holds what it cannot show."""
    DAMAGED_FILE = "damaged_file"
    """The trace's bytes: a damaged or cut block."""


class QueryFailed(Message):
    """A query the TUI ran failed; `error` is DuckDB's message in one line."""

    def __init__(self, error: str, what: str = "query", on: FailedOn = FailedOn.TRACE) -> None:
        super().__init__()
        self.error = error
        self.what = what
        self.on = on


def query_failed(error: BaseException, what: str) -> QueryFailed:
    """A worker's read of the trace failed with `error`."""
    damaged = isinstance(error, TraceDamagedError) or (
        isinstance(error, duckdb.Error) and is_file_error(error)
    )
    return QueryFailed(str(error), what, FailedOn.DAMAGED_FILE if damaged else FailedOn.TRACE)


def user_query_failed(error: BaseException) -> QueryFailed:
    """The query the user typed failed: on its SQL, or on the trace's damaged bytes."""
    damaged = isinstance(error, TraceDamagedError)
    return QueryFailed(str(error), on=FailedOn.DAMAGED_FILE if damaged else FailedOn.USER_QUERY)


class RequestIdsLoaded(Message):
    """Every request id of the trace, in workload order (for finding a request)."""

    def __init__(self, request_ids: tuple[str, ...]) -> None:
        super().__init__()
        self.request_ids = request_ids


class RequestLifeLoaded(Message):
    def __init__(self, life: RequestLife | None, request_id: str) -> None:
        super().__init__()
        self.life = life
        self.request_id = request_id


class QueryFinished(Message):
    """A SQL console query finished."""

    def __init__(self, result: QueryResult) -> None:
        super().__init__()
        self.result = result


class QueryCancelled(Message):
    """A SQL console query was interrupted."""

    def __init__(self, query: str) -> None:
        super().__init__()
        self.query = query


class ReplayReady(Message):
    """The replay session is built: the workload is back out of the trace; its replay is
    being recorded."""

    def __init__(self, session: ReplaySession) -> None:
        super().__init__()
        self.session = session


class ReplayRecorded(Message):
    """The session's replay is recorded and compared with the trace."""


class ReplayAdvanced(Message):
    """The replay's cursor moved forward; `steps` are the steps it passed (the last few,
    when many), `sides` the last one as the recording and the replay hold it."""

    def __init__(
        self,
        steps: tuple[ReplayedStep, ...],
        stopped: str,
        sides: tuple[StepDetail, StepDetail] | None,
    ) -> None:
        super().__init__()
        self.steps = steps
        self.stopped = stopped
        self.sides = sides


class ConsoleReady(Message):
    """The SQL console's connection is open."""

    def __init__(self, session: ConsoleSession) -> None:
        super().__init__()
        self.session = session


class ReplayProgress(Message):
    """A replay's recording, or a condition's search, has reached `step` (posted every
    thousand steps or so)."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class SweepLoaded(Message):
    """A sweep result read and ranked: its table, front marked."""

    def __init__(self, table: SweepTable) -> None:
        super().__init__()
        self.table = table


class FindingsLoaded(Message):
    """`stepscope doctor`'s findings on the trace, without what-ifs (for the `f` panel)."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__()
        self.findings = findings
