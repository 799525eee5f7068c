"""A reader's memory: a quarter of the machine's at most 8 GiB (or STEPSCOPE_MEMORY_LIMIT),
the rest spilled to a folder of the process's own, never DuckDB's 80 % of the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from stepscope.engine.memory_limit import memory_limit as engine_memory_limit
from stepscope.schema import TraceError, open_trace, reader_memory
from test_hardening_errors import assert_one_line_error
from traces import case, record

SORT = "SELECT count(*), max(r) < 1 FROM (SELECT range, random() AS r FROM range({n}) ORDER BY r)"
"""A sort of `n` rows: 3 million do not fit in 64 MB (they fail there with spilling off)."""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("memory") / "t.duckdb"
    record(case("03"), path)
    return path


def _sql(trace: Path, query: str, limit: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_MEMORY_LIMIT": limit, "TMPDIR": str(tmp)}
    return subprocess.run(
        [sys.executable, "-m", "stepscope", "sql", str(trace), query, "--csv"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip


def test_by_default_a_quarter_of_the_memory_at_most_8_gib(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT", raising=False)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = reader_memory.memory_limit()
    assert limit == min(physical // 4, 8 << 30)
    limits = reader_memory.reader_limits()
    assert limits["memory_limit"] == f"{limit}B"
    assert limits["max_temp_directory_size"] == f"{4 * limit}B"
    with open_trace(trace) as opened:
        ((setting, folder),) = opened.sql(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        ).fetchall()
    assert setting != "" and Path(folder).parent.name.startswith("stepscope-spill-")
    assert Path(folder).parent.parent == Path(tempfile.gettempdir())


@pytest.mark.parametrize(
    ("given", "num_bytes"),
    [
        ("4GB", 4_000_000_000),
        ("512MB", 512_000_000),
        ("16GiB", 16 << 30),
        (" 1.5 gb ", 1.5e9),
        ("8G", 8 << 30),
        ("512M", 512 << 20),
        ("3000000000", 3_000_000_000),
        ("4", 1 << 20),
    ],
)
def test_the_limit_can_be_set(
    given: str, num_bytes: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", given)
    assert reader_memory.memory_limit() == int(num_bytes)


@pytest.mark.parametrize("given", ["8G", "4GB", "16GiB", "512M", "100MB", "3000000000"])
def test_a_run_and_a_reader_read_the_one_setting_alike(
    given: str, trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`STEPSCOPE_MEMORY_LIMIT=8G`, as the recording docs write it, once made every reader
    refuse to start: the run's check and the readers parsed it two ways."""
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", given)
    assert reader_memory.memory_limit() == engine_memory_limit()
    ran = _sql(trace, "SELECT current_setting('memory_limit') AS m", given, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert stepscope_run_accepts(given)


def stepscope_run_accepts(limit: str) -> bool:
    env = {**os.environ, "STEPSCOPE_MEMORY_LIMIT": limit}
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "run", str(case("03")), "--jsonl"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    return result.returncode == 0


@pytest.mark.parametrize("given", ["lots", "0GB", "-1GB", "4PB", "4 parsecs", "G"])
def test_a_limit_that_is_not_a_size_is_an_error(
    given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", given)
    with pytest.raises(TraceError, match=r"^STEPSCOPE_MEMORY_LIMIT=.*: not a size"):
        reader_memory.memory_limit()


def test_a_query_past_the_memory_spills_and_past_the_spill_cap_is_one_line(
    trace: Path, tmp_path: Path
) -> None:
    spilled = _sql(trace, SORT.format(n=3_000_000), "64MB", tmp_path)
    assert spilled.returncode == 0, spilled.stderr
    assert spilled.stdout.splitlines()[1] == "3000000,true"
    too_big = _sql(trace, SORT.format(n=30_000_000), "16MB", tmp_path)
    assert_one_line_error(too_big, "Out of Memory Error", "STEPSCOPE_MEMORY_LIMIT=16GB")
    assert list(tmp_path.iterdir()) == [], "the spill folder goes with the process"
    bad = _sql(trace, "SELECT 1", "lots", tmp_path)
    assert_one_line_error(bad, "STEPSCOPE_MEMORY_LIMIT='lots': not a size")
