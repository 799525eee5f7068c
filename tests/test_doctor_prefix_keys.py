"""`doctor_prefix_cache` keys only the prefixes held more than once against the other requests'
first tokens, and takes a prefix held once as computed by its own prompt's first token: it
answers as keying every block of every prompt does, in the same order and types, on traces
with prefix hits and on copies rewritten so that the shortcut matters (admissions after the
request's own first token, requests that never sampled, repeated admissions, other hits).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO
from doctor_workloads import evicting_a_shared_prefix
from stepscope.engine import Workload
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.replay.sql import query
from stepscope.schema import open_trace
from traces import record

EVERY_BLOCK = """
    WITH prompts AS (
        SELECT r.request_index, r.lora_id, r.prompt_len, r.prompt_token_ids,
               o.first_token_step, c.block_size
        FROM _requests r
        CROSS JOIN _config c
        JOIN (
            SELECT request_index,
                   min(step) FILTER (sampled_token_id IS NOT NULL) AS first_token_step
            FROM _scheduled
            GROUP BY request_index
        ) o ON o.request_index = r.request_index
        WHERE c.enable_prefix_caching
    ),
    blocks AS (
        SELECT p.request_index, b.block,
               hash(b.block, p.lora_id,
                    list_slice(p.prompt_token_ids, b.block * p.block_size + 1,
                               (b.block + 1) * p.block_size))::HUGEINT AS block_hash
        FROM prompts p,
             LATERAL (SELECT unnest(range(p.prompt_len // p.block_size)) AS block) b
    ),
    prefixes AS (
        SELECT request_index, block,
               sum(block_hash) OVER (PARTITION BY request_index ORDER BY block) AS prefix_key
        FROM blocks
    ),
    computed AS (
        SELECT x.prefix_key, min(p.first_token_step) AS first_step
        FROM prefixes x
        JOIN prompts p ON p.request_index = x.request_index
        GROUP BY x.prefix_key
    ),
    admissions AS (
        SELECT s.step, s.request_index, s.computed_before AS hit_tokens
        FROM _scheduled s
        WHERE s.kind = 'new' AND s.step BETWEEN $from_step AND $to_step
    ),
    shareable AS (
        SELECT a.step, a.request_index, a.hit_tokens,
               least(coalesce(max(x.block + 1) FILTER (c.first_step < a.step), 0) * p.block_size,
                     (p.prompt_len - 1) // p.block_size * p.block_size) AS cached_tokens
        FROM admissions a
        JOIN prompts p ON p.request_index = a.request_index
        JOIN prefixes x ON x.request_index = a.request_index
        JOIN computed c ON c.prefix_key = x.prefix_key
        GROUP BY a.step, a.request_index, a.hit_tokens, p.block_size, p.prompt_len
    )
    SELECT s.step, r.request_id, s.cached_tokens, s.hit_tokens,
           (s.cached_tokens - s.hit_tokens)::INTEGER AS tokens_recomputed
    FROM shareable s
    JOIN _requests r ON r.request_index = s.request_index
    WHERE s.cached_tokens > 0
    ORDER BY tokens_recomputed DESC, s.step, s.request_index
"""
"""The query keying every block of every prompt, as the doctor asked it before."""

CHAT = REPO / "examples" / "workloads" / "chat_poisson.toml"

REWRITES = (
    "UPDATE _scheduled SET kind = 'new' "
    "WHERE kind = 'running' AND (step * 7 + request_index) % 13 = 0",
    "UPDATE _scheduled SET sampled_token_id = NULL WHERE request_index % 7 = 3",
    "INSERT INTO _scheduled SELECT * FROM _scheduled WHERE kind = 'new' AND request_index % 5 = 0",
    "INSERT INTO _scheduled SELECT step, seq, request_index, kind, num_tokens, "
    "computed_before + 16, sampled_token_id FROM _scheduled "
    "WHERE kind = 'new' AND request_index % 6 = 1",
)
"""Later admissions than a request's first token, requests that never sampled, an admission
recorded twice, and one recorded again with another hit."""


def _workloads() -> dict[str, Workload]:
    return {
        "evicted shared prefix": evicting_a_shared_prefix(24),
        "chat": parse_toml_workload(CHAT.read_text(), source="chat"),
    }


def assert_answers_as_every_block(path: Path) -> int:
    """The query against keying every block, over the whole trace and its halves; its rows."""
    found = 0
    with open_trace(path) as trace:
        last = trace.num_steps - 1
        for first, to in ((0, last), (0, last // 2), (last // 2, last)):
            window = {"from_step": first, "to_step": to}
            now = trace.sql(query("doctor_prefix_cache"), window)
            before = trace.sql(EVERY_BLOCK, window)
            assert now.columns == before.columns
            assert now.types == before.types
            rows = now.fetchall()
            assert rows == before.fetchall(), f"{path.name} over {first}..{to}"
            found += len(rows)
    return found


@pytest.mark.parametrize("name", list(_workloads()))
def test_the_prefix_query_answers_as_keying_every_block(name: str, tmp_path: Path) -> None:
    path = record(_workloads()[name], tmp_path / "t.duckdb").path
    assert assert_answers_as_every_block(path) > 0
    rewritten = Path(shutil.copy(path, tmp_path / "rewritten.duckdb"))
    with duckdb.connect(str(rewritten)) as con:
        for statement in REWRITES:
            con.execute(statement)
    assert assert_answers_as_every_block(rewritten) > 0
