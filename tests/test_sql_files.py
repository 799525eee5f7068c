"""Every `.sql` file loads through the schema's one loader, says what it is, and runs on a trace."""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from conftest import REPO
from recordings import record_folder
from stepscope.schema import Trace, sql_files
from stepscope.schema.lockdown import connect_locked
from stepscope.schema.recording_layout import REQUEST_ABORTS, REQUEST_GRAMMARS, scan
from stepscope.schema.recording_tables import read_parquet
from traces import case, record

PACKAGES = {
    "engine": "stepscope.engine",
    "tracer": "stepscope.tracer",
    "schema": "stepscope.schema",
    "replay": "stepscope.replay",
    "tui": "stepscope.tui",
    "stepscope": "stepscope",
}
"""Each part's folder and the package it installs as."""

PARAMETERS: dict[str, list[Any] | dict[str, Any]] = {
    "schema/sql/step_detail.sql": [3],
    "schema/sql/condition_steps.sql": [0, 9],
    "schema/sql/step_drafts.sql": [3],
    "schema/sql/step_preemptions.sql": [3],
    "tui/sql/next_interesting.sql": [0],
    "tui/sql/previous_interesting.sql": [5],
    "tui/sql/plot_buckets.sql": [4, 20],
    "tui/sql/request_facts.sql": ["r0"],
    "tui/sql/request_life.sql": ["r0"],
    "tui/sql/request_waiting.sql": ["r0"],
    "schema/sql/attached_columns.sql": ["memory"],
    "schema/sql/break_step_row.sql": {
        "step": 3,
        "idle": False,
        "num_scheduled_tokens": 40,
        "num_scheduled_reqs": 2,
        "num_preemptions": 0,
        "num_finished": 1,
        "num_free_blocks_after_schedule": 7,
        "running_pass_end": "all_scheduled",
        "admission_stop": "queue_empty",
        "scheduled_ids": ["r0", "r1"],
        "preempted_ids": [],
        "finished_ids": ["r0"],
        "arrived_ids": [],
    },
    "tui/sql/step_page.sql": [0, 9],
    "schema/sql/read_table.sql": ["_steps"],
    "schema/sql/unknown_request_reference.sql": ["_scheduled"],
    "tracer/export/sql/snapshot_since.sql": [10, 5_000_000_000],
    "tracer/export/sql/perfetto_steps.sql": [5, 20],
    "tracer/export/sql/perfetto_requests.sql": [5, 20],
    "tracer/export/sql/perfetto_request_ids.sql": [5, 20],
    "tracer/export/sql/snapshot_checkpoint.sql": [10],
    "tracer/export/sql/snapshot_requests.sql": [0, 10],
    "tracer/export/sql/snapshot_table.sql": ["_steps", 0, 10],
    "schema/sql/file_blocks.sql": [None],
    "schema/sql/metadata_blocks.sql": [None],
    "schema/sql/stored_tables.sql": [None],
    "schema/sql/used_blocks.sql": ["_steps"],
    "schema/sql/table_segments.sql": ["_steps"],
    "replay/sql/fingerprint_sets.sql": [0, 100],
    "replay/sql/fingerprint_steps.sql": [0, 100],
    "replay/sql/fingerprint_scheduled.sql": [0, 100],
    "replay/sql/stored_block_ids.sql": [0, 100],
    "replay/sql/stored_preemptions.sql": [0, 100],
    "replay/sql/stored_inputs.sql": [0, 100],
    "replay/sql/run_metrics.sql": [0, 100],
    "replay/sql/request_outcomes.sql": [0, 100],
    "replay/sql/request_inputs.sql": [0, [1], 100],
    "replay/sql/request_ids_of.sql": [[0, 1]],
    "replay/sql/request_indices_of.sql": [["r0", "r1"]],
    "replay/sql/recorded_tokens.sql": [0, 100],
    "replay/sql/recorded_outputs.sql": [0, 100],
    "replay/sql/recorded_drafts.sql": [0, 100],
    "replay/sql/checkpoint_row.sql": [3],
    "replay/sql/checkpoint_requests.sql": [3],
    "replay/sql/checkpoint_blocks.sql": [3],
    "replay/sql/checkpoint_batch.sql": [3],
    "replay/sql/checkpoint_cadence.sql": [3],
    "replay/sql/resume_drafts.sql": [3, [0]],
    "replay/sql/latency_seconds.sql": {"base": 0.01, "per_token": 1e-4, "per_request": 1e-3},
    "replay/sql/sweep_request_latency.sql": {
        "base": 0.01,
        "per_token": 1e-4,
        "per_request": 1e-3,
        "from_step": 0,
        "to_step": 9,
    },
    "replay/sql/doctor_admission_stall.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_budget_underuse.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_head_of_line.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_lora_gate.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_prefix_cache.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_preemption_thrash.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_priority_inversion.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_spec_decode.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_waiting.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/doctor_window.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/evidence/preemption_thrash.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/evidence/head_of_line_blocking.sql": {"from_step": 0, "to_step": 100, "head": "r0"},
    "replay/sql/evidence/starvation.sql": {"request_id": "r0"},
    "replay/sql/evidence/admission_stall.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/evidence/priority_inversion.sql": {
        "from_step": 0,
        "to_step": 100,
        "request_id": "r0",
    },
    "replay/sql/evidence/prefix_cache_thrash.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/evidence/lora_gate_stall.sql": {"from_step": 0, "to_step": 100},
    "replay/sql/evidence/budget_underuse.sql": {"from_step": 0, "to_step": 100},
    "tracer/sql/set_meta.sql": ["note", "written by a test"],
    "tracer/export/sql/export_table.sql": {
        "table": "_steps",
        "engine": "stepscope",
        "host": "h",
        "rank": None,
        "created_at": "2026-01-01T00:00:00+00:00",
    },
}
"""Values for the files that take parameters (a new file with parameters adds its own)."""

