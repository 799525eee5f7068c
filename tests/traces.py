"""Recording workloads into traces for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
from conftest import TESTS
from stepscope.engine import TapeModelRunner, Workload, load_workload
from stepscope.engine.workload import parse_workload
from stepscope.tracer.record_workload import RecordSummary, record_workload
from stepscope.tracer.redact import Redactor

CONFORMANCE = TESTS / "conformance"
DUCKDB_HEADER_BYTES = 3 * 4096
"""DuckDB's main header and its two database headers, before the first block."""


def case(name: str) -> Path:
    """A conformance workload by its file-name prefix, e.g. '03'."""
    (path,) = sorted(CONFORMANCE.glob(f"{name}*.json"))
    return path


def record(
    workload: Workload | Path, path: Path, redactor: Redactor | None = None, **kwargs: Any
) -> RecordSummary:
    if isinstance(workload, Path):
        workload = load_workload(workload)
    runner = TapeModelRunner.for_workload(workload)
    return record_workload(workload, runner, path, redactor=redactor, **kwargs)


def decode_workload(num_requests: int, num_steps: int) -> Workload:
    """Requests with distinct 16-token prompts decoding for `num_steps` steps."""
    return parse_workload(decode_workload_json(num_requests, num_steps), source="decode")


def decode_workload_json(num_requests: int, num_steps: int) -> str:
    """`decode_workload` as the JSON a workload file holds (for the CLI)."""
    requests = [
        {
            "id": f"d{i}",
            "prompt_token_ids": [100 + 16 * i + t for t in range(16)],
            "output_token_ids": [(7 * i + k) % 50 + 3 for k in range(num_steps)],
            "max_tokens": num_steps,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": 4,
        "num_blocks": num_requests * (num_steps // 4 + 8),
        "max_num_batched_tokens": 1024,
        "max_num_seqs": num_requests,
        "max_model_len": num_steps + 64,
    }
    return json.dumps({"config": config, "requests": requests, "max_steps": num_steps + 10})


def prefill_heavy_workload(num_requests: int = 40, prompt_len: int = 200) -> Workload:
    """Long prompts all arriving at once: the token budget, not KV, sets the pace."""
    requests = [
        {
            "id": f"p{i}",
            "prompt_token_ids": [1000 + prompt_len * i + t for t in range(prompt_len)],
            "output_token_ids": [5] * 8 + [2],
            "max_tokens": 20,
            "eos_token_id": 2,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": 16,
        "num_blocks": 1200,
        "max_num_batched_tokens": 256,
        "max_num_seqs": 64,
        "max_model_len": 512,
    }
    text = json.dumps({"config": config, "requests": requests, "max_steps": 2000})
    return parse_workload(text, source="prefill-heavy")


def step_summaries(path: Path) -> list[dict[str, Any]]:
    """Each step's decisions and outcomes, compact enough to keep as an expected file."""
    from stepscope.schema import open_trace

    with open_trace(path) as trace:
        steps = trace.sql(
            "SELECT step, idle, update_step, num_free_blocks_after_schedule, "
            "num_free_blocks_after_update FROM steps ORDER BY step"
        ).fetchall()
        scheduled = _by_step(
            trace.sql(
                "SELECT step, list([request_id, kind::VARCHAR, num_tokens::VARCHAR, "
                "computed_before::VARCHAR, coalesce(sampled_token_id::VARCHAR, '')] ORDER BY seq) "
                "FROM scheduled GROUP BY step"
            ).fetchall()
        )
        blocks = _by_step(
            trace.sql(
                "SELECT b.step, list([r.request_id, b.slot::VARCHAR, b.block_id::VARCHAR] "
                "ORDER BY r.request_index, b.slot) FROM _block_ids b JOIN _requests r "
                "USING (request_index) GROUP BY b.step"
            ).fetchall()
        )
        events = _by_step(
            trace.sql(
                "SELECT step, list([request_id, kind::VARCHAR, coalesce(detail, '')] ORDER BY seq) "
                "FROM events WHERE kind != 'arrive' GROUP BY step"
            ).fetchall()
        )
    return [
        {
            "step": step,
            "idle": idle,
            "update_step": update_step,
            "free_after_schedule": free_schedule,
            "free_after_update": free_update,
            "scheduled": scheduled.get(step, []),
            "block_ids": blocks.get(step, []),
            "events": events.get(step, []),
        }
        for step, idle, update_step, free_schedule, free_update in steps
    ]


def _by_step(rows: list[tuple[Any, ...]]) -> dict[int, Any]:
    return {step: value for step, value in rows}


def damage_table_block(source: Path, target: Path, table: str) -> None:
    """`source` copied to `target` with one byte flipped in a data block that only `table`'s
    rows use: DuckDB finds it (a checksum) when a query reads that block, and not before."""
    with duckdb.connect(str(source), read_only=True) as con:
        ((block_size,),) = con.sql("SELECT block_size FROM pragma_database_size()").fetchall()
        users: dict[int, set[str]] = {}
        for (name,) in con.sql("SELECT table_name FROM duckdb_tables()").fetchall():
            blocks = con.execute(
                "SELECT unnest(list_prepend(block_id, additional_block_ids)) "
                "FROM pragma_storage_info(?) WHERE block_id >= 0",
                [name],
            ).fetchall()
            for (block,) in blocks:
                users.setdefault(block, set()).add(name)
    block = min(block for block, names in users.items() if names == {table})
    data = bytearray(source.read_bytes())
    offset = DUCKDB_HEADER_BYTES + block * block_size + 64
    data[offset] ^= 0x5A
    target.write_bytes(bytes(data))
