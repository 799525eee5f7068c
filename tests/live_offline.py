"""Record vLLM's offline `LLM` API on a real engine: the live-engine tests' workload.

    python live_offline.py MODEL_DIR TRACE SCHEDULER_CLASS [--priority] [--async-scheduling]

Run with the vLLM venv's Python. 40 requests share two 64-token prefixes (prefix
caching) in a pool of 40 blocks of 32 with a budget of 128 tokens, so prefills
chunk and running requests are preempted; sampling is random at temperature 0.8
(greedy for a quarter), some requests stop on EOS or stop ids, and with
`--priority` each gets a priority of 0-2. Prints one JSON line: the tokens sampled.
"""

from __future__ import annotations

import argparse
import json
import os
import random

NUM_REQUESTS = 40
PREFIX_LEN = 64
FIRST_WORD_ID = 4
VOCAB_SIZE = 1024
STOP_IDS = list(range(100, 140))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("trace")
    parser.add_argument("scheduler_cls")
    parser.add_argument("--priority", action="store_true")
    parser.add_argument(
        "--async-scheduling", action="store_true", help="needs live_plugin/ on PYTHONPATH"
    )
    args = parser.parse_args()
    os.environ["STEPSCOPE_TRACE"] = args.trace

    from vllm import LLM, SamplingParams

    llm = LLM(
        model=args.model,
        scheduler_cls=args.scheduler_cls,
        scheduling_policy="priority" if args.priority else "fcfs",
        block_size=32,
        num_gpu_blocks_override=40,
        max_num_batched_tokens=128,
        max_num_seqs=16,
        max_model_len=512,
        enable_prefix_caching=True,
        dtype="bfloat16",
        gpu_memory_utilization=0.2,
        seed=0,
        async_scheduling=args.async_scheduling,
        enforce_eager=True,  # the scheduler decides the same; no torch.compile warm-up
    )
    rng = random.Random(0)
    prefixes = [
        [rng.randrange(FIRST_WORD_ID, VOCAB_SIZE) for _ in range(PREFIX_LEN)] for _ in range(2)
    ]
    prompts, params = [], []
    for i in range(NUM_REQUESTS):
        suffix = [rng.randrange(FIRST_WORD_ID, VOCAB_SIZE) for _ in range(rng.randrange(8, 96))]
        prompts.append({"prompt_token_ids": prefixes[i % 2] + suffix})
        params.append(
            SamplingParams(
                max_tokens=rng.randrange(16, 96),
                temperature=0.0 if i % 4 == 0 else 0.8,
                ignore_eos=i % 3 != 0,
                stop_token_ids=STOP_IDS if i % 5 == 1 else None,
            )
        )
    priority = [rng.randrange(3) for _ in prompts] if args.priority else None
    outputs = llm.generate(prompts, params, priority=priority, use_tqdm=False)
    print(json.dumps({"sampled": sum(len(o.outputs[0].token_ids) for o in outputs)}))


if __name__ == "__main__":
    main()