_PARAMETER = re.compile(r"\$(\w+)")
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def sql_paths() -> Iterator[tuple[str, str]]:
    """(package, path inside it) of every `.sql` file under the parts' folders."""
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.sql")):
            yield package, path.relative_to(REPO / folder).as_posix()


ALL_FILES = [f"{package}:{path}" for package, path in sql_paths()]


def _split(file: str) -> tuple[str, str]:
    package, path = file.split(":")
    return package, path


def _key(file: str) -> str:
    package, path = _split(file)
    folder = next(f for f, p in PACKAGES.items() if p == package)
    return f"{folder}/{path}"


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real trace with preemptions and aborts (requests r0, r1, ...)."""
    path = tmp_path_factory.mktemp("sql") / "t.duckdb"
    record(case("22"), path)
    return path


@pytest.fixture(scope="module")
def recording_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same workload recorded into a folder of segments."""
    return record_folder(case("22"), tmp_path_factory.mktemp("sql") / "recording", "5steps")


def _run_on_recording_files(folder: Path, statement: str) -> None:
    """A recording query on the files of `folder`: the meta files as its parameter, or the
    views of the stored requests, aborts and grammar-ready steps it reads."""
    segments = scan(folder)
    meta, requests, aborts, grammars = (
        [str(path) for segment in segments for path in segment.files(table)]
        for table in ("_meta", "_requests", REQUEST_ABORTS, REQUEST_GRAMMARS)
    )
    with duckdb.connect() as con:
        if "read_parquet" in statement:
            rows = con.execute(statement, [meta]).fetchall()
        else:
            con.execute(f"CREATE VIEW stored_requests AS FROM {read_parquet(requests, unify=True)}")
            for view, files, none in (
                ("request_aborts", aborts, "recording_no_aborts"),
                ("request_grammars", grammars, "recording_no_grammars"),
            ):
                numbered = f"FROM {read_parquet(files, unify=False, numbered=True)}"
                source = numbered if files else sql_files.query("stepscope.schema", none)
                con.execute(f"CREATE VIEW {view} AS {source}")
            rows = con.execute(statement).fetchall()
    assert rows


