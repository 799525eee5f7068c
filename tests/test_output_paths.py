"""Every file a command writes: never an input or a trace, another file only with --force.

Real CLI subprocesses on traces the real recorder wrote; each refusal is one line, exit 2,
and leaves every file as it was, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

import duckdb
import pytest
from conftest import REPO
from test_cli import stepscope
from traces import case, record

UNDER_TEST = "examples.ci.my_scheduler:AdmitAfterPreemption"
"""Drops vLLM's anti-thrash rule: on the anti-thrash case step 5 differs, mean TTFT 1.67 -> 1.33."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`base` and `more` (more KV blocks) side by side; `baselines/` holds a copy of `base`."""
    folder = tmp_path_factory.mktemp("outputs")
    paths = {"base": folder / "base.duckdb", "more": folder / "more.duckdb"}
    record(case("06"), paths["base"])
    more = stepscope("record", str(case("06")), "-o", str(paths["more"]), "--set", "num_blocks=12")
    assert more.returncode == 0, more.stderr
    (folder / "baselines").mkdir()
    paths["baselines"] = folder / "baselines"
    shutil.copy(paths["base"], paths["baselines"] / "anti_thrash.duckdb")
    return paths


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its path, with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def run_in(cwd: Path, *args: str, columns: int | None = 160) -> subprocess.CompletedProcess[str]:
    """The CLI run from `cwd` (so `examples.` imports from the checkout), COLUMNS as given."""
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "stepscope", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)  # fmt: skip


def unwritable_folder() -> Path:
    """A folder no one may create files in, root included."""
    folder = Path("/sys/kernel")
    try:
        tempfile.NamedTemporaryFile(dir=folder).close()
    except OSError:
        return folder
    pytest.skip("no folder here refuses new files")


def _input_cases(t: dict[str, Path], sweep_out: Path) -> list[tuple[list[str], str, Path, str]]:
    """The command, the option refused, its path and why."""
    base, more, baselines = str(t["base"]), str(t["more"]), t["baselines"]
    inside = baselines / "anti_thrash.duckdb"
    grid = ["--grid", "num_blocks=9,12", "-o", str(sweep_out), "--keep", "all"]
    wal = Path(base + ".wal")
    input_ = "is an input of this command"
    return [
        (["export", base, "--perfetto", base], "--perfetto", t["base"], input_),
        (["export", base, "--perfetto", str(wal)], "--perfetto", wal, "write-ahead log of"),
        (["diff", base, more, "--junit", more], "--junit", t["more"], input_),
        (["diff", base, more, "--markdown", more, "--force"], "--markdown", t["more"], input_),
        (["diff", base, more, "--markdown", base, "--append"], "--markdown", t["base"], input_),
        (["check", str(baselines), "--junit", str(inside)], "--junit", inside, input_),
        (["check", str(baselines), "--markdown", str(baselines / "new.duckdb")], "--markdown",
         baselines / "new.duckdb", "where this command reads every *.duckdb as a trace"),
        (["replay", base, "-o", base], "-o", t["base"], input_),
        (["sweep", base, *grid, "--parquet", base, "--force"], "--parquet", t["base"], input_),
        (["record", "--from", base, "-o", base], "-o", t["base"], input_),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(10))
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
    traces: dict[str, Path], tmp_path: Path, index: int
) -> None:
    args, option, path, why = _input_cases(traces, tmp_path / "s.duckdb")[index]
    folder = traces["base"].parent
    before = snapshot(folder)
    result = run_in(tmp_path, *args)
    assert_refused(result, option, str(path), why)
    assert snapshot(folder) == before
    assert list(tmp_path.iterdir()) == []  # no sweep point ran, nothing kept


