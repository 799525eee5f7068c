"""Recording workloads into traces for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import TESTS
from stepscope.engine import TapeModelRunner, Workload, load_workload
from stepscope.engine.workload import parse_workload
from stepscope.tracer.record import RecordSummary, record_workload
from stepscope.tracer.redact import Redactor

CONFORMANCE = TESTS / "conformance"


def case(name: str) -> Path:
    """A conformance workload by its file-name prefix, e.g. '03'."""
    (path,) = sorted(CONFORMANCE.glob(f"{name}*.json"))
    return path


def record(
    workload: Workload | Path, path: Path, redactor: Redactor | None = None, **kwargs: Any
) -> RecordSummary:
    if isinstance(workload, Path):
        workload = load_workload(workload)
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    return record_workload(workload, TapeModelRunner(tapes), path, redactor=redactor, **kwargs)


def decode_workload(num_requests: int, num_steps: int) -> Workload:
    """Requests with distinct 16-token prompts decoding for `num_steps` steps."""
    requests = [
        {
            "id": f"d{i}",
            "prompt_token_ids": [100 + 16 * i + t for t in range(16)],
            "output_token_ids": [(7 * i + k) % 50 + 3 for k in range(num_steps)],
            "max_tokens": num_steps,
        }
        for i in range(num_requests)
    ]
    config = {"block_size": 4, "num_blocks": num_requests * (num_steps // 4 + 8),
              "max_num_batched_tokens": 1024, "max_num_seqs": num_requests,
              "max_model_len": num_steps + 64}  # fmt: skip
    text = json.dumps({"config": config, "requests": requests, "max_steps": num_steps + 10})
    return parse_workload(text, source="decode")


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
    config = {"block_size": 16, "num_blocks": 1200, "max_num_batched_tokens": 256,
              "max_num_seqs": 64, "max_model_len": 512}  # fmt: skip
    text = json.dumps({"config": config, "requests": requests, "max_steps": 2000})
    return parse_workload(text, source="prefill-heavy")