def test_the_parts_hold_sql_files() -> None:
    assert len(ALL_FILES) > 30
    assert "stepscope.schema:tables.sql" in ALL_FILES


@pytest.mark.parametrize("file", ALL_FILES)
def test_each_file_has_a_header_naming_its_parameters(file: str) -> None:
    package, path = _split(file)
    text = sql_files.source(package, path)
    header = sql_files.header(text)
    assert header and header[0], f"{file}: starts with a `--` line saying what it returns"
    statement = sql_files.strip_comments(text)
    assert statement and "--" not in _QUOTED.sub("", statement)
    named = " ".join(header)
    missing = {p for p in _PARAMETER.findall(_QUOTED.sub("", statement)) if f"${p}" not in named}
    assert not missing, f"{file}: parameters not named in its header: {sorted(missing)}"
    assert "?" not in _QUOTED.sub("", statement), f"{file}: name parameters ($1, $name), not ?"


@pytest.mark.parametrize("file", ALL_FILES)
def test_each_file_is_shipped_with_its_package(file: str) -> None:
    package, path = _split(file)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"].get(package, [])
    assert any(fnmatch(path, pattern) for pattern in patterns), f"{file}: not in package-data"


_QUERIES = [
    f
    for f in ALL_FILES
    if "/views/" not in f"/{_split(f)[1]}"
    and not f.startswith("stepscope.tracer:sql/")
    and not f.startswith("stepscope.schema:spark/")  # Spark SQL: `test_spark_views.py` runs it
]


FILE_QUERIES = frozenset(
    f"schema/sql/{name}.sql"
    for name in (
        "file_blocks",
        "metadata_blocks",
        "used_blocks",
        "table_segments",
        "read_table",
        "stored_tables",
        "database_size",
    )
)
"""Queries of a trace file's own storage, run on the file itself before (or beside) a reader."""

RECORDING_QUERIES = frozenset(
    {
        "schema/sql/recording_meta.sql",
        "schema/sql/recording_requests.sql",
        "schema/sql/stored_step_columns.sql",
    }
)
"""Queries of a recording folder's files, run on them before the views are made."""


@pytest.mark.parametrize("file", [f for f in _QUERIES if not f.endswith(":tables.sql")])
def test_each_query_runs_on_a_trace(file: str, trace_path: Path, recording_path: Path) -> None:
    package, path = _split(file)
    folder, name = PurePosixPath(path).parent, PurePosixPath(path).stem
    statement = sql_files.query(package, name, str(folder))
    if _key(file) in RECORDING_QUERIES:
        _run_on_recording_files(recording_path, statement)
        return
    if _key(file) in FILE_QUERIES:
        with connect_locked(trace_path) as con:
            result = con.execute(statement, PARAMETERS.get(_key(file)))
            assert result.description
            result.fetchall()
        return
    with Trace(trace_path) as trace:
        relation = trace.sql(statement, PARAMETERS.get(_key(file)))
        assert relation.columns
        relation.fetchall()


def test_every_view_runs_on_a_trace(trace_path: Path) -> None:
    with Trace(trace_path) as trace:
        for info in trace.views():
            assert trace.view(info.name).columns, info.name
            trace.view(info.name).fetchall()


