"""Invariants of the engine on random workloads (hypothesis)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_workloads import random_workload
from stepscope.engine import EngineLoop, RequestStatus, TapeModelRunner, Workload
from stepscope.engine.workload import parse_workload


def _workload(rng: random.Random) -> Workload:
    raw = random_workload(rng, async_scheduling=rng.random() < 0.5, late_aborts=True)
    return parse_workload(json.dumps(raw), source="<random>")


def _check_blocks(loop: EngineLoop) -> None:
    """Every block is the null block, free with no references, or held by its ref_cnt tables."""
    manager = loop.core.scheduler.kv_cache_manager
    pool = manager.block_pool
    holders = Counter(
        block.block_id for blocks in manager.req_to_blocks.values() for block in blocks
    )
    free_ids = set(pool.free_block_queue.block_ids())
    assert 0 not in free_ids and 0 not in holders
    for block in pool.blocks[1:]:
        if block.block_id in free_ids:
            assert block.ref_cnt == 0, block
            assert block.block_id not in holders, block
        else:
            assert block.ref_cnt == holders[block.block_id] > 0, block
    cached = pool.cached_block_hash_to_block
    for block_hash in cached:
        blocks = cached.blocks(block_hash)
        assert blocks and all(block.block_hash == block_hash for block in blocks)
    assert sum(len(cached.blocks(h)) for h in cached) == sum(
        block.block_hash is not None for block in pool.blocks
    )


def _check_queues(loop: EngineLoop) -> None:
    """Each arrived request is in exactly one of running, waiting and finished."""
    scheduler = loop.core.scheduler
    running = [r.request_id for r in scheduler.running]
    waiting = [r.request_id for r in scheduler.waiting]
    assert len(set(running) | set(waiting)) == len(running) + len(waiting)
    assert set(running) | set(waiting) == set(scheduler.requests)
    for req_id, request in loop.unfinished.items():
        in_scheduler = req_id in scheduler.requests
        assert in_scheduler != request.is_finished()
        # Under async scheduling the in-flight tokens are counted as computed already.
        assert request.num_computed_tokens <= request.num_tokens + request.num_output_placeholders
        if req_id in running:
            assert request.status == RequestStatus.RUNNING
    assert (
        len(running)
        <= loop.workload.config.max_num_running_reqs
        <= loop.workload.config.max_num_seqs
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_invariants_hold_every_step(rng: random.Random) -> None:
    workload = _workload(rng)
    config = workload.config
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    loop = EngineLoop(workload, TapeModelRunner(tapes))
    for record in loop.run():
        _check_blocks(loop)
        _check_queues(loop)
        if record.engine_step is None:
            continue
        output = record.engine_step.scheduler_output
        assert output.total_num_scheduled_tokens <= config.token_budget
        assert output.total_num_scheduled_tokens <= config.max_num_batched_tokens
        assert all(n > 0 for n in output.num_scheduled_tokens.values())
        assert len(output.num_scheduled_tokens) <= config.max_num_seqs


_DECISION_LOG_SCRIPT = """
import json, random, sys
sys.path.insert(0, {tests!r})
from random_workloads import random_workload
from oracle_compare import run_lines
from stepscope.engine.workload import parse_workload
for seed in range(12):
    workload = parse_workload(json.dumps(random_workload(random.Random(seed), 24)))
    for line in run_lines(workload):
        print(json.dumps(line))
"""


def test_decisions_do_not_depend_on_the_hash_seed() -> None:
    script = _DECISION_LOG_SCRIPT.format(tests=str(REPO / "tests"))
    logs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        logs.append(result.stdout)
    assert logs[0] == logs[1]
    assert logs[0].count("\n") > 500
