"""The trace schema: typed, commented tables, the reader's views, and the read API."""

from .ddl import logical_tables
from .query_rows import QueryRows
from .rows import Rows
from .step_detail import StepDetail, read_step
from .trace import Trace, TraceDamagedError, TraceError, ViewInfo, open_trace, view_infos
from .version import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "QueryRows",
    "Rows",
    "StepDetail",
    "Trace",
    "TraceDamagedError",
    "TraceError",
    "ViewInfo",
    "logical_tables",
    "open_trace",
    "read_step",
    "view_infos",
]