def test_the_writers_statements_run_on_a_trace(trace_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    shutil.copy(trace_path, copy)
    aborts = pa.table(
        {
            "request_index": pa.array([0], pa.int32()),
            "abort_step": pa.array([7], pa.int32()),
            "abort_before_update": pa.array([True]),
        }
    )
    with duckdb.connect(str(copy)) as con:
        con.execute(sql_files.query("stepscope.tracer", "set_meta"), ["note", "a"])
        con.execute(sql_files.query("stepscope.tracer", "set_meta"), ["note", "b"])
        con.register("_batch", aborts)
        con.execute(sql_files.query("stepscope.tracer", "request_aborts"))
        assert con.table("_meta").filter("key = 'note'").fetchall() == [("note", "b")]
        row = con.table("_requests").filter("request_index = 0")
        assert row.select("abort_step", "abort_before_update").fetchall() == [(7, True)]
        grammars = pa.table(
            {"request_index": pa.array([0], pa.int32()), "grammar_ready_step": pa.array([3])}
        )
        con.register("_batch", grammars)
        con.execute(sql_files.query("stepscope.tracer", "request_grammars"))
        assert row.select("grammar_ready_step").fetchall() == [(3,)]
        unwritten = sql_files.query("stepscope.tracer", "unwritten_bytes")
        assert con.execute(unwritten).fetchall()[0][0] > 0  # committed, not checkpointed
        con.checkpoint()
        assert con.execute(unwritten).fetchall() == [(0,)]
    # The compaction's statements run in test_trace_compact.py (they need two catalogs).
    assert sorted(f for f in ALL_FILES if f.startswith("stepscope.tracer:sql/")) == [
        "stepscope.tracer:sql/recorded_prompts.sql",
        "stepscope.tracer:sql/recorded_tables.sql",
        "stepscope.tracer:sql/request_aborts.sql",
        "stepscope.tracer:sql/request_grammars.sql",
        "stepscope.tracer:sql/set_meta.sql",
        "stepscope.tracer:sql/shared_prompt_drop.sql",
        "stepscope.tracer:sql/shared_prompt_mismatches.sql",
        "stepscope.tracer:sql/shared_prompt_prefix_table.sql",
        "stepscope.tracer:sql/shared_prompt_prefixes.sql",
        "stepscope.tracer:sql/shared_prompt_rows.sql",
        "stepscope.tracer:sql/shared_prompt_table.sql",
        "stepscope.tracer:sql/shared_prompt_view.sql",
        "stepscope.tracer:sql/unwritten_bytes.sql",
    ]


def test_parameters_are_given_for_each_file_that_takes_them() -> None:
    keys = {_key(f) for f in ALL_FILES}
    assert set(PARAMETERS) <= keys, (
        f"PARAMETERS names files that are gone: {set(PARAMETERS) - keys}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-- head\nSELECT 1 -- tail\nFROM t", "SELECT 1 \nFROM t"),
        (
            "SELECT '--not a comment', \"a--b\" FROM t -- gone",
            "SELECT '--not a comment', \"a--b\" FROM t",
        ),
        ("SELECT 'it''s -- kept' AS x", "SELECT 'it''s -- kept' AS x"),
        (
            "CREATE TABLE t (\n    a INTEGER,  -- a; with a semicolon\n    b INTEGER  -- b\n);",
            "CREATE TABLE t (\n    a INTEGER,  \n    b INTEGER  \n);",
        ),
    ],
)
def test_one_comment_rule(text: str, expected: str) -> None:
    assert sql_files.strip_comments(text) == expected


_STATEMENT = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|WITH|COMMENT ON|CHECKPOINT|PRAGMA|COPY)\b"
)


