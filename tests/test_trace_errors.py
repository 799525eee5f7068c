"""Bad traces and bad SQL get one clear error; a trace cannot reach the reader's files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS
from stepscope.engine import InputError
from stepscope.replay.diff import diff_traces
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import REQUIRED_INPUTS
from stepscope.schema import TraceError
from stepscope.schema.trace_keys import KEY_COLUMNS
from test_cli import stepscope
from traces import case, record

import stepscope as api


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t") / "t.duckdb"
    record(case("03"), path)
    return path


def _error(path: Path) -> str:
    with pytest.raises(TraceError) as caught:
        api.open(path)
    return str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in _error(tmp_path / "nope.duckdb")


def test_a_file_that_is_not_duckdb(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n" * 100)
    assert "not a readable trace" in _error(path)


def test_a_duckdb_file_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    assert "not a stepscope trace" in _error(path)


def test_a_newer_schema_version(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "newer.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE _meta SET value = '99' WHERE key = 'schema_version'")
    message = _error(path)
    assert "schema version 99" in message and "upgrade stepscope" in message


def test_an_older_schema_version(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "older.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE _meta SET value = '1' WHERE key = 'schema_version'")
    message = _error(path)
    assert "schema version 1" in message and "re-record the trace" in message


def test_tables_that_do_not_match_the_schema_version(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "edited.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE _requests DROP COLUMN abort_before_update")
    message = _error(path)
    assert "do not match trace schema version" in message
    assert "abort_before_update" in message and "\n" not in message


def test_a_truncated_file(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "truncated.duckdb"
    for fraction in (0.2, 0.5, 0.95):
        path.write_bytes(trace.read_bytes()[: int(trace.stat().st_size * fraction)])
        message = _error(path)
        assert "truncated" in message or "not a readable trace" in message, fraction


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/hostname'",
        "COPY (SELECT 1) TO '/tmp/stepscope-leak.csv'",
        "ATTACH '/tmp/stepscope-other.duckdb' AS other",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "CREATE TABLE x (a INTEGER)",
    ],
)
def test_queries_cannot_touch_files_or_the_trace(trace: Path, query: str) -> None:
    with api.open(trace) as opened, pytest.raises(TraceError):
        opened.sql(query)
    assert not Path("/tmp/stepscope-leak.csv").exists()


def test_bad_sql_names_the_problem(trace: Path) -> None:
    with api.open(trace) as opened:
        with pytest.raises(TraceError, match="no_such_view"):
            opened.sql("SELECT * FROM no_such_view")
        with pytest.raises(TraceError, match="Parser Error"):
            opened.sql("SELEC 1")


def test_cli_errors_are_one_line_and_exit_2(trace: Path, tmp_path: Path) -> None:
    for args in (
        ("sql", str(trace), "SELECT * FROM read_csv('/etc/passwd')"),
        ("sql", str(trace), "SELEC 1"),
        ("info", str(tmp_path / "missing.duckdb")),
        ("sql", "/etc/hostname", "SELECT 1"),
    ):
        result = stepscope(*args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("column", REQUIRED_INPUTS)
def test_a_request_without_an_input_a_replay_needs(
    column: str, trace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "edited.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        con.execute(f"UPDATE _requests SET {column} = NULL WHERE request_index = 1")
        request_id = con.execute("SELECT request_id FROM _requests WHERE request_index = 1")
        who = repr(request_id.fetchone()[0])
    with pytest.raises(InputError) as caught:
        replay_exact(path)
    assert str(caught.value).startswith(f"{path}: ") and who in str(caught.value)
    assert f"{column} is NULL; a replay needs it" in str(caught.value)


def test_a_null_prompt_token_is_one_error_and_the_trace_stays_as_it_was(
    trace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "edited.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        con.execute(
            "UPDATE _requests SET prompt_token_ids = list_concat(prompt_token_ids, [NULL]) "
            "WHERE request_index = 2"
        )
    before = path.read_bytes()
    for args in (("replay", str(path)), ("replay", str(path), "--set", "max_num_seqs=2")):
        result = stepscope(*args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert "prompt_token_ids holds a NULL token id; a replay needs it" in line
    assert path.read_bytes() == before


KEYS = [(t, c) for t, columns in KEY_COLUMNS.items() if t != "_spec_decode" for c in columns]


@pytest.mark.parametrize(("table", "column"), KEYS, ids=[f"{t}.{c}" for t, c in KEYS])
def test_a_null_key_is_refused_by_replay_and_diff(
    table: str, column: str, trace: Path, tmp_path: Path
) -> None:
    """Rows are read by these columns; a NULL one was a Python error deep in the reader."""
    path = _edited(trace, tmp_path, f'UPDATE {table} SET "{column}" = NULL WHERE rowid = 0')
    expected = f"{table}.{column} is NULL in a row"
    with pytest.raises(TraceError, match=re.escape(expected)):
        replay_exact(path)
    with pytest.raises(TraceError, match=re.escape(expected)):
        diff_traces(trace, path)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ("UPDATE _block_ids SET request_index = 999 WHERE rowid = 0", "request_index 999 names no"),
        ("UPDATE _scheduled SET request_index = -1 WHERE rowid = 0", "request_index -1 names no"),
        (
            "UPDATE _requests SET request_index = 7 WHERE request_index = 0",
            "request_index 0 names no request of the trace",
        ),
        ("UPDATE _requests SET request_index = 1 WHERE request_index = 0", "holds a number twice"),
    ],
)
def test_a_request_index_that_names_no_request_is_refused(
    edit: str, expected: str, trace: Path, tmp_path: Path
) -> None:
    path = _edited(trace, tmp_path, edit)
    for args in (("replay", str(path)), ("diff", str(trace), str(path))):
        result = stepscope(*args)
        assert result.returncode == 2, args
        (line,) = result.stderr.strip().splitlines()
        assert expected in line and "Traceback" not in result.stderr


def _edited(trace: Path, tmp_path: Path, edit: str) -> Path:
    """A copy of `trace` with `edit` run on it, which must change exactly one row."""
    path = tmp_path / "edited.duckdb"
    shutil.copy(trace, path)
    with duckdb.connect(str(path)) as con:
        assert con.execute(edit).fetchall() == [(1,)]
    return path


def test_an_edited_input_diverges_with_the_replays_skips_shown(trace: Path, tmp_path: Path) -> None:
    """A grammar that never compiles keeps the last request waiting: the replay diverges
    where it arrived, its decisions that step holding the skip (once an AssertionError)."""
    last = "(SELECT max(rowid) FROM _requests)"
    edit = f"UPDATE _requests SET grammar_ready_step = 99999 WHERE rowid = {last}"
    result = stepscope("replay", str(_edited(trace, tmp_path, edit)))
    assert result.returncode == 1, result.stderr
    assert "waiting, skipped (grammar_not_ready)" in result.stdout


def test_a_sampling_param_out_of_range_is_one_error(trace: Path, tmp_path: Path) -> None:
    path = _edited(trace, tmp_path, "UPDATE _requests SET top_p = 2.5 WHERE request_index = 1")
    with pytest.raises(InputError, match=r"request '.+': top_p must be in \(0, 1\], got 2.5"):
        replay_exact(path)


def test_a_null_verified_token_is_one_error(tmp_path: Path) -> None:
    """A speculative-decoding trace's tapes come from `_spec_decode.sampled_token_ids`."""
    trace = tmp_path / "spec.duckdb"
    record(TESTS / "conformance_spec" / "53_spec_all_accepted.json", trace)
    edit = (
        "UPDATE _spec_decode SET sampled_token_ids = list_concat(sampled_token_ids, [NULL]) "
        "WHERE rowid = (SELECT min(rowid) FROM _spec_decode WHERE sampled_token_ids IS NOT NULL)"
    )
    path = _edited(trace, tmp_path, edit)
    with pytest.raises(InputError, match=r"_spec_decode\.sampled_token_ids holds a NULL token id"):
        replay_exact(path)
