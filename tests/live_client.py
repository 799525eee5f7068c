"""A bounded load for a real vLLM OpenAI server: streams, cancels, stop ids, priorities.

    python live_client.py URL --requests 48 [--seed 0] [--priority] [--cancel-every 5]

Run with the vLLM venv's Python (it has aiohttp); loopback only. Requests share
three 64-token prefixes (prefix caching), ask for 16-96 tokens, and are all sent
at once so the KV pool runs short; every `--cancel-every`-th request asks for
900-1,000 tokens (serve with `--max-model-len 1216`) and closes its stream after a
few chunks, which the server turns into an abort. Prints one JSON
line: how many requests finished, were cancelled, and failed, and how many were
planned to hang up (`planned_hang_ups`: a planned hang-up whose stream ends before
its few chunks were read counts as finished).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import aiohttp

NUM_PREFIXES = 3
PREFIX_LEN = 64
FIRST_WORD_ID = 4
VOCAB_SIZE = 1024
STOP_IDS = tuple(range(100, 140))
"""Stop ids for some requests: 40 of the 1,020 words, so a random model hits one soon."""


@dataclass(frozen=True)
class Plan:
    """One request: its body and how many chunks to read before hanging up (None: all)."""

    body: dict[str, Any]
    cancel_after_chunks: int | None


def plans(model: str, args: argparse.Namespace) -> list[Plan]:
    rng = random.Random(args.seed)
    prefixes = [
        [rng.randrange(FIRST_WORD_ID, VOCAB_SIZE) for _ in range(PREFIX_LEN)]
        for _ in range(NUM_PREFIXES)
    ]
    result = []
    for i in range(args.requests):
        prompt = prefixes[i % NUM_PREFIXES] + [
            rng.randrange(FIRST_WORD_ID, VOCAB_SIZE) for _ in range(rng.randrange(8, 96))
        ]
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "max_tokens": rng.randrange(16, 96),
            "temperature": rng.choice((0.0, 0.8)),
            "ignore_eos": rng.random() < 0.7,
            "stream": True,
        }
        if i % 4 == 1:
            body["stop_token_ids"] = list(STOP_IDS)
        if args.priority:
            body["priority"] = rng.randrange(3)
        cancel = args.cancel_every and i % args.cancel_every == args.cancel_every - 1
        if cancel:
            # Hundreds of steps left when the server sees the client go: still running.
            body.update(max_tokens=rng.randrange(900, 1000), ignore_eos=True)
        result.append(Plan(body, rng.randrange(2, 8) if cancel else None))
    return result


async def send(session: aiohttp.ClientSession, url: str, plan: Plan) -> str:
    """'finished', 'cancelled' or 'failed'."""
    async with session.post(f"{url}/v1/completions", json=plan.body) as response:
        if response.status != 200:
            return "failed"
        chunks = 0
        async for line in response.content:
            if not line.startswith(b"data: "):
                continue
            if line.strip() == b"data: [DONE]":
                return "finished"
            chunks += 1
            if plan.cancel_after_chunks is not None and chunks >= plan.cancel_after_chunks:
                response.close()
                return "cancelled"
    return "failed"


async def run(args: argparse.Namespace) -> dict[str, int]:
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.get(f"{args.url}/v1/models") as response:
            model = (await response.json())["data"][0]["id"]
        planned = plans(model, args)
        results = await asyncio.gather(
            *(send(session, args.url, plan) for plan in planned),
            return_exceptions=True,
        )
    counts = {"finished": 0, "cancelled": 0, "failed": 0}
    for result in results:
        counts[result if isinstance(result, str) else "failed"] += 1
    counts["planned_hang_ups"] = sum(plan.cancel_after_chunks is not None for plan in planned)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--priority", action="store_true", help="send priorities 0-2")
    parser.add_argument("--cancel-every", type=int, default=5, help="0: never cancel")
    parser.add_argument("--timeout", type=float, default=300.0)
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
