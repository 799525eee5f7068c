"""`stepscope diff`, `replay` and `check` from the command line: exit codes and CI reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import REPO
from stepscope.schema import open_trace, read_step
from test_cli import stepscope
from traces import case, record


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("diff")
    paths = {"base": folder / "base.duckdb", "more": folder / "more.duckdb"}
    record(case("06"), paths["base"])
    assert stepscope("record", str(case("06")), "-o", str(paths["more"]),
                     "--set", "num_blocks=12").returncode == 0  # fmt: skip
    return paths


def test_a_trace_diffed_with_itself_exits_0(traces: dict[str, Path]) -> None:
    result = stepscope("diff", str(traces["base"]), str(traces["base"]))
    assert result.returncode == 0, result.stderr
    assert "identical" in result.stdout


def test_different_configs_are_said_first(traces: dict[str, Path]) -> None:
    result = stepscope("diff", str(traces["base"]), str(traces["more"]))
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[1].startswith("configs differ: num_blocks 9 -> 12")
    assert "first divergence at step" in result.stdout


def test_json_junit_and_markdown_reports(traces: dict[str, Path], tmp_path: Path) -> None:
    junit, markdown = tmp_path / "report.xml", tmp_path / "report.md"
    result = stepscope("diff", str(traces["base"]), str(traces["more"]), "--json",
                       "--junit", str(junit), "--markdown", str(markdown))  # fmt: skip
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["classification"] == "decision"
    assert data["config_differences"] == {"num_blocks": [9, 12]}
    assert data["verdict"]["failed"] is True
    root = ElementTree.parse(junit).getroot()
    assert root.tag == "testsuites" and int(root.get("failures", "0")) >= 1
    suite = root.find("testsuite")
    assert suite is not None and int(suite.get("tests", "0")) == len(suite.findall("testcase"))
    failed = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert "decisions" in failed
    text = markdown.read_text()
    assert text.startswith("### stepscope diff") and "FAIL" in text
    assert "| metric | A | B | change |" in text


def test_json_gives_the_first_divergent_step_of_each_trace_by_column_name(
    traces: dict[str, Path],
) -> None:
    result = stepscope("diff", str(traces["base"]), str(traces["more"]), "--json")
    data = json.loads(result.stdout)
    step = data["first_decision_step"]
    a, b = data["first_step_detail"]
    for side, path in ((a, traces["base"]), (b, traces["more"])):
        with open_trace(path) as trace:
            assert side == json.loads(json.dumps(read_step(trace, step).as_json(), default=str))
    assert a["step"] == step and a["row"]["step"] == step
    tables = {"scheduled", "allocations", "preemptions", "drafts", "events"}
    assert set(a) == {"step", "row", *tables} and a["scheduled"][0]["request_id"] == "H"


def test_fail_on_metrics_uses_tolerances(traces: dict[str, Path]) -> None:
    base, more = str(traces["base"]), str(traces["more"])
    # More blocks only help: no metric gets worse, so a metrics check passes.
    assert stepscope("diff", base, more, "--fail-on", "metrics").returncode == 0
    # The other way round everything gets worse; a generous tolerance still fails preemptions.
    tolerances = ["--tolerance", "steps_to_drain=50%", "--tolerance", "mean_ttft_steps=100%"]
    worse = stepscope("diff", more, base, "--fail-on", "metrics", *tolerances)
    assert worse.returncode == 1 and "preemptions got worse" in worse.stdout
    bad = stepscope("diff", base, more, "--fail-on", "metrics", "--tolerance", "speed=5%")
    assert bad.returncode == 2 and "--tolerance 'speed=5%'" in bad.stderr


def test_ignore_block_ids(traces: dict[str, Path], tmp_path: Path) -> None:
    import duckdb

    shifted = tmp_path / "shifted.duckdb"
    shutil.copy(traces["base"], shifted)
    with duckdb.connect(str(shifted)) as con:
        con.execute("UPDATE _block_ids SET block_id = block_id + 100 WHERE step = 0")
    assert stepscope("diff", str(traces["base"]), str(shifted)).returncode == 1
    same = stepscope("diff", str(traces["base"]), str(shifted), "--ignore", "block_ids")
    assert same.returncode == 0, same.stdout


def test_replay_exit_codes(traces: dict[str, Path], tmp_path: Path) -> None:
    assert stepscope("replay", str(traces["base"])).returncode == 0
    diverged = stepscope("replay", str(traces["base"]), "--json",
                         "--scheduler", "my_scheduler:AdmitAfterPreemption")  # fmt: skip
    assert diverged.returncode == 2 and "cannot import" in diverged.stderr
    out = tmp_path / "replayed.duckdb"
    assert stepscope("replay", str(traces["base"]), "-o", str(out)).returncode == 0
    assert stepscope("diff", str(traces["base"]), str(out)).returncode == 0
    again = stepscope("replay", str(traces["base"]), "-o", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_what_if_from_the_cli(traces: dict[str, Path]) -> None:
    result = stepscope("replay", str(traces["base"]), "--set", "num_blocks=12", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["knobs"] == {"num_blocks": 12}
    assert data["diff"]["metrics"]["preemptions"] == [1, 0]


def test_check_passes_baselines_and_fails_a_changed_scheduler(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    shutil.copy(traces["base"], baselines / "anti_thrash.duckdb")
    passed = stepscope("check", str(baselines))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    junit = tmp_path / "check.xml"
    env_scheduler = "examples.ci.my_scheduler:AdmitAfterPreemption"
    failed = stepscope_in(REPO, "check", str(baselines), "--scheduler", env_scheduler,
                          "--junit", str(junit))  # fmt: skip
    assert failed.returncode == 1
    assert "step 5 (decision)" in failed.stdout
    assert ElementTree.parse(junit).getroot().get("failures") == "1"


def stepscope_in(cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "stepscope", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)  # fmt: skip


def test_check_names_baselines_apart_and_side_b_as_the_scheduler(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    deep = tmp_path / ("a_long_folder_name_for_baselines_" * 2)
    for suite in ("first", "second"):
        (deep / suite).mkdir(parents=True)
        shutil.copy(traces["base"], deep / suite / "anti_thrash.duckdb")
    markdown = tmp_path / "check.md"
    result = stepscope("check", str(deep), "--markdown", str(markdown), columns=80)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if "anti_thrash" in line]
    assert any("first/anti_thrash.duckdb" in row for row in rows), result.stdout
    assert any("second/anti_thrash.duckdb" in row for row in rows), result.stdout
    report = markdown.read_text()
    assert "### first/anti_thrash.duckdb" in report and "### second/anti_thrash.duckdb" in report
    assert "replay through stepscope.engine" in report
    assert ".duckdb` —" not in report  # side B is not named by its deleted temp file


def test_check_verbose_names_side_b_as_the_scheduler(traces: dict[str, Path]) -> None:
    """`check -v` prints each diff with side B named as the replay, not its temp file."""
    result = stepscope("check", str(traces["base"]), "-v", columns=200)
    assert result.returncode == 0, result.stdout + result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("A "))
    assert "B replay through stepscope.engine" in header, header
    assert "/tmp" not in header.split(" B ", 1)[1], header
