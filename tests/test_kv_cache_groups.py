"""Hybrid KV cache groups: the `kv_cache_groups` key, and one full group as the default.

The decisions themselves are pinned by conformance-next 71-78 and 80
(`test_next_conformance.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_CONFORMANCE
from oracle_compare import first_difference, run_lines
from stepscope.engine import EngineConfig, WorkloadError, load_workload
from stepscope.engine.block_pool import BlockPool
from stepscope.engine.errors import ConfigError, InputError
from stepscope.engine.kv_cache_groups import AttentionType, KVCacheGroupSpec
from stepscope.engine.model_runner_choice import create_model_runner
from stepscope.engine.single_type_kv_cache_manager import manager_class

BASE = {"block_size": 4, "num_blocks": 20, "max_num_batched_tokens": 32, "max_num_seqs": 4}
FULL = {"type": "full"}
WINDOW = {"type": "sliding_window", "sliding_window": 8}
LOCAL = {"type": "chunked_local", "attention_chunk_size": 8}
EAGLE = {"num_speculative_tokens": 2, "speculative_method": "eagle"}
KEY = "kv_cache_groups"
RETENTION = "prefix_cache_retention_interval"


def test_the_groups_parse_in_order_and_round_trip() -> None:
    config = EngineConfig.from_dict({**BASE, KEY: [WINDOW, WINDOW, FULL], RETENTION: None})
    assert config.kv_cache_groups == (
        KVCacheGroupSpec(AttentionType.SLIDING_WINDOW, sliding_window=8),
        KVCacheGroupSpec(AttentionType.SLIDING_WINDOW, sliding_window=8),
        KVCacheGroupSpec(AttentionType.FULL),
    )
    assert config.prefix_cache_retention_interval is None
    assert config.to_dict()[KEY] == [WINDOW, WINDOW, FULL]
    assert EngineConfig.from_dict(config.to_dict()) == config
    assert config.with_knobs({RETENTION: 16}).prefix_cache_retention_interval == 16


def test_without_the_keys_the_config_is_as_before() -> None:
    config = EngineConfig.from_dict(BASE)
    assert config.kv_cache_groups is None and config.prefix_cache_retention_interval == 0
    assert KEY not in config.to_dict() and RETENTION not in config.to_dict()


@pytest.mark.parametrize(
    ("knobs", "key", "words"),
    [
        ({KEY: []}, KEY, "expected a non-empty list"),
        ({KEY: FULL}, KEY, "expected a non-empty list"),
        ({KEY: [FULL, "full"]}, KEY, "group 1: expected an object"),
        ({KEY: [{"type": "mamba"}]}, KEY, "type 'mamba' is not one of"),
        ({KEY: [{"type": "sliding_window"}]}, KEY, "sliding_window must be an integer >= 1"),
        ({KEY: [{**WINDOW, "sliding_window": 0}]}, KEY, "sliding_window must be an integer"),
        ({KEY: [{**LOCAL, "attention_chunk_size": 8.0}]}, KEY, "attention_chunk_size must be"),
        ({KEY: [{**FULL, "sliding_window": 8}]}, KEY, "unknown key 'sliding_window'"),
        ({KEY: [FULL, LOCAL], RETENTION: 16}, RETENTION, "no kv_cache_groups entry is a"),
        ({RETENTION: 16}, RETENTION, "no kv_cache_groups entry is a sliding_window"),
        ({KEY: [FULL, WINDOW], RETENTION: 6}, RETENTION, "a multiple of block_size (4)"),
        ({KEY: [FULL, WINDOW], RETENTION: -4}, RETENTION, "must be non-negative"),
        ({KEY: [FULL, WINDOW], RETENTION: "16"}, RETENTION, "expected an integer"),
        ({**EAGLE, KEY: [WINDOW]}, KEY, "eagle needs a full group for the draft layers"),
        ({**EAGLE, KEY: [FULL, LOCAL]}, KEY, "chunked_local with an EAGLE-style drafter"),
        (
            {**EAGLE, KEY: [FULL, WINDOW], "disable_lookahead_block_hashes": True},
            KEY,
            "last-block drop across groups is not modelled",
        ),
    ],
)
def test_bad_groups_name_the_key(knobs: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        EngineConfig.from_dict({**BASE, **knobs})
    assert error.value.key == key and words in error.value.message


def test_a_bad_group_in_a_workload_file_names_the_key(tmp_path: Path) -> None:
    raw = json.loads(next(iter(sorted(SHARED_CONFORMANCE.glob("*.json")))).read_text())
    raw["config"][KEY] = [FULL, {"type": "sliding_window", "sliding_window": -1}]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WorkloadError, match="kv_cache_groups: group 1: sliding_window must"):
        load_workload(path)


def _without_group_fields(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for line in lines:
        line.pop("new_block_ids_by_group", None)
        line.pop("block_tables", None)
    return lines


@pytest.mark.parametrize(
    "workload", sorted(SHARED_CONFORMANCE.glob("*.json")), ids=lambda path: path.stem
)
def test_one_full_group_decides_as_the_default_manager(workload: Path) -> None:
    plain = load_workload(workload)
    grouped = plain.with_config(plain.config.with_knobs({KEY: [FULL]}))
    ours = _without_group_fields(run_lines(grouped))
    assert first_difference(ours, run_lines(plain)) is None


def test_the_torch_model_refuses_hybrid_groups() -> None:
    (workload,) = sorted(SHARED_CONFORMANCE.parent.glob("conformance-next/71_*.json"))
    with pytest.raises(InputError, match=r"config\.kv_cache_groups: the torch model is full"):
        create_model_runner("tiny", load_workload(workload))


@pytest.mark.parametrize(
    ("spec", "extra_retained_tokens"),
    [
        (KVCacheGroupSpec(AttentionType.SLIDING_WINDOW, sliding_window=8), 0),
        (KVCacheGroupSpec(AttentionType.SLIDING_WINDOW, sliding_window=7), 3),
        (KVCacheGroupSpec(AttentionType.CHUNKED_LOCAL, attention_chunk_size=8), 0),
        (KVCacheGroupSpec(AttentionType.CHUNKED_LOCAL, attention_chunk_size=6), 0),
    ],
)
def test_the_running_pass_calls_a_window_from_the_first_token_that_skips_a_block(
    spec: KVCacheGroupSpec, extra_retained_tokens: int
) -> None:
    """`num_tokens_to_skip(k)` is the fewest computed tokens whose window leaves k whole
    blocks behind: the running pass skips `remove_skipped_blocks` below it."""
    block_size = 4
    manager = manager_class(spec)(
        spec,
        0,
        BlockPool(16, enable_caching=True),
        block_size,
        enable_caching=True,
        max_admission_blocks_per_request=None,
        extra_retained_tokens=extra_retained_tokens,
    )
    for num_blocks in range(1, 12):
        first = manager.num_tokens_to_skip(num_blocks)
        skipped = [manager.get_num_skipped_tokens(n) // block_size for n in range(first + 2)]
        assert skipped[first] >= num_blocks, (num_blocks, first)
        assert skipped[first - 1] < num_blocks, (num_blocks, first)
