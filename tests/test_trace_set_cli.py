"""`stepscope sql` over many traces, `info` and `tui` on one trace of a folder, and a folder
given where one trace is wanted."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_cli import stepscope
from traces import case, record
from typer.testing import CliRunner

from stepscope import tui as tui_package
from stepscope.cli import app


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    record(case("03"), folder / "rank0.duckdb", meta={"dp_rank": "0", "dp_size": "2"})
    record(case("05"), folder / "rank1.duckdb", meta={"dp_rank": "1", "dp_size": "2"})
    return folder


def test_a_folder_answers_with_trace_and_rank_first(fleet: Path) -> None:
    query = "SELECT trace, rank, step, request_id, needed_by FROM preemptions ORDER BY ALL"
    result = stepscope("sql", str(fleet), query, "--json")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"trace": "rank0", "rank": 0, "step": 6, "request_id": "r1", "needed_by": "r0"},
        {"trace": "rank1", "rank": 1, "step": 2, "request_id": "B", "needed_by": "A"},
        {"trace": "rank1", "rank": 1, "step": 2, "request_id": "C", "needed_by": "A"},
    ]


def test_several_files_and_star_columns(fleet: Path) -> None:
    files = [str(fleet / "rank0.duckdb"), str(fleet / "rank1.duckdb")]
    result = stepscope("sql", *files, "SELECT * FROM summary", "--csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0][:3] == ["trace", "rank", "num_steps"]
    assert [row[:3] for row in rows[1:]] == [["rank0", "0", "13"], ["rank1", "1", "8"]]


def test_a_window_reads_each_traces_steps_in_it(fleet: Path) -> None:
    query = "SELECT trace, min(step), max(step), count(*) FROM steps GROUP BY ALL ORDER BY ALL"
    result = stepscope("sql", str(fleet), query, "--csv", "--from-step", "6", "--to-step", "10")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))[1:]
    assert rows == [["rank0", "6", "10", "5"], ["rank1", "6", "7", "2"]]
    beyond = stepscope("sql", str(fleet), "SELECT 1", "--from-step", "8", "--to-step", "9")
    assert beyond.returncode == 0, "rank0 holds them"
    none = stepscope("sql", str(fleet), "SELECT 1", "--from-step", "13")
    assert none.returncode == 2
    assert none.stderr.strip() == (
        "error: --from-step 13: no trace of the set holds a step from 13 on "
        "(`stepscope info FOLDER` lists the steps each holds)"
    )


def test_one_trace_alone_answers_as_before(fleet: Path) -> None:
    result = stepscope("sql", str(fleet / "rank0.duckdb"), "SELECT * FROM summary", "--csv")
    assert result.stdout.splitlines()[0].startswith("num_steps,")


def test_the_listing_names_the_views_and_the_traces(fleet: Path) -> None:
    listing = stepscope("sql", str(fleet)).stdout
    assert "why_preempted" in listing and "traces (the trace column)" in listing
    assert "rank0" in listing and "rank1" in listing
    alone = stepscope("sql", str(fleet / "rank0.duckdb")).stdout
    assert "why_preempted" in alone and "trace column" not in alone


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{fleet}/rank0.duckdb", "{fleet}/nope.duckdb"], "nope.duckdb: no such file or folder"),
        (["{fleet}", "CREATE TABLE x (a INTEGER)"], "CREATE is not a query"),
        (["{fleet}", "SELECT * FROM nope"], "nope does not exist"),
        (["{fleet}", "{fleet}/rank0.duckdb", "SELECT 1"], "two traces named 'rank0'"),
    ],
)
def test_bad_sets_and_queries_are_one_line_errors(
    fleet: Path, args: list[str], message: str
) -> None:
    result = stepscope("sql", *(a.format(fleet=fleet) for a in args))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_info_reads_one_trace_of_a_folder_by_name(fleet: Path) -> None:
    result = stepscope("info", str(fleet), "--trace", "rank1", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["path"] == str(fleet / "rank1.duckdb") and report["meta"]["dp_rank"] == "1"
    result = stepscope("info", str(fleet), "--trace", "rank7")
    message = "no trace named 'rank7' (its traces: rank0, rank1)"
    assert result.returncode == 2 and result.stderr.strip() == f"error: {fleet}: {message}"
    listed = json.loads(stepscope("info", str(fleet), "--json").stdout)
    assert [trace["name"] for trace in listed["traces"]] == ["rank0", "rank1"]


def test_tui_opens_one_trace_of_a_folder_and_diffs_it_with_another(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[Path, Path | None]] = []

    def run_tui(
        path: Path,
        other: Path | None = None,
        *,
        ignore_block_ids: bool = False,
        follow: bool = False,
        window: object = None,
    ) -> None:
        opened.append((path, other))

    monkeypatch.setattr(tui_package, "run_tui", run_tui)
    runner = CliRunner()
    assert runner.invoke(app, ["tui", str(fleet), "--trace", "rank0"]).exit_code == 0
    diff = ["tui", str(fleet), "--trace", "rank0", "--diff", "rank1"]
    assert runner.invoke(app, diff).exit_code == 0
    assert opened == [
        (fleet / "rank0.duckdb", None),
        (fleet / "rank0.duckdb", fleet / "rank1.duckdb"),
    ]
    result = stepscope("tui", str(fleet), "--trace", "rank0", "--diff", "rank9")
    assert result.returncode == 2 and "no trace named 'rank9'" in result.stderr


@pytest.mark.parametrize(
    "args", [["replay"], ["export", "--perfetto", "{out}"], ["diff", "{fleet}"]]
)
def test_a_folder_where_one_trace_is_wanted_names_the_ones_to_give(
    fleet: Path, tmp_path: Path, args: list[str]
) -> None:
    command, *rest = args
    rest = [a.format(out=tmp_path / "x.pftrace", fleet=fleet) for a in rest]
    result = stepscope(command, str(fleet), *rest)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"error: {fleet}: a folder of 2 traces, not one; give one of them: "
        f"{fleet / 'rank0.duckdb'}, {fleet / 'rank1.duckdb'}"
    )
    assert list(tmp_path.iterdir()) == []
