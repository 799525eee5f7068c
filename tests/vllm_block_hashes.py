"""vLLM's block hashes against stepscope's vLLM hasher; runs inside a vLLM venv (vllm_env.py).

    python vllm_block_hashes.py requests SEED NUM_REQUESTS
    python vllm_block_hashes.py pool WORKLOAD.json...

`requests`: for each SHA-256 algorithm and each NONE_HASH seed (PYTHONHASHSEED unset,
then set), random requests (random prompt and output lengths, block sizes, token ids
from small to past 64 bits, with and without a LoRA adapter) are made twice: as vLLM's
`Request`, its hashes computed by vLLM's own `request_block_hasher`, and as stepscope's,
hashed by the engine's vLLM hasher under the NONE_HASH the recorder reads. Prints one
JSON object per case: the hashes compared, and the first request whose hashes differ
(None: none did).

`pool`: each workload run through vLLM's scheduler and through stepscope's engine
under the `block_hasher` the recorder reads off that vLLM; prints, per workload, the
blocks whose hashes are set at the end and the first block whose hash differs.
"""

from __future__ import annotations

import json
import os
import random
import sys
from typing import Any

from stepscope.engine import EngineLoop, SamplingParams, TapeModelRunner, Workload
from stepscope.engine.block_hash import make_block_hasher, vllm_hasher_name
from stepscope.engine.config import EngineConfig
from stepscope.engine.workload import RequestSpec
from stepscope.engine.workload_file import load_workload
from stepscope.tracer.vllm.attach import convert, versions
from stepscope.tracer.vllm.drive.driver import build_scheduler
from stepscope.tracer.vllm.drive.scripted_core import run_scripted
from stepscope.tracer.vllm.drive.vllm_request import make_request

ALGORITHMS = ("sha256", "sha256_cbor")
HASH_SEEDS = (None, "0", "stepscope")
"""PYTHONHASHSEED unset (vLLM's fixed seed), then set."""
BLOCK_SIZES = (1, 2, 3, 4, 16)


def random_spec(rng: random.Random, index: int) -> RequestSpec:
    bits = rng.choice((8, 16, 31, 40, 70))
    tokens = [rng.randrange(1 << bits) for _ in range(rng.randint(1, 70))]
    return RequestSpec(
        request_id=f"r{index}",
        arrival_step=0,
        arrival_time=float(index),
        prompt_token_ids=tuple(tokens[: rng.randint(1, len(tokens))]),
        output_token_ids=tuple(tokens[len(tokens) // 2 :]),
        sampling_params=SamplingParams(max_tokens=100),
        lora_id=rng.choice((None, None, 1, 2, 3)),
    )


def hashes_after_outputs(request: Any, spec: RequestSpec, append: str) -> list[bytes]:
    """The request's block hashes once its outputs are appended one at a time."""
    for token_id in spec.output_token_ids:
        getattr(request, append)(token_id)
    return [bytes(block_hash) for block_hash in request.block_hashes]


def first_difference(
    vllm_config: Any, algo: str, rng: random.Random, num_requests: int
) -> tuple[int, dict[str, Any] | None]:
    """How many block hashes were compared, and the first request whose hashes differ."""
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils

    hash_fn = get_hash_fn_by_name(algo)
    kv_cache_utils.init_none_hash(hash_fn)
    none_hash = convert.none_hash(algo)
    if none_hash != bytes(kv_cache_utils.NONE_HASH):
        return 0, {"none_hash": none_hash.hex(), "vllm": bytes(kv_cache_utils.NONE_HASH).hex()}
    compared = 0
    for index in range(num_requests):
        spec = random_spec(rng, index)
        block_size = rng.choice(BLOCK_SIZES)
        theirs_hasher = versions.request_block_hasher(block_size, hash_fn, vllm_config)
        ours_hasher = make_block_hasher(block_size, vllm_hasher_name(algo), none_hash)
        theirs = hashes_after_outputs(
            make_request(spec, theirs_hasher), spec, "append_output_token_ids"
        )
        ours = hashes_after_outputs(spec.make_request(ours_hasher), spec, "append_output_token_id")
        compared += len(theirs)
        if ours != theirs:
            return compared, {"request": repr(spec), "block_size": block_size}
    return compared, None


def requests(seed: int, num_requests: int) -> None:
    config = EngineConfig.from_dict(
        {"block_size": 4, "num_blocks": 64, "max_num_batched_tokens": 64, "max_num_seqs": 4}
    )
    scheduler, _ = build_scheduler(Workload(config, ()))
    for algo in ALGORITHMS:
        for hash_seed in HASH_SEEDS:
            os.environ.pop("PYTHONHASHSEED", None)
            if hash_seed is not None:
                os.environ["PYTHONHASHSEED"] = hash_seed
            rng = random.Random(f"{seed}-{algo}-{hash_seed}")
            compared, difference = first_difference(scheduler.vllm_config, algo, rng, num_requests)
            case = {"algo": algo, "hash_seed": hash_seed}
            print(json.dumps({**case, "compared": compared, "difference": difference}))


def pool(paths: list[str]) -> None:
    for path in paths:
        workload = load_workload(path)
        scheduler, block_hasher = build_scheduler(workload)
        run_scripted(workload, scheduler, block_hasher)
        blocks = scheduler.kv_cache_manager.block_pool.blocks
        theirs = [_vllm_hash(block.block_hash) for block in blocks]
        config = convert.engine_config(scheduler)
        loop = EngineLoop(workload.with_config(config), TapeModelRunner.for_workload(workload))
        for _ in loop.run():
            pass
        ours = [
            block.block_hash for block in loop.core.scheduler.kv_cache_manager.block_pool.blocks
        ]
        differing = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
        print(json.dumps({
            "workload": path,
            "block_hasher": config.block_hasher,
            "num_hashed": sum(block_hash is not None for block_hash in theirs),
            "first_difference": differing[0] if differing else None,
        }))  # fmt: skip


def _vllm_hash(key: Any) -> bytes | None:
    """A vLLM block's hash without its KV cache group id (None: not cached)."""
    from vllm.v1.core.kv_cache_utils import get_block_hash

    return None if key is None else bytes(get_block_hash(key))


def main() -> None:
    mode, *args = sys.argv[1:]
    if mode == "requests":
        requests(int(args[0]), int(args[1]))
    else:
        pool(args)


if __name__ == "__main__":
    main()