ALLOWED = {
    ("tracer/writer.py", "INSERT INTO {table} BY NAME"): "the table's name spliced in",
    ("tracer/compact.py", "COPY FROM DATABASE {_ORIGINAL} TO {_COPY}"): "catalog names spliced in",
    ("schema/ddl.py", "COMMENT ON {kind} {name}"): "a table's or view's name spliced in",
    ("schema/ddl.py", "COMMENT ON COLUMN {name}.{column}"): "a column's name spliced in",
    ("tracer/compact.py", 'INSERT INTO {_COPY}.main."{table}"'): "a stored table's name",
    ("schema/ddl.py", "CREATE TABLE (\\w+)"): "a pattern that parses tables.sql",
    ("schema/ddl.py", "CREATE TYPE (\\w+) AS ENUM"): "a pattern that parses tables.sql",
    ("tui/screens/console.py", "SELECT * FROM summary"): "the console's first text to edit",
    ("tui/screens/console.py", "SELECT * FROM {event.option.id}"): "text to edit: a view picked",
    ("schema/step_condition.py", "SELECT min(step) FROM step_rows WHERE"): "the user's condition",
    ("schema/member_views.py", "CREATE SCHEMA IF NOT EXISTS {schema}"): "a schema's name",
    ("schema/member_views.py", "CREATE TYPE {name} AS ENUM"): "a type from tables.sql",
    ("schema/member_views.py", "CREATE VIEW {schema}.{table} AS"): "a table's name spliced in",
    ("schema/member_views.py", "CREATE VIEW {schema}.{info.name} AS"): "a view spliced in",
    ("schema/member_views.py", "SELECT {', '.join(items)} FROM"): "a table's columns",
    ("schema/trace_set.py", "CREATE VIEW main.{name} AS"): "a view's name spliced in",
    ("schema/spark_views.py", "CREATE DATABASE IF NOT EXISTS trace_"): "Spark: a database",
    ("schema/spark_views.py", "CREATE OR REPLACE VIEW {"): "Spark: a view's name spliced in",
    ("schema/spark_views.py", "SELECT {_literal(name)} AS trace"): "Spark: a trace's name",
    ("schema/trace_keys.py", "SELECT 1 FROM {table} WHERE {nulls}"): "key columns spliced in",
    ("schema/trace_keys.py", "SELECT {step} FROM {table} WHERE {column}"): "a key column's name",
    ("schema/trace_keys.py", "SELECT min(request_index), max(request_index) FROM {table}"): (
        "a table's name spliced in"
    ),
    ("schema/trace_keys.py", "SELECT request_index FROM {table} ANTI JOIN"): "a table's name",
    ("schema/recording_tables.py", "SELECT * FROM {read_parquet("): "a recording's files",
    ("schema/step_window.py", "SELECT * FROM ({tables[name]}) WHERE"): "a table's SELECT, cut",
    ("schema/step_window.py", "SELECT * FROM ({tables[REQUESTS]}) WHERE"): "the same, requests",
    ("schema/step_window.py", "CREATE TABLE {schema}.{_LISTED} AS"): "a schema's name",
    ("schema/reader.py", "SELECT count(*), min(step), max(step) FROM ("): "a table's SELECT",
}
"""SQL that stays in Python: templates that splice an identifier or the user's own text, UI text.

Every other statement lives in a `.sql` file; an entry whose string is gone must go too.
"""


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each string in the code (f-strings with their fields as `{...}`), docstrings left out."""
    nodes = list(ast.walk(tree))
    skipped = {id(n.value) for n in nodes if isinstance(n, ast.Expr)}
    skipped |= {id(part) for n in nodes if isinstance(n, ast.JoinedStr) for part in n.values}
    for node in nodes:
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(_f_string_part(part) for part in node.values)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        ):
            yield node.lineno, node.value


def _f_string_part(part: ast.expr) -> str:
    if isinstance(part, ast.Constant):
        return str(part.value)
    assert isinstance(part, ast.FormattedValue)
    return "{" + ast.unparse(part.value) + "}"


def _sql_strings() -> Iterator[tuple[str, int, str]]:
    for folder in PACKAGES:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, text in _strings(tree):
                if _STATEMENT.match(text):
                    yield path.relative_to(REPO).as_posix(), line, text.strip()


def test_no_python_file_holds_a_sql_statement() -> None:
    found = list(_sql_strings())
    allowed = [
        (path, line, text)
        for path, line, text in found
        if any(path == where and text.startswith(start) for where, start in ALLOWED)
    ]
    stray = [
        f"{path}:{line}: {text[:60]!r}"
        for path, line, text in found
        if (path, line, text) not in allowed
    ]
    assert not stray, "SQL belongs in a .sql file:\n" + "\n".join(stray)
    used = {
        (where, start)
        for where, start in ALLOWED
        for path, _, text in allowed
        if path == where and text.startswith(start)
    }
    assert not ALLOWED.keys() - used, (
        f"allowed but gone (drop them): {sorted(ALLOWED.keys() - used)}"
    )