def test_an_existing_trace_is_refused_even_with_force(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other.duckdb"
    shutil.copy(traces["more"], other)
    base, baselines = str(traces["base"]), str(traces["baselines"])
    cases = [
        ["diff", base, base, "--junit", str(other), "--force"],
        ["diff", base, base, "--markdown", str(other), "--append"],
        ["check", baselines, "--markdown", str(other), "--force"],
        ["export", base, "--perfetto", str(other), "--force"],
        ["sweep", base, "--grid", "num_blocks=9", "-o", str(tmp_path / "s.duckdb"),
         "--parquet", str(other), "--force"],
    ]  # fmt: skip
    before = snapshot(tmp_path)
    for args in cases:
        assert_refused(stepscope(*args), str(other), "an existing trace")
    assert snapshot(tmp_path) == before


def test_another_existing_file_is_replaced_only_with_force(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    junit = tmp_path / "report.xml"
    junit.write_text("my notes\n")
    base, more = str(traces["base"]), str(traces["more"])
    refused = stepscope("diff", base, more, "--junit", str(junit))
    assert_refused(refused, "--junit", str(junit), "--force")
    assert junit.read_text() == "my notes\n" and refused.stdout == ""
    forced = stepscope("diff", base, more, "--junit", str(junit), "--force")
    assert forced.returncode == 1, forced.stderr
    assert ElementTree.parse(junit).getroot().tag == "testsuites"
    markdown = tmp_path / "check.md"
    markdown.write_text("mine\n")
    assert_refused(stepscope("check", str(traces["baselines"]), "--markdown", str(markdown)),
                   "--markdown", "--append")  # fmt: skip
    assert markdown.read_text() == "mine\n"
    args = ("check", str(traces["baselines"]), "--markdown", str(markdown), "--force")
    assert stepscope(*args).returncode == 0
    assert markdown.read_text().startswith("### anti_thrash.duckdb")


def test_an_empty_file_and_a_report_beside_the_baselines_need_no_force(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    """An empty file holds nothing to lose (a CI job's fresh `$GITHUB_STEP_SUMMARY`), and a
    report in a folder of baselines is not read back as one."""
    summary = tmp_path / "step_summary.md"
    summary.touch()
    beside = traces["baselines"] / "report.xml"
    args = ("--markdown", str(summary), "--junit", str(beside))
    result = stepscope("check", str(traces["baselines"]), *args)
    assert result.returncode == 0, result.stderr
    assert summary.read_text().startswith("### anti_thrash.duckdb")
    assert ElementTree.parse(beside).getroot().tag == "testsuites"


def test_append_twice_keeps_what_was_there_and_both_reports(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Build\n\nall green")
    base, more = str(traces["base"]), str(traces["more"])
    first = stepscope("diff", base, more, "--markdown", str(summary), "--append")
    assert first.returncode == 1, first.stderr
    second = stepscope("check", str(traces["baselines"]), "--markdown", str(summary), "--append")
    assert second.returncode == 0, second.stderr
    text = summary.read_text()
    assert text.startswith("## Build\n\nall green\n")
    assert text.index("### stepscope diff") < text.index("### anti_thrash.duckdb")
    assert "❌ FAIL" in text and "✅ pass" in text
    assert_refused(stepscope("diff", base, more, "--append"), "--append", "--markdown")


def test_dash_prints_a_report_to_stdout_and_the_rest_to_stderr(
    traces: dict[str, Path],
) -> None:
    result = stepscope("diff", str(traces["base"]), str(traces["more"]), "--junit", "-")
    assert result.returncode == 1, result.stderr
    assert ElementTree.fromstring(result.stdout).tag == "testsuites"
    assert "first divergence at step" in result.stderr
    checked = stepscope("check", str(traces["baselines"]), "--markdown", "-")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("### anti_thrash.duckdb")
    assert "stepscope check" in checked.stderr and "stepscope check" not in checked.stdout


def test_two_outputs_on_stdout_are_one_line_error(traces: dict[str, Path]) -> None:
    base = str(traces["base"])
    both = stepscope("diff", base, base, "--json", "--markdown", "-")
    assert_refused(both, "--json", "--markdown -", "stdout")
    assert both.stdout == ""
    reports = stepscope("check", str(traces["baselines"]), "--junit", "-", "--markdown", "-")
    assert_refused(reports, "--junit -", "--markdown -")


def test_dash_is_refused_where_the_output_is_not_text(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    base = str(traces["base"])
    sweep = ["sweep", base, "--grid", "num_blocks=9,12"]
    cases = [
        (["record", str(case("06")), "-o", "-"], "-o -"),
        (["replay", base, "-o", "-"], "-o -"),
        (["export", base, "--perfetto", "-"], "--perfetto -"),
        (["export", base, "--parquet", "-"], "--parquet -"),
        ([*sweep, "-o", "-"], "-o -"),
        ([*sweep, "-o", "s.duckdb", "--parquet", "-"], "--parquet -"),
        ([*sweep, "-o", "s.duckdb", "--plot", "num_blocks:num_steps", "--plot-out", "-"],
         "--plot-out -"),
    ]  # fmt: skip
    for args, option in cases:
        assert_refused(run_in(tmp_path, *args), option, "stdout")
    assert list(tmp_path.iterdir()) == []


def test_sweep_outputs_are_checked_before_the_first_point(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    base = str(traces["base"])
    locked = unwritable_folder()
    taken = tmp_path / "taken.svg"
    taken.write_text("<svg/>")
    grid = ["--grid", "num_blocks=9,12", "--keep", "all"]
    result = str(tmp_path / "s.duckdb")
    plot = ["--plot", "num_blocks:num_steps"]
    cases = [
        ([*grid, "-o", str(locked / "s.duckdb")], str(locked)),
        ([*grid, "-o", result, "--parquet", str(locked / "s.parquet")], str(locked)),
        ([*grid, "-o", result, "--parquet", str(tmp_path / "no" / "s.parquet")], "no such folder"),
        ([*grid, "-o", result, *plot, "--plot-out", str(locked / "p.svg")], str(locked)),
        ([*grid, "-o", result, *plot, "--plot-out", str(tmp_path / "no" / "p.svg")], "no such"),
        ([*grid, "-o", result, *plot, "--plot-out", str(tmp_path / "p.png")], "*.svg"),
        ([*grid, "-o", result, *plot, "--plot-out", str(taken)], "--force"),
    ]  # fmt: skip
    for args, words in cases:
        assert_refused(stepscope("sweep", base, *args), words)
        # No point ran: no work folder, no kept trace, no result.
        assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.svg"], args
    assert taken.read_text() == "<svg/>"


REMOVES_THE_FOLDER = """
import shutil

from stepscope.engine import Scheduler


class RemovesTheParquetFolder(Scheduler):
    def schedule(self):
        shutil.rmtree({folder!r}, ignore_errors=True)
        return super().schedule()
"""


def test_a_parquet_copy_that_fails_at_the_end_keeps_the_result(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    copies = tmp_path / "copies"
    copies.mkdir()
    (tmp_path / "removes.py").write_text(REMOVES_THE_FOLDER.format(folder=str(copies)))
    output = tmp_path / "s.duckdb"
    result = run_in(tmp_path, "sweep", str(traces["base"]), "--grid", "num_blocks=9,12",
                    "-o", str(output), "--parquet", str(copies / "s.parquet"), "--jobs", "1",
                    "--scheduler", "removes:RemovesTheParquetFolder")  # fmt: skip
    assert_refused(result, "--parquet", f"the result is kept in {output}")
    with duckdb.connect(str(output), read_only=True) as con:
        points = con.sql("SELECT point, num_blocks FROM sweep_points ORDER BY point").fetchall()
    assert points == [(0, 9), (1, 12)]


@pytest.mark.parametrize("columns", [60, 80])
def test_check_in_a_narrow_pipe_keeps_every_metric_whole(
    traces: dict[str, Path], columns: int
) -> None:
    result = run_in(REPO, "check", str(traces["baselines"]), "--scheduler", UNDER_TEST,
                    columns=columns)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "1.67 -> 1.33" in result.stdout, result.stdout
    assert "…" not in result.stdout


def test_check_in_a_pipe_without_columns_is_as_wide_as_run(traces: dict[str, Path]) -> None:
    result = run_in(REPO, "check", str(traces["baselines"]), "--scheduler", UNDER_TEST,
                    columns=None)  # fmt: skip
    row = next(line for line in result.stdout.splitlines() if "anti_thrash" in line)
    assert "step 5 (decision)" in row and "1.67 -> 1.33" in row


def test_check_json_is_one_document_shaped_like_diff_json(traces: dict[str, Path]) -> None:
    result = run_in(REPO, "check", str(traces["baselines"]), "--scheduler", UNDER_TEST, "--json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["failed"] is True
    (baseline,) = document["baselines"]
    assert baseline["name"] == "anti_thrash.duckdb" and baseline["result"] == "fail"
    assert baseline["first_decision_step"] == 5 and baseline["classification"] == "decision"
    before, after = baseline["metrics"]["mean_ttft_steps"]
    assert round(before, 2) == 1.67 and round(after, 2) == 1.33
    assert baseline["verdict"]["failed"] is True
    assert baseline["b"].startswith("replay through examples.ci.my_scheduler")
    same = stepscope("diff", str(traces["base"]), str(traces["more"]), "--json")
    assert set(json.loads(same.stdout)) <= set(baseline)


def test_what_if_exit_codes_agree_with_diff_and_check(traces: dict[str, Path]) -> None:
    better = stepscope("replay", str(traces["base"]), "--set", "num_blocks=12")
    assert better.returncode == 0, better.stdout + better.stderr
    worse = stepscope("replay", str(traces["more"]), "--set", "num_blocks=9")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "FAIL" in worse.stdout and "got worse" in worse.stdout
    as_json = stepscope("replay", str(traces["more"]), "--set", "num_blocks=9", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["diff"]["verdict"]["failed"]
    bad = stepscope("replay", str(traces["base"]), "--set", "num_blockz=9")
    assert bad.returncode == 2


def test_replay_help_says_what_each_exit_code_means() -> None:
    text = " ".join(stepscope("replay", "--help", columns=200).stdout.split())
    assert "exact: 0 every step identical, 1 a step diverged" in text
    assert "what-if: 0 no metric got worse, 1 one did" in text
    assert "--engine vllm: 0 identical decisions" in text
    assert "2 on bad input" in text
