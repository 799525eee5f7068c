"""A run with hybrid KV cache groups, recorded and replayed: every group's block ids in the
trace, its groups in the config, read back by replay, `info`, the TUI and an older reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from stepscope.engine import load_workload
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import recorded_config
from stepscope.schema import open_trace
from stepscope.tui.app import StepscopeApp
from stepscope.tui.widgets.rows_view import RowsView
from stepscope.tui.widgets.step_detail import StepDetailView
from test_fuzz_traces import run_cli
from textual.pilot import Pilot
from traces import record
from tui_support import cells, drive, loaded

GROUPS = [
    {"type": "sliding_window", "sliding_window": 8},
    {"type": "chunked_local", "attention_chunk_size": 8},
    {"type": "full"},
]


def _workload(tmp_path: Path, groups: list[dict[str, Any]] | None = GROUPS) -> Path:
    """Three requests over three groups; the second resends the first's prompt (a hit)."""
    prompt = [100 + t for t in range(22)]
    config: dict[str, Any] = {
        "block_size": 4, "num_blocks": 40, "max_num_batched_tokens": 32, "max_num_seqs": 4,
        "max_model_len": 64, "enable_prefix_caching": True,
    }  # fmt: skip
    if groups is not None:
        config["kv_cache_groups"] = groups
    requests = [
        {"id": "A", "arrival_step": 0, "prompt_token_ids": prompt, "output_token_ids": [5, 6, 7]},
        {"id": "B", "arrival_step": 4, "prompt_token_ids": prompt, "output_token_ids": [8, 9]},
        {"id": "C", "arrival_step": 6, "prompt_token_ids": prompt[:9], "output_token_ids": [3]},
    ]
    for request in requests:
        request["max_tokens"] = len(request["output_token_ids"])
    path = tmp_path / "hybrid.json"
    path.write_text(json.dumps({"config": config, "requests": requests, "max_steps": 100}))
    return path


@pytest.fixture
def hybrid(tmp_path: Path) -> Path:
    return record(load_workload(_workload(tmp_path)), tmp_path / "t.duckdb").path


def test_record_then_replay_from_the_command_line_is_identical(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    code, out, err = run_cli("record", str(_workload(tmp_path)), "-o", str(trace))
    assert code == 0, err
    code, out, err = run_cli("replay", str(trace))
    assert code == 0, err
    assert "identical" in out + err


def test_every_group_s_block_ids_are_rows_and_the_config_round_trips(
    hybrid: Path, tmp_path: Path
) -> None:
    with open_trace(hybrid) as opened:
        assert recorded_config(opened) == load_workload(_workload(tmp_path)).config
        groups = opened.sql("SELECT DISTINCT kv_cache_group FROM _block_ids ORDER BY 1").fetchall()
        assert groups == [(0,), (1,), (2,)]
        assert opened.sql("SELECT count(*) FROM _checkpoints").fetchall() == [(0,)]


def test_a_block_id_changed_in_one_group_is_a_block_difference(
    hybrid: Path, tmp_path: Path
) -> None:
    tampered = tmp_path / "tampered.duckdb"
    shutil.copy(hybrid, tampered)
    with duckdb.connect(str(tampered)) as con:
        con.execute(
            "UPDATE _block_ids SET block_id = block_id + 1 "
            "WHERE step = 0 AND kv_cache_group = 2 AND slot = 0"
        )
    result = replay_exact(tampered)
    assert result.divergence is not None
    assert (result.divergence.step, result.divergence.fields) == (0, ("block_ids",))


def test_info_prints_the_groups(hybrid: Path) -> None:
    code, out, err = run_cli("info", str(hybrid))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "kv_cache_groups=sliding_window:8,chunked_local:8,full" in flat
    assert "prefix_cache_retention_interval=0" in flat


def test_a_diff_names_the_groups_as_info_does(hybrid: Path, tmp_path: Path) -> None:
    windows = [{**GROUPS[0], "sliding_window": 12}, *GROUPS[1:]]
    other_folder = tmp_path / "other"
    other_folder.mkdir()
    other = record(load_workload(_workload(other_folder, windows)), tmp_path / "o.duckdb").path
    markdown = tmp_path / "diff.md"
    code, out, err = run_cli("diff", str(hybrid), str(other), "--markdown", str(markdown))
    assert code in (0, 1), err
    changed = "sliding_window:8,chunked_local:8,full -> sliding_window:12,chunked_local:8,full"
    assert f"kv_cache_groups {changed}" in " ".join(out.split())
    assert changed.replace("->", "→") in markdown.read_text()


def test_a_plain_trace_prints_no_groups(tmp_path: Path) -> None:
    trace = record(load_workload(_workload(tmp_path, None)), tmp_path / "t.duckdb").path
    code, out, _ = run_cli("info", str(trace))
    assert code == 0 and "kv_cache_groups" not in out and "retention" not in out
    with open_trace(trace) as opened:
        assert opened.sql("SELECT DISTINCT kv_cache_group FROM _block_ids").fetchall() == [(0,)]


def test_a_segmented_recording_replays_identically(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    code, out, err = run_cli(
        "record", str(_workload(tmp_path)), "-o", str(folder), "--segment", "5steps"
    )
    assert code == 0, (out, err)
    code, out, err = run_cli("replay", str(folder), "--json")
    assert code == 0 and json.loads(out)["identical"], (out, err)


def _as_schema_9(trace: Path, out: Path) -> Path:
    """The trace as schema version 9 wrote it: no group columns."""
    shutil.copy(trace, out)
    with duckdb.connect(str(out)) as con:
        for column in ("kv_cache_groups", "prefix_cache_retention_interval"):
            con.execute(f"ALTER TABLE _config DROP COLUMN {column}")
        con.execute("ALTER TABLE _block_ids DROP COLUMN kv_cache_group")
        con.execute("UPDATE _meta SET value = '9' WHERE key = 'schema_version'")
    return out


def test_a_schema_9_trace_reads_as_one_group(tmp_path: Path) -> None:
    plain = record(load_workload(_workload(tmp_path, None)), tmp_path / "t.duckdb").path
    trace = _as_schema_9(plain, tmp_path / "9.duckdb")
    with open_trace(trace) as opened:
        assert opened.config["kv_cache_groups"] is None
        assert opened.config["prefix_cache_retention_interval"] == 0
        assert opened.sql("SELECT DISTINCT kv_cache_group FROM _block_ids").fetchall() == [(0,)]
        for info in opened.views():
            opened.view(info.name).fetchall()
    assert replay_exact(trace).divergence is None


def test_the_step_detail_shows_each_group_s_blocks(hybrid: Path) -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        view = pilot.app.screen.query_one("#detail-a", StepDetailView)
        (row,) = cells(view.query_one(".detail-scheduled", RowsView))
        assert row[0] == "A" and row[-1].startswith("g0+[") and " g1+[" in row[-1]
        assert " g2+[" in row[-1]

    drive(StepscopeApp(hybrid), scenario)


def test_a_replay_from_a_later_step_starts_at_its_checkpoint(tmp_path: Path) -> None:
    trace = tmp_path / "t.duckdb"
    record(load_workload(_workload(tmp_path)), trace, checkpoint_every=4)
    code, out, err = run_cli("replay", str(trace), "--from-step", "5", "--json")
    assert code == 0, (out, err)
    report = json.loads(out)
    assert report["identical"] and report["checkpoint_step"] == 4 and report["from_step"] == 5
