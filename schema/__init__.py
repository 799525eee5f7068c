"""The trace schema: typed, commented tables, the reader's views, and the readers."""

from .ddl import logical_tables
from .query_rows import QueryRows
from .reader import TraceReader
from .rows import Rows
from .step_detail import StepDetail, read_step
from .step_gaps import StepGap
from .trace import Trace, open_trace
from .trace_error import TraceDamagedError, TraceError
from .trace_pair import B_SCHEMA, TracePair, open_pair
from .trace_set import TraceSet, open_traces
from .version import SCHEMA_VERSION
from .view_infos import ViewInfo, view_infos

__all__ = [
    "B_SCHEMA",
    "SCHEMA_VERSION",
    "QueryRows",
    "Rows",
    "StepDetail",
    "StepGap",
    "Trace",
    "TraceDamagedError",
    "TraceError",
    "TracePair",
    "TraceReader",
    "TraceSet",
    "ViewInfo",
    "logical_tables",
    "open_pair",
    "open_trace",
    "open_traces",
    "read_step",
    "view_infos",
]
