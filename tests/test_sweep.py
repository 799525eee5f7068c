"""`stepscope sweep`: one what-if per grid point, the same rows however they are run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import REPO
from rich.console import Console
from stepscope.replay.diff import diff_traces, run_metrics
from stepscope.replay.from_step import StepWindow
from stepscope.replay.sweep.grid import SweepPoint
from stepscope.replay.sweep.metrics import SECONDS_METRICS, point_metrics
from stepscope.replay.sweep.point import PointResult
from stepscope.replay.whatif import replay_whatif
from stepscope.schema import open_trace
from test_hardening_limits import stepscope
from traces import record

from stepscope.commands.sweep_output import PointProgress

WORKLOAD = REPO / "examples" / "workloads" / "burst_preemption.toml"
GRID = ["--grid", "num_blocks=41,80", "--grid", "max_num_batched_tokens=128,256"]


def rows(result: Path, table: str = "sweep_points") -> list[dict[str, Any]]:
    with duckdb.connect(str(result), read_only=True) as con:
        relation = con.sql(f"SELECT * FROM {table}")
        return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def meta(result: Path) -> dict[str, str | None]:
    return {row["key"]: row["value"] for row in rows(result, "sweep_meta")}


def without_folder(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with each kept trace reduced to its file name (the folders differ by design).

    Compared by `repr`, which tells every float bit apart (even 0.0 from -0.0).
    """
    return [{**row, "kept_trace": row["kept_trace"] and Path(row["kept_trace"]).name}
            for row in points]  # fmt: skip


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bursts into a small KV pool: preemptions at the recorded config."""
    path = tmp_path_factory.mktemp("sweep") / "burst.duckdb"
    record(WORKLOAD, path)
    return path


@pytest.fixture(scope="module")
def one_job(trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("one") / "sweep.duckdb"
    parquet = output.with_suffix(".parquet")
    result = stepscope("sweep", str(trace), *GRID, "-o", str(output), "--jobs", "1",
                       "--keep", "1,2", "--parquet", str(parquet))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return output


def test_points_are_the_grid_in_order_with_natural_types(one_job: Path) -> None:
    points = rows(one_job)
    assert [(r["point"], r["num_blocks"], r["max_num_batched_tokens"]) for r in points] == [
        (0, 41, 128), (1, 41, 256), (2, 80, 128), (3, 80, 256)
    ]  # fmt: skip
    with duckdb.connect(str(one_job), read_only=True) as con:
        types = dict(con.sql("SELECT column_name, data_type FROM duckdb_columns() "
                             "WHERE table_name = 'sweep_points'").fetchall())  # fmt: skip
    assert types["num_blocks"] == "BIGINT" and types["num_steps"] == "INTEGER"
    assert types["recomputed_tokens"] == "BIGINT" and types["ttft_p99_steps"] == "DOUBLE"
    assert list(types)[-1] == "kept_trace"
    assert points[0]["num_preemptions"] > 0 and points[0]["recomputed_tokens"] > 0
    assert points[3]["num_steps"] < points[0]["num_steps"]


def test_the_meta_names_the_trace_grid_and_fit(one_job: Path, trace: Path) -> None:
    info = meta(one_job)
    assert info["sweep_schema_version"] == "1"
    assert info["trace"] == str(trace.resolve())
    assert info["grid"] == json.dumps(
        {"num_blocks": [41, 80], "max_num_batched_tokens": [128, 256]}
    )
    assert info["scheduler"] == "stepscope.engine.scheduler.Scheduler"
    assert info["fit_ok"] in {"true", "false"}
    assert (info["fit_problem"] is None) == (info["fit_ok"] == "true")


def test_the_rows_are_the_same_with_any_number_of_jobs(
    trace: Path, one_job: Path, tmp_path: Path
) -> None:
    output = tmp_path / "sweep.duckdb"
    result = stepscope("sweep", str(trace), *GRID, "-o", str(output), "--jobs", "2",
                       "--keep", "1,2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress on a pipe
    assert repr(without_folder(rows(output))) == repr(without_folder(rows(one_job)))
    assert "4 points written to" in result.stdout


def test_each_point_is_the_what_if_replay_run_alone(
    trace: Path, one_job: Path, tmp_path: Path
) -> None:
    points = {row["point"]: row for row in rows(one_job)}
    for index, knobs in ((1, ["num_blocks=41", "max_num_batched_tokens=256"]),
                         (2, ["num_blocks=80", "max_num_batched_tokens=128"])):  # fmt: skip
        alone = tmp_path / f"alone-{index}.duckdb"
        sets = [arg for knob in knobs for arg in ("--set", knob)]
        result = stepscope("replay", str(trace), *sets, "-o", str(alone))
        assert result.returncode in (0, 1), result.stderr
        kept = Path(points[index]["kept_trace"])
        assert kept == one_job.with_name("sweep.points") / f"point-{index}.duckdb"
        assert diff_traces(kept, alone).identical
        with open_trace(alone) as replayed:
            expected = point_metrics(replayed, None)
            figures = run_metrics(replayed)
        row = points[index]
        assert {k: row[k] for k in expected if k not in SECONDS_METRICS} == {
            k: v for k, v in expected.items() if k not in SECONDS_METRICS
        }
        assert figures["steps_to_drain"] == row["num_steps"]
        assert figures["preemptions"] == row["num_preemptions"]
        assert figures["p90_ttft_steps"] == pytest.approx(row["ttft_p90_steps"])
        assert figures["mean_ttft_steps"] == round(row["ttft_mean_steps"], 2)
        assert figures["tokens_per_step"] == round(row["tokens_per_step"], 2)
        assert figures["peak_kv_usage"] == round(row["kv_usage_max"], 4)


def test_the_parquet_copy_holds_the_rows_and_the_meta(one_job: Path) -> None:
    table = pq.read_table(one_job.with_suffix(".parquet"))
    assert table.to_pylist() == rows(one_job)
    metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    assert metadata == {k: v for k, v in meta(one_job).items() if v is not None}


def test_kept_traces_lie_beside_the_result(one_job: Path) -> None:
    kept = [row["kept_trace"] for row in rows(one_job)]
    assert kept[0] is None and kept[3] is None
    assert sorted(p.name for p in one_job.with_name("sweep.points").iterdir()) == [
        "point-1.duckdb", "point-2.duckdb"
    ]  # fmt: skip
    assert not [p for p in one_job.parent.iterdir() if p.name.startswith(".")]


@pytest.fixture(scope="module")
def timed_trace(trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace with step timings that a step-time model explains exactly."""
    timed = tmp_path_factory.mktemp("timed") / "timed.duckdb"
    timed.write_bytes(trace.read_bytes())
    with duckdb.connect(str(timed)) as con:
        con.execute(
            "UPDATE _steps SET schedule_ns = 2000000 + 3000 * num_scheduled_tokens "
            "+ 50000 * num_scheduled_reqs, model_ns = 0, update_ns = 0 WHERE NOT idle"
        )
    return timed


