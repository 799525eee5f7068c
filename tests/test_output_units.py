"""Names that tell baselines apart, and ISO 8601 durations for `sql --json`."""

from __future__ import annotations

import datetime
from pathlib import Path

from stepscope.baseline_names import distinct_names
from stepscope.sql_output import iso_duration


def test_each_baseline_gets_its_shortest_distinct_tail() -> None:
    paths = [Path("ci/x/first/case.duckdb"), Path("ci/x/second/case.duckdb"), Path("ci/rag.duckdb")]
    assert distinct_names(paths) == ["first/case.duckdb", "second/case.duckdb", "rag.duckdb"]
    assert distinct_names([Path("/a/b.duckdb")]) == ["b.duckdb"]
    same = Path("/a/b.duckdb")
    assert distinct_names([same, same]) == ["/a/b.duckdb", "/a/b.duckdb"]


def test_iso_durations() -> None:
    delta = datetime.timedelta
    assert iso_duration(delta(0)) == "PT0S"
    assert iso_duration(delta(days=1)) == "P1D"
    assert iso_duration(delta(days=2, hours=3, microseconds=250000)) == "P2DT3H0.25S"
    assert iso_duration(delta(minutes=5)) == "PT5M"
    assert iso_duration(-delta(seconds=90)) == "-PT1M30S"
