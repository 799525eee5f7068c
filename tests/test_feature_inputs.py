"""The optional-feature inputs: config knobs and request keys, loaded, checked and recorded.

Speculative decoding (`num_speculative_tokens`, `speculative_method`, a request's draft
script), LoRA (`max_loras`, `lora_id`) and structured output (`grammar_ready_step`) come
in through the JSON and TOML workloads, go into the trace, and come back out of it; a
trace of an older schema reads them as off.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from stepscope.engine import EngineConfig, WorkloadError, load_workload
from stepscope.engine.errors import ConfigError
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import workload_from_trace
from stepscope.schema import open_trace
from test_cli import stepscope
from traces import record

BASE = {"block_size": 4, "num_blocks": 20, "max_num_batched_tokens": 32, "max_num_seqs": 4}


def _workload(tmp_path: Path, config: dict[str, Any], **request: Any) -> Path:
    path = tmp_path / "w.json"
    item = {"id": "A", "prompt_token_ids": [1, 2, 3], "output_token_ids": [4, 5], "max_tokens": 2}
    path.write_text(json.dumps({"config": {**BASE, **config}, "requests": [{**item, **request}]}))
    return path


def test_the_method_decides_draft_slots_and_lookahead() -> None:
    ngram = EngineConfig.from_dict({**BASE, "num_speculative_tokens": 3})
    assert ngram.speculative_method == "ngram"
    assert (ngram.num_lookahead_tokens, ngram.max_num_new_slots_for_drafting) == (0, 0)
    draft = ngram.with_knobs({"speculative_method": "draft_model"})
    assert (draft.num_lookahead_tokens, draft.max_num_new_slots_for_drafting) == (3, 1)
    off = draft.with_knobs({"num_speculative_tokens": 0})
    assert off.speculative_method is None and off.num_lookahead_tokens == 0
    assert off.to_dict()["max_loras"] is None


@pytest.mark.parametrize(
    ("knobs", "key", "words"),
    [
        (
            {"num_speculative_tokens": 2, "speculative_method": "dflash"},
            "speculative_method",
            "'dflash'",
        ),
        ({"speculative_method": "ngram"}, "speculative_method", "needs num_speculative_tokens"),
        ({"num_speculative_tokens": -1}, "num_speculative_tokens", "at least 0"),
        ({"max_loras": 0}, "max_loras", "at least 1"),
        (
            {"num_speculative_tokens": 2, "async_scheduling": True},
            "speculative_method",
            "ngram is not supported with async_scheduling",
        ),
    ],
)
def test_bad_knobs(knobs: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        EngineConfig.from_dict({**BASE, **knobs})
    assert error.value.key == key and words in error.value.message


@pytest.mark.parametrize(
    ("config", "request_keys", "words"),
    [
        ({}, {"lora_id": 1}, "requests[0] (id 'A'): lora_id: needs config max_loras"),
        ({"max_loras": 1}, {"lora_id": 0}, "lora_id: must be in [1, 2147483647]"),
        ({}, {"draft_mismatch_every": 2}, "draft_mismatch_every: needs config num_speculative"),
        ({}, {"draft_accept": [1]}, "draft_accept: needs config num_speculative_tokens"),
        (
            {"num_speculative_tokens": 2},
            {"draft_accept": [2, 3]},
            "draft_accept: item 1 accepts 3 drafts, longer than possible",
        ),
        ({"num_speculative_tokens": 2}, {"draft_accept": [-1]}, "item 0 is not a count"),
        (
            {},
            {"arrival_step": 3, "grammar_ready_step": 2},
            "grammar_ready_step: must be in [3, 2147483647]",
        ),
    ],
)
def test_bad_request_keys_name_file_line_request_and_field(
    tmp_path: Path, config: dict[str, Any], request_keys: dict[str, Any], words: str
) -> None:
    path = _workload(tmp_path, config, **request_keys)
    with pytest.raises(WorkloadError) as error:
        load_workload(path)
    assert str(error.value).startswith(f"{path}:")
    assert words in str(error.value)
    result = stepscope("run", str(path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def _toml(tmp_path: Path, config: str, tables: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(
        "num_requests = 12\nseed = 3\n"
        f"[config]\nblock_size = 4\nnum_blocks = 64\nmax_num_batched_tokens = 64\n"
        f"max_num_seqs = 4\n{config}\n"
        '[arrivals]\nprocess = "burst"\nsize = 4\nevery = 2\n'
        '[prompt_len]\ndistribution = "fixed"\nvalue = 5\n'
        '[output_len]\ndistribution = "fixed"\nvalue = 4\n' + tables
    )
    return path


def test_toml_features_reach_every_request(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        "num_speculative_tokens = 2\nmax_loras = 2",
        "[drafts]\naccept = [2, 0]\n[lora]\nids = [0, 1, 2]\n"
        "[grammar]\nshare = 0.5\ncompile_steps = 2\n",
    )
    requests = load_workload(path).requests
    assert {spec.draft_accept for spec in requests} == {(2, 0)}
    assert {spec.lora_id for spec in requests} == {None, 1, 2}
    ready = [spec for spec in requests if spec.grammar_ready_step is not None]
    assert 0 < len(ready) < len(requests)
    assert all(spec.grammar_ready_step == spec.arrival_step + 2 for spec in ready)


@pytest.mark.parametrize(
    ("config", "tables", "words"),
    [
        ("", "[lora]\nids = [1]\n", "lora.ids: needs config max_loras"),
        ("", "[drafts]\nmismatch_every = 2\n", "drafts.mismatch_every: needs config num_spec"),
        ("num_speculative_tokens = 1", "[drafts]\naccept = [2]\n", "longer than possible"),
        ("", "[grammar]\nshare = 2\n", "grammar.share: must be in [0, 1]"),
    ],
)
def test_bad_toml_features(tmp_path: Path, config: str, tables: str, words: str) -> None:
    path = _toml(tmp_path, config, tables)
    with pytest.raises(WorkloadError) as error:
        load_workload(path)
    assert str(error.value).startswith(f"{path}:") and words in str(error.value)


def test_the_trace_keeps_the_feature_inputs(tmp_path: Path) -> None:
    path = _workload(
        tmp_path,
        {"num_speculative_tokens": 2, "speculative_method": "draft_model", "max_loras": 1},
        lora_id=1,
        draft_accept=[1, 2],
        grammar_ready_step=0,
    )
    trace = record(load_workload(path), tmp_path / "t.duckdb").path
    with open_trace(trace) as opened:
        assert opened.config["num_speculative_tokens"] == 2
        assert opened.config["speculative_method"] == "draft_model"
        assert opened.config["max_loras"] == 1
        (spec,) = workload_from_trace(opened).requests
    assert (spec.lora_id, spec.draft_accept, spec.grammar_ready_step) == (1, (1, 2), 0)
    assert spec.draft_mismatch_every is None


def _as_schema_3(trace: Path, out: Path) -> Path:
    """The trace as schema version 3 wrote it: no feature columns, no `_spec_decode`."""
    shutil.copy(trace, out)
    with duckdb.connect(str(out)) as con:
        for column in ("num_speculative_tokens", "speculative_method", "max_loras"):
            con.execute(f"ALTER TABLE _config DROP COLUMN {column}")
        for column in ("lora_id", "grammar_ready_step", "draft_mismatch_every", "draft_accept"):
            con.execute(f"ALTER TABLE _requests DROP COLUMN {column}")
        con.execute("DROP TABLE _spec_decode")
        con.execute("UPDATE _meta SET value = '3' WHERE key = 'schema_version'")
    return out


def test_a_schema_3_trace_reads_the_features_as_off(tmp_path: Path) -> None:
    path = _workload(tmp_path, {})
    trace = _as_schema_3(
        record(load_workload(path), tmp_path / "t.duckdb").path, tmp_path / "3.duckdb"
    )
    with open_trace(trace) as opened:
        assert opened.config["num_speculative_tokens"] == 0
        assert opened.config["max_loras"] is None
        assert opened.sql("SELECT count(*) FROM _spec_decode").fetchall() == [(0,)]
        (spec,) = workload_from_trace(opened).requests
        for info in opened.views():
            opened.view(info.name).fetchall()
    assert spec.lora_id is None and spec.draft_accept is None
    assert replay_exact(trace).divergence is None