def test_seconds_come_from_a_good_fit(timed_trace: Path, tmp_path: Path) -> None:
    output = tmp_path / "sweep.duckdb"
    result = stepscope("sweep", str(timed_trace), "--grid", "num_blocks=41,80", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert "the step-time fit is poor" not in result.stdout
    info = meta(output)
    assert info["fit_ok"] == "true" and info["fit_problem"] is None
    assert float(info["fit_r2"] or 0) == pytest.approx(1.0)
    row = rows(output)[1]
    alone = replay_whatif(timed_trace, tmp_path / "alone.duckdb", {"num_blocks": 80})
    assert row["ttft_mean_s"] == pytest.approx(alone.seconds["mean_ttft_s"][1], rel=1e-9)
    assert row["tpot_mean_s"] == pytest.approx(alone.seconds["mean_tpot_s"][1], rel=1e-9)
    assert row["ttft_p99_s"] >= row["ttft_mean_s"] > 0


def test_a_poor_fit_leaves_seconds_out_and_says_so(trace: Path, tmp_path: Path) -> None:
    poor = tmp_path / "poor.duckdb"
    poor.write_bytes(trace.read_bytes())
    with duckdb.connect(str(poor)) as con:
        con.execute("UPDATE _steps SET schedule_ns = 1000000 + 7919 * (step % 13), "
                    "model_ns = 0, update_ns = 0 WHERE NOT idle")  # fmt: skip
    output = tmp_path / "sweep.duckdb"
    result = stepscope("sweep", str(poor), "--grid", "num_blocks=41,80", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert "the step-time fit is poor" in result.stdout
    info = meta(output)
    assert info["fit_ok"] == "false" and "R²" in (info["fit_problem"] or "")
    assert all(row[name] is None for row in rows(output) for name in SECONDS_METRICS)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "num_blockz=4,8"], "--grid num_blockz: unknown knob (known: "),
        (["--grid", "num_blocks=41,1"], "--grid num_blocks=1: config.num_blocks: must be at least"),
        (["--grid", "max_num_seqs=8,64", "--grid", "max_num_batched_tokens=32,128"],
         "--grid point 2 (max_num_seqs=64 max_num_batched_tokens=32): config.max_num_batched_"),
        (["--grid", "num_blocks"], "--grid 'num_blocks': expected KNOB=V1,V2,..."),
        (["--grid", "num_blocks=41,,80"], "--grid num_blocks=41,,80: an empty value"),
        (["--grid", "num_blocks=41", "--grid", "num_blocks=80"], "--grid num_blocks: given twice"),
        (["--grid", "num_blocks=41,41"], "--grid num_blocks: value 41 is given twice"),
        (["--grid", "num_steps=1"], "--grid num_steps: a result column has that name"),
        (["--grid", "num_blocks=41", "--keep", "1"], "--keep '1': not a point of this grid"),
        (["--grid", "num_blocks=41", "--jobs", "2", "--ray", "local"], "--jobs and --ray"),
        (["--grid", "num_blocks=41", "--scheduler", "nowhere:X"], "--scheduler 'nowhere:X'"),
        (["--grid", "num_blocks=41", "--plot-out", "p.png"], "--plot-out needs --plot X:Y"),
    ],
)  # fmt: skip
def test_a_bad_sweep_is_one_line_and_exit_2(
    trace: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    result = stepscope("sweep", str(trace), *args, "-o", str(tmp_path / "s.duckdb"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_bad_view_option_fails_before_any_work(trace: Path, tmp_path: Path) -> None:
    args = ["--grid", "num_blocks=41", "-o", str(tmp_path / "s.duckdb"), "--sort", "no_such"]
    result = stepscope("sweep", str(trace), *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_needs_a_trace_a_grid_and_a_result(trace: Path) -> None:
    result = stepscope("sweep", str(trace), "--grid", "num_blocks=41")
    assert result.returncode == 2
    assert result.stderr.startswith("error: expected TRACE --grid KNOB=V1,V2,... -o SWEEP.duckdb")


def test_an_existing_result_is_never_overwritten(trace: Path, tmp_path: Path) -> None:
    output = tmp_path / "s.duckdb"
    output.write_text("mine")
    result = stepscope("sweep", str(trace), "--grid", "num_blocks=41", "-o", str(output))
    assert result.returncode == 2 and "already exists" in result.stderr
    assert output.read_text() == "mine"


FAILING_SCHEDULER = """
from stepscope.engine import Scheduler


class FailsWithFewBlocks(Scheduler):
    num_calls = 0

    def schedule(self):
        self.num_calls += 1
        if self.config.num_blocks < 50 and self.num_calls == 30:
            raise RuntimeError("a scheduler bug at its 30th step")
        return super().schedule()
"""


def test_a_failed_point_leaves_nothing_written(trace: Path, tmp_path: Path) -> None:
    (tmp_path / "failing.py").write_text(FAILING_SCHEDULER)
    output = tmp_path / "out" / "s.duckdb"
    output.parent.mkdir()
    result = stepscope("sweep", str(trace), "--grid", "num_blocks=80,41", "-o", str(output),
                       "--scheduler", "failing:FailsWithFewBlocks", "--keep", "all",
                       "--jobs", "2", cwd=tmp_path)  # fmt: skip
    assert result.returncode != 0
    assert "a scheduler bug at its 30th step" in result.stderr
    assert list(output.parent.iterdir()) == []


def test_without_ray_the_flag_says_how_to_install_it(trace: Path, tmp_path: Path) -> None:
    script = ("import sys; sys.modules['ray'] = None; from stepscope.cli import main; "
              "sys.argv[0] = 'stepscope'; main()")  # fmt: skip
    args = ["sweep", str(trace), "--grid", "num_blocks=41", "-o", str(tmp_path / "s.duckdb"),
            "--ray", "auto"]  # fmt: skip
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    assert result.returncode == 2
    assert (
        result.stderr == "error: --ray needs Ray, an optional extra: pip install 'stepscope[ray]'\n"
    )


@pytest.mark.slow
def test_ray_tasks_give_the_same_rows_as_processes(
    trace: Path, one_job: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    output = tmp_path / "sweep.duckdb"
    result = stepscope("sweep", str(trace), *GRID, "-o", str(output), "--ray", "local",
                       "--keep", "1,2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert repr(without_folder(rows(output))) == repr(without_folder(rows(one_job)))
    kept = Path(rows(output)[2]["kept_trace"])
    assert diff_traces(kept, Path(rows(one_job)[2]["kept_trace"])).identical


def test_progress_shows_each_point_on_a_terminal() -> None:
    out = StringIO()
    console = Console(file=out, force_terminal=True, width=100, no_color=True)
    point = SweepPoint(1, {"num_blocks": 80})
    metrics = {"num_steps": 201, "num_preemptions": 9}
    with PointProgress("sweep t.duckdb", 2, console) as progress:
        progress.on_point(point, PointResult(1, metrics, "Scheduler", None))
    assert "point 1/1 num_blocks=80: 201 steps, 9 preemptions" in out.getvalue()


WINDOW = ["--from-step", "35", "--to-step", "300"]
"""Past the checkpoint at step 30, over the arrivals at steps 40 and 80."""


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("window") / "burst.duckdb"
    record(WORKLOAD, path, checkpoint_every=10)
    return path


@pytest.fixture(scope="module")
def windowed(checkpointed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("windowed") / "sweep.duckdb"
    result = stepscope("sweep", str(checkpointed), *WINDOW, "--grid", "num_blocks=41,80",
                       "-o", str(output), "--jobs", "1", "--keep", "all")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "seconds: a step window (the step-time model" in " ".join(result.stdout.split())
    return output


def test_a_windowed_point_is_the_what_if_from_that_step(
    checkpointed: Path, windowed: Path, tmp_path: Path
) -> None:
    window = StepWindow(35, 300)
    for row in rows(windowed):
        alone = tmp_path / f"alone-{row['point']}.duckdb"
        result = stepscope("replay", str(checkpointed), *WINDOW, "--set",
                           f"num_blocks={row['num_blocks']}", "-o", str(alone))  # fmt: skip
        assert result.returncode in (0, 1), result.stderr
        assert diff_traces(Path(row["kept_trace"]), alone).identical
        with open_trace(alone) as replayed:
            expected = point_metrics(replayed, None, window)
            figures = run_metrics(replayed, window)
        assert {k: row[k] for k in expected} == expected
        assert row["num_steps"] == figures["steps_to_drain"] <= 300 - 35 + 1
        assert row["num_preemptions"] == figures["preemptions"]
        # Only the requests that arrived in the window: those carried in from step 0 have
        # their first token before it, out of the point's sight.
        assert figures["mean_ttft_steps"] == round(row["ttft_mean_steps"], 2)
        assert figures["p90_ttft_steps"] == pytest.approx(row["ttft_p90_steps"])
        assert all(row[name] is None for name in SECONDS_METRICS)


def test_a_windowed_sweep_says_its_window(windowed: Path) -> None:
    info = meta(windowed)
    assert (info["from_step"], info["to_step"]) == ("35", "300")
    assert info["fit_ok"] == "false" and "step window" in (info["fit_problem"] or "")
    shown = stepscope("sweep", "--show", str(windowed))
    assert shown.returncode == 0, shown.stderr
    assert "burst.duckdb steps 35..300: 2 points" in " ".join(shown.stdout.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-step", "400"], "--from-step 400: "),
        (["--from-step", "50", "--to-step", "40"], "--to-step 40: it is before --from-step 50"),
        (["--from-step", "35", "--grid", "num_blocks=8"],
         "point 0 (num_blocks=8): num_blocks: 8 is fewer than the blocks in use at step 35"),
    ],
)  # fmt: skip
def test_a_bad_window_is_one_line_and_exit_2(
    checkpointed: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    grid = [] if "--grid" in args else ["--grid", "num_blocks=41"]
    result = stepscope("sweep", str(checkpointed), *args, *grid, "-o", str(tmp_path / "s.duckdb"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_window_needs_checkpoints(trace: Path, tmp_path: Path) -> None:
    result = stepscope("sweep", str(trace), "--from-step", "30", "--grid", "num_blocks=41",
                       "-o", str(tmp_path / "s.duckdb"))  # fmt: skip
    assert result.returncode == 2
    assert "no checkpoints" in result.stderr and len(result.stderr.splitlines()) == 1
    shown = stepscope("sweep", "--show", str(tmp_path / "s.duckdb"), "--to-step", "9")
    assert shown.returncode == 2 and "no TRACE, --grid, -o or step window" in shown.stderr


@pytest.mark.slow
def test_ray_tasks_take_the_window(checkpointed: Path, windowed: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    output = tmp_path / "sweep.duckdb"
    result = stepscope("sweep", str(checkpointed), *WINDOW, "--grid", "num_blocks=41,80",
                       "-o", str(output), "--ray", "local", "--keep", "all")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert repr(without_folder(rows(output))) == repr(without_folder(rows(windowed)))
