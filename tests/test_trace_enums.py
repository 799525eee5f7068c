"""Every engine enum a trace holds has its SQL ENUM in `tables.sql`, with the same values."""

from __future__ import annotations

import enum
import importlib
import pkgutil
import re
from pathlib import Path

import duckdb
import stepscope.engine
from conftest import TESTS
from stepscope.schema.ddl import enum_types
from stepscope.schema.trace_set import open_traces
from traces import record

import stepscope

_NOT_TRACE_FACTS: frozenset[str] = frozenset()
"""Engine StrEnums that never reach a trace (none today: each is a recorded fact)."""


def _engine_str_enums() -> dict[str, type[enum.StrEnum]]:
    """Every StrEnum defined in `stepscope.engine`, by its SQL type name (`AdmissionStop`:
    `admission_stop`)."""
    found: dict[str, type[enum.StrEnum]] = {}
    package = stepscope.engine
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, enum.StrEnum)
                and value.__module__ == module.__name__
                and value.__name__ not in _NOT_TRACE_FACTS
            ):
                found[re.sub(r"(?<!^)(?=[A-Z])", "_", value.__name__).lower()] = value
    return found


def test_every_engine_str_enum_equals_its_tables_sql_enum() -> None:
    """A new member without its SQL value (or a new enum without its ENUM) fails here."""
    sql = enum_types()
    engine = _engine_str_enums()
    assert {"waiting_skip_reason", "finish_reason", "admission_stop"} <= engine.keys()
    for name, member_enum in engine.items():
        assert name in sql, f"{member_enum.__name__}: no `CREATE TYPE {name}` in tables.sql"
        assert tuple(m.value for m in member_enum) == sql[name], name


def test_a_recorded_trace_holds_only_its_enums_values(tmp_path: Path) -> None:
    """The skip and finish details a real recording writes read back as their ENUMs."""
    (workload,) = (TESTS / "grammar_workloads").glob("01*.json")
    trace = record(workload, tmp_path / "t.duckdb").path
    with stepscope.open(trace) as opened:
        skips = opened.sql(
            "SELECT DISTINCT CAST(detail AS waiting_skip_reason) FROM events WHERE kind = 'skip'"
        ).fetchall()
        finishes = opened.sql(
            "SELECT count(*), count(TRY_CAST(detail AS finish_reason)) FROM events"
            " WHERE kind = 'finish'"
        ).fetchall()
    assert skips == [("grammar_not_ready",)]
    ((num_finished, num_cast),) = finishes
    assert num_finished > 0 and num_cast == num_finished


def test_a_trace_recorded_before_the_detail_enums_opens(tmp_path: Path) -> None:
    """The detail ENUMs are additive: a schema-5 trace without them reads as before."""
    (workload,) = (TESTS / "grammar_workloads").glob("01*.json")
    trace = record(workload, tmp_path / "t.duckdb").path
    query = "SELECT step, request_id, kind, detail FROM events ORDER BY seq"
    with stepscope.open(trace) as opened:
        expected = opened.sql(query).fetchall()
    with duckdb.connect(str(trace)) as con:
        con.execute("DROP TYPE waiting_skip_reason")
        con.execute("DROP TYPE finish_reason")
    with stepscope.open(trace) as opened:
        assert opened.sql(query).fetchall() == expected
        assert opened.sql("SELECT count(*) FROM why_waiting").fetchall()[0][0] > 0
    with open_traces([trace]) as traces:
        assert traces.sql(query).fetchall() == expected
