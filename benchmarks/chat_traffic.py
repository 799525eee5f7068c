"""Bytes per scheduled row on chat traffic, and which stored tables they go to.

The workload has ShareGPT's shape (prompts of about 215 tokens, outputs of about
200, both long-tailed), a system prompt most requests share and a long document
some do (prefix caching), a token budget that splits long prompts (chunked
prefill) and a KV cache too small for every request that arrives (preemptions).
Token ids are drawn uniformly from a 32,000-token vocabulary, so each one carries
15 bits that no storage can squeeze out: the report prints that floor too.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import duckdb
from stepscope.engine import TapeModelRunner
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.schema.storage_size import table_bytes
from stepscope.tracer.record_workload import record_workload

GOAL_BYTES_PER_ROW = 4.0
VOCAB_SIZE = 32000

CHAT_TRAFFIC = """
description = "Chat traffic: ShareGPT-shaped lengths, shared system prompt, tight KV cache."
seed = 23
num_requests = {num_requests}
max_steps = 1000000
vocab_size = {vocab_size}

[config]
block_size = 16
num_blocks = 5000
max_num_batched_tokens = 2048
max_num_seqs = 256
max_model_len = 4096
enable_prefix_caching = true

[arrivals]
process = "poisson"
rate = 1.2

[prompt_len]
distribution = "lognormal"
mean = 215
sigma = 0.9
max = 2500

[output_len]
distribution = "lognormal"
mean = 200
sigma = 0.8
max = 1500

[[prefix_groups]]
share = 0.6
prefix_len = 128

[[prefix_groups]]
share = 0.05
prefix_len = 1024
"""


def chat_size_figures(num_requests: int) -> dict[str, Any]:
    """Record the chat traffic and measure its trace: rows, bytes, each table's bytes."""
    text = CHAT_TRAFFIC.format(num_requests=num_requests, vocab_size=VOCAB_SIZE)
    workload = parse_toml_workload(text, source="chat")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chat.duckdb"
        record_workload(workload, TapeModelRunner.for_workload(workload), path)
        con = duckdb.connect(str(path), read_only=True)
        try:
            counts = con.execute(_COUNTS).fetchall()[0]
            tables = table_bytes(con)
        finally:
            con.close()
        file_bytes = path.stat().st_size
    rows, steps, preemptions, chunks, hits, prompt_tokens, sampled = counts
    return {
        "requests": num_requests,
        "rows": rows,
        "steps": steps,
        "preemptions": preemptions,
        "prefill_chunks": chunks,
        "prefix_hit_tokens": hits,
        "file_bytes": file_bytes,
        "tables": tables,
        "unique_prompt_tokens": prompt_tokens - _shared_prefix_tokens(workload),
        "sampled_tokens": sampled,
    }


_COUNTS = """
SELECT
    (SELECT count(*) FROM _scheduled),
    (SELECT count(*) FROM _steps),
    (SELECT count(*) FROM _preemptions),
    (SELECT count(*) FROM _scheduled WHERE sampled_token_id IS NULL),
    (SELECT sum(prefix_cache_hits) FROM _steps),
    (SELECT sum(prompt_len) FROM _requests),
    (SELECT count(sampled_token_id) FROM _scheduled)
"""


def _shared_prefix_tokens(workload: Any) -> int:
    """Prompt tokens that repeat a prefix an earlier request already had (whole blocks of 16)."""
    seen: set[tuple[int, ...]] = set()
    shared = 0
    for spec in workload.requests:
        prompt = spec.prompt_token_ids
        for end in range(16, len(prompt) + 1, 16):
            key = (end, *prompt[end - 16 : end])
            if key in seen:
                shared += 16
            seen.add(key)
    return shared


def chat_size_report(figures: dict[str, Any]) -> str:
    rows = figures["rows"]
    per_row = figures["file_bytes"] / rows
    bits = math.log2(VOCAB_SIZE)
    floor = (figures["unique_prompt_tokens"] + figures["sampled_tokens"]) * bits / 8 / rows
    verdict = "ok" if per_row <= GOAL_BYTES_PER_ROW else "over goal"
    lines = [
        "| chat traffic | bytes per scheduled row | share |",
        "|---|---:|---:|",
        f"| whole file | {per_row:.2f} (goal ≤ {GOAL_BYTES_PER_ROW}: {verdict}) | 100 % |",
    ]
    for table, size in figures["tables"].items():
        if size / rows >= 0.01:
            share = 100 * size / figures["file_bytes"]
            lines.append(f"| `{table}` | {size / rows:.2f} | {share:.0f} % |")
    prompt_floor = figures["unique_prompt_tokens"] * bits / 8 / rows
    lines.append(
        f"| floor: the token ids alone at {bits:.2f} bits each: "
        f"{figures['unique_prompt_tokens']:,} prompt tokens past shared prefixes "
        f"({prompt_floor:.2f}) + {figures['sampled_tokens']:,} sampled tokens "
        f"({floor - prompt_floor:.2f}) | {floor:.2f} | |"
    )
    note = (
        f"Chat traffic: {figures['requests']:,} requests, {figures['steps']:,} steps, "
        f"{rows:,} scheduled rows ({figures['prefill_chunks']:,} prefill chunks), "
        f"{figures['preemptions']:,} preemptions, {figures['prefix_hit_tokens']:,} prefix-hit "
        f"tokens; {figures['file_bytes'] / 1e6:.1f} MB. A table's bytes include the free "
        "space at the end of its last blocks. `_request_rows` and `_prompt_prefixes` are "
        "`_requests` as a compacted trace stores it: each shared prompt prefix once, each "
        "prompt as a reference to one and its own tokens."
    )
    return "\n".join(lines) + "\n\n" + note
