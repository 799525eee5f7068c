"""Record a real engine whose JSON-schema requests wait for their grammars: the test's workload.

    python live_grammar.py MODEL_DIR WORK_DIR TRACE

Run with the vLLM venv's Python. A TRACE that does not end in `.duckdb` is recorded as a
flight recorder's folder of segments of `SEGMENT` steps.

The tiny model is copied into WORK_DIR with its first word tokens renamed to JSON's
characters (`{`, `"`, digits, letters, ...), so vLLM's xgrammar backend can follow a JSON
schema with it. An in-process `LLMEngine` is stepped by hand: each of the first steps adds
a plain request and, every other step, ahead of it one that asks for JSON of its own schema
(its grammar compiles in the background while the engine runs), until the scheduler has
nothing left; one more JSON request is aborted the step after it arrives. Prints one JSON
line: the structured requests and their finish reasons.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

NUM_ARRIVAL_STEPS = 12
SEGMENT = "8steps"
"""Short: requests wait for their grammars across segments' ends."""
ABORTED = "aborted-json"
"""A JSON request added at step 5 and aborted before step 6, likely while compiling."""
ABORTED_STEP = 5
FIRST_WORD_ID = 4
VOCAB_SIZE = 1024
JSON_PIECES = (*'{}[]":,', *"0123456789", *"abcdefghijklmnopqrstuvwxyz", "true", "false", "null")
"""The strings the first word tokens become: enough to spell any JSON the schemas allow."""


def json_model(model: Path, out: Path) -> Path:
    """A copy of `model` whose tokenizer spells JSON (the weights are the same)."""
    shutil.copytree(model, out, ignore=shutil.ignore_patterns("loras"), dirs_exist_ok=True)
    tokenizer = json.loads((out / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    words = {token_id: word for word, token_id in vocab.items()}
    for offset, piece in enumerate(JSON_PIECES):
        del vocab[words[FIRST_WORD_ID + offset]]
        vocab[piece] = FIRST_WORD_ID + offset
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    return out


def schema(step: int) -> dict[str, Any]:
    """A schema of its own per request, so that no grammar comes from the compiler's cache."""
    return {
        "type": "object",
        "properties": {f"k{step}": {"type": "integer"}, "name": {"type": "string"}},
        "required": [f"k{step}", "name"],
    }


def add_requests(engine: Any, step: int, rng: random.Random, structured: list[str]) -> None:
    """A step's arrivals: every other step a JSON request first, then a plain one (admitted
    ahead of it while its grammar compiles)."""
    from vllm.sampling_params import SamplingParams

    if step % 2 == 0:
        request_id = f"json-{step}"
        structured.append(request_id)
        engine.add_request(request_id, {"prompt_token_ids": prompt(rng)}, json_params(step))
    engine.add_request(
        f"plain-{step}",
        {"prompt_token_ids": prompt(rng)},
        SamplingParams(max_tokens=rng.randrange(8, 40), temperature=0.8, ignore_eos=True),
    )


def json_params(step: int) -> Any:
    """Greedy sampling of JSON in the step's schema (EOS once the grammar is done)."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    return SamplingParams(
        max_tokens=48,
        temperature=0.0,
        structured_outputs=StructuredOutputsParams(json=schema(step)),
    )


def prompt(rng: random.Random) -> list[int]:
    return [rng.randrange(FIRST_WORD_ID, VOCAB_SIZE) for _ in range(rng.randrange(8, 40))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("trace")
    args = parser.parse_args()
    os.environ["STEPSCOPE_TRACE"] = args.trace
    if not args.trace.endswith(".duckdb"):
        os.environ["STEPSCOPE_TRACE_SEGMENT"] = SEGMENT
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.engine.llm_engine import LLMEngine

    engine_args = EngineArgs(
        model=str(json_model(args.model, args.work / "json-model")),
        scheduler_cls="stepscope.tracer.vllm.RecordingScheduler",
        block_size=32,
        num_gpu_blocks_override=24,
        max_num_batched_tokens=64,
        max_num_seqs=6,
        max_model_len=512,
        enable_prefix_caching=True,
        dtype="bfloat16",
        seed=0,
        enforce_eager=True,
    )
    engine = LLMEngine.from_engine_args(engine_args)
    rng = random.Random(0)
    structured: list[str] = []
    finishes: dict[str, str | None] = {}
    scheduler = engine.engine_core.engine_core.scheduler
    step = 0
    # Until the scheduler has shipped its last finished ids, as an engine core's loop does.
    while step < NUM_ARRIVAL_STEPS or scheduler.has_requests():
        if step < NUM_ARRIVAL_STEPS:
            add_requests(engine, step, rng, structured)
        if step == ABORTED_STEP:
            engine.add_request(ABORTED, {"prompt_token_ids": prompt(rng)}, json_params(step))
        if step == ABORTED_STEP + 1:
            engine.abort_request([ABORTED])
        for output in engine.step():
            if output.finished:
                finishes[output.request_id] = output.outputs[0].finish_reason
        step += 1
    engine.engine_core.shutdown()
    print(json.dumps({"structured": structured, "finishes": finishes}))


if __name__ == "__main__":
    main()
