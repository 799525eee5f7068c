"""The step-time model recovers known costs, and turns step counts into seconds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from stepscope.replay.cost_model import fit_cost_model, latency_seconds
from test_cli import stepscope as stepscope_cli
from traces import case, prefill_heavy_workload, record

import stepscope


@pytest.fixture(scope="module")
def timed_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace whose step timings are replaced by 2 ms + 3 µs/token + 50 µs/request."""
    folder = tmp_path_factory.mktemp("cost")
    original = folder / "original.duckdb"
    record(prefill_heavy_workload(num_requests=24), original)
    timed = folder / "timed.duckdb"
    shutil.copy(original, timed)
    with duckdb.connect(str(timed)) as con:
        con.execute(
            "UPDATE _steps SET schedule_ns = 2000000 + 3000 * num_scheduled_tokens "
            "+ 50000 * num_scheduled_reqs, model_ns = 0, update_ns = 0 WHERE NOT idle"
        )
    return timed


def test_the_fit_recovers_the_costs(timed_trace: Path) -> None:
    with stepscope.open(timed_trace) as trace:
        model = fit_cost_model(trace)
    assert model is not None
    assert model.base == pytest.approx(2e-3, rel=1e-6)
    assert model.per_token == pytest.approx(3e-6, rel=1e-6)
    assert model.per_request == pytest.approx(5e-5, rel=1e-6)
    assert model.r_squared == pytest.approx(1.0)


def test_seconds_follow_the_model(timed_trace: Path) -> None:
    with stepscope.open(timed_trace) as trace:
        model = fit_cost_model(trace)
        assert model is not None
        seconds = latency_seconds(trace, model)
        (expected_total,) = trace.sql(
            "SELECT sum(schedule_ns) / 1e9 FROM _steps WHERE NOT idle"
        ).fetchall()[0]
    assert seconds["total_s"] == pytest.approx(expected_total, rel=1e-6)
    assert 0 < seconds["mean_ttft_s"] <= seconds["total_s"]
    assert seconds["mean_tpot_s"] > 0


def test_too_few_timed_steps_fit_nothing(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(case("14"), trace)  # three steps
    with stepscope.open(trace) as opened:
        assert fit_cost_model(opened) is None


def _retimed(original: Path, target: Path, schedule_ns: str) -> Path:
    shutil.copy(original, target)
    with duckdb.connect(str(target)) as con:
        con.execute(
            f"UPDATE _steps SET schedule_ns = {schedule_ns}, model_ns = 0, update_ns = 0 "
            "WHERE NOT idle"
        )
    return target


@pytest.mark.parametrize(
    ("schedule_ns", "problem"),
    [
        ("1000000 + (step * 7919) % 1000 * 1000", "R²"),  # timings that tokens do not explain
        ("5000000 - 1000 * num_scheduled_tokens", "negative per-token cost"),
    ],
)
def test_a_poor_fit_gives_a_warning_and_no_seconds(
    timed_trace: Path, tmp_path: Path, schedule_ns: str, problem: str
) -> None:
    trace = _retimed(timed_trace, tmp_path / "poor.duckdb", schedule_ns)
    with stepscope.open(trace) as opened:
        model = fit_cost_model(opened)
    assert model is not None and model.problem is not None and problem in model.problem
    result = stepscope_cli("replay", str(trace), "--set", "max_num_batched_tokens=512")
    assert result.returncode == 0, result.stderr
    assert "step-time fit is poor" in result.stdout
    assert "in seconds" not in result.stdout
    as_json = json.loads(
        stepscope_cli("replay", str(trace), "--set", "max_num_batched_tokens=512", "--json").stdout
    )
    assert as_json["seconds"] == {} and problem in as_json["cost_model_problem"]


def test_a_good_fit_is_presented_in_seconds(timed_trace: Path) -> None:
    result = stepscope_cli("replay", str(timed_trace), "--set", "max_num_batched_tokens=512")
    assert result.returncode == 0, result.stderr
    assert "in seconds, modelled" in result.stdout and "fit is poor" not in result.stdout
