"""The engine follows the vLLM version a workload or trace names: 0.32.x or 0.33.0.

Where the versions decide differently (a priority self-preemption ends 0.32's running
pass), `conformance_v032/` holds what real vLLM 0.32.0 did; each case must also fail
under 0.33's rules, so the version is what makes it pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS, read_jsonl
from oracle_compare import first_difference, run_lines
from stepscope.engine import Workload, load_workload
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from test_cli import stepscope
from traces import record, step_summaries

V032 = TESTS / "conformance_v032"
SYNC = sorted(V032.glob("*.json"))
ASYNC = sorted((V032 / "async").glob("*.json"))
KNOWN = "(known: 0.32.x, 0.33.0)"


def _expected(path: Path) -> list[dict[str, object]]:
    return read_jsonl(path.with_name(path.stem + ".expected.jsonl"))


def _as_version(path: Path, version: str) -> Workload:
    workload = load_workload(path)
    return workload.with_config(workload.config.with_knobs({"vllm_version": version}))


@pytest.mark.parametrize("case", SYNC, ids=[case.stem for case in SYNC])
def test_0_33_rules_do_not_pass_the_0_32_cases(case: Path) -> None:
    assert first_difference(run_lines(_as_version(case, "0.33.0")), _expected(case)) is not None


@pytest.mark.parametrize("case", ASYNC, ids=[case.stem for case in ASYNC])
def test_async_cases_decide_as_vllm_0_32_did(case: Path, tmp_path: Path) -> None:
    ours = step_summaries(record(case, tmp_path / "ours.duckdb").path)
    assert ours == _expected(case)
    as_033 = record(_as_version(case, "0.33.0"), tmp_path / "as-033.duckdb").path
    assert step_summaries(as_033) != _expected(case)


def test_run_jsonl_under_the_knob_is_the_0_32_oracle_line_for_line(tmp_path: Path) -> None:
    case = SYNC[0]
    source = json.loads(case.read_text())
    del source["config"]["vllm_version"]
    workload = tmp_path / "no-version.json"
    workload.write_text(json.dumps(source))
    default = stepscope("run", str(workload), "--jsonl")
    chosen = stepscope("run", str(workload), "--jsonl", "--set", "vllm_version=0.32.0")
    assert chosen.returncode == 0, chosen.stderr
    lines = [json.loads(line) for line in chosen.stdout.splitlines()]
    assert first_difference(lines, _expected(case)) is None
    assert lines[-1]["emulates_vllm"] == "0.32.0"
    defaults = [json.loads(line) for line in default.stdout.splitlines()]
    assert defaults[-1]["emulates_vllm"] == "0.33.0"
    assert first_difference(defaults, _expected(case)) is not None


def _one_line_error(result: subprocess.CompletedProcess[str], *parts: str) -> None:
    stderr = result.stderr.strip()
    assert result.returncode == 2, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert all(part in stderr for part in parts), stderr


def test_an_unknown_version_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    source = json.loads(SYNC[0].read_text())
    source["config"]["vllm_version"] = "0.34.0"
    bad.write_text(json.dumps(source))
    _one_line_error(stepscope("run", str(bad)), "bad.json", "'0.34.0'", KNOWN)
    _one_line_error(stepscope("run", str(SYNC[0]), "--set", "vllm_version=0.31"), KNOWN)

    trace = record(SYNC[0], tmp_path / "t.duckdb").path
    with duckdb.connect(str(trace)) as con:
        con.execute("UPDATE _config SET vllm_version = '9.9.9'")
    _one_line_error(stepscope("replay", str(trace)), "t.duckdb", "'9.9.9'", KNOWN)


def test_a_trace_replays_by_the_version_it_names(tmp_path: Path) -> None:
    trace = record(SYNC[0], tmp_path / "t.duckdb").path
    with open_trace(trace) as opened:
        assert opened.config["vllm_version"] == "0.32.0"
        assert opened.meta["emulates_vllm"] == "0.32.0"
    assert replay_exact(trace).divergence is None
    what_if = stepscope("replay", str(trace), "--set", "vllm_version=0.33.0", "--json")
    assert json.loads(what_if.stdout)["diff"]["classification"] == "decision"


def _schema_2(trace: Path, out: Path, meta_version: str | None) -> Path:
    """The trace as schema version 2 wrote it: no `_config.vllm_version`."""
    shutil.copy(trace, out)
    with duckdb.connect(str(out)) as con:
        con.execute("ALTER TABLE _config DROP COLUMN vllm_version")
        con.execute("UPDATE _meta SET value = '2' WHERE key = 'schema_version'")
        if meta_version is not None:
            con.execute("INSERT INTO _meta VALUES ('vllm_version', ?)", [meta_version])
    return out


def test_a_schema_2_trace_follows_its_meta_version_or_0_33(tmp_path: Path) -> None:
    trace = record(SYNC[0], tmp_path / "t.duckdb").path
    named = _schema_2(trace, tmp_path / "named.duckdb", "0.32.0")
    assert replay_exact(named).divergence is None
    unnamed = _schema_2(trace, tmp_path / "unnamed.duckdb", None)
    assert replay_exact(unnamed).divergence is not None
