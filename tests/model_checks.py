"""Running workloads on a seeded decoder and checking every logit against the dense reference."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from stepscope.engine import EngineLoop, RequestFinish, SchedulerOutput, StepRecord, Workload
from stepscope.engine.model.config import PRESETS
from stepscope.engine.model.dense_attention import reference_logits
from stepscope.engine.model.llama import LlamaForCausalLM
from stepscope.engine.model.weights import seeded_model
from stepscope.engine.request_states import ScheduledChunk
from stepscope.engine.synthetic.toml_workload import parse_toml_workload
from stepscope.engine.torch_runner import TorchModelRunner

# The tiny model gains little from a second thread, and OpenMP threads stall badly
# whenever another process holds a core.
torch.set_num_threads(1)

FLOAT32_ATOL = 1e-4
"""Largest |paged - dense| logit allowed in float32 (logits are of order 1-10)."""


@functools.cache
def tiny_model(device: str = "cpu", dtype: str = "float32") -> LlamaForCausalLM:
    return seeded_model(PRESETS["tiny"], 0, torch.device(device), getattr(torch, dtype))


def toml_workload(text: str) -> Workload:
    return parse_toml_workload(text, source="<test>")


PRESSURE_CONFIG: dict[str, int | str] = {
    "block_size": 4,
    "num_blocks": 40,
    "max_num_batched_tokens": 24,
    "max_num_seqs": 6,
    "max_model_len": 96,
}

PRESSURE = """
seed = {seed}
num_requests = 16
[config]
{config}
[arrivals]
process = "poisson"
rate = 0.8
[prompt_len]
distribution = "uniform"
min = 6
max = 50
[output_len]
distribution = "uniform"
min = {output_min}
max = {output_max}
[[prefix_groups]]
share = 0.3
prefix_len = 12
[[prefix_groups]]
share = 0.3
prefix_len = 21
[priorities]
values = [0, 1, 2]
"""


def pressure_workload(
    seed: int, policy: str, output_len: tuple[int, int] = (4, 20), **knobs: int | str
) -> Workload:
    """KV pressure on the tiny model: prompts in chunks, preemption and recompute, shared
    prefixes; `knobs` add to or change its config (drafts, say)."""
    config = {**PRESSURE_CONFIG, "policy": policy, **knobs}
    lines = "\n".join(f"{knob} = {json.dumps(value)}" for knob, value in config.items())
    low, high = output_len
    return toml_workload(PRESSURE.format(seed=seed, config=lines, output_min=low, output_max=high))


@dataclass
class Coverage:
    """How much of the paged machinery a run exercised."""

    num_preemptions: int = 0
    num_resumed: int = 0
    num_prefix_hit_tokens: int = 0
    num_partial_chunks: int = 0
    max_chunks_per_prompt: int = 0
    num_mixed_steps: int = 0
    num_steps_sharing_blocks: int = 0
    chunks_before_first_sample: Counter[str] = field(default_factory=Counter)

    def add(self, record: StepRecord, loop: EngineLoop) -> None:
        engine_step = record.engine_step
        if engine_step is None:
            return
        output = engine_step.scheduler_output
        sampled = dict(
            zip(
                engine_step.model_runner_output.req_ids,
                engine_step.model_runner_output.sampled_token_ids,
                strict=True,
            )
        )
        self.num_preemptions += len(output.preempted_req_ids)
        self.num_resumed += len(output.scheduled_cached_reqs.resumed_req_ids)
        self.num_prefix_hit_tokens += sum(
            new.num_computed_tokens for new in output.scheduled_new_reqs
        )
        sizes = set()
        for req_id, num_tokens in output.num_scheduled_tokens.items():
            sizes.add(num_tokens == 1)
            if not sampled.get(req_id):
                self.num_partial_chunks += 1
                self.chunks_before_first_sample[req_id] += 1
                self.max_chunks_per_prompt = max(
                    self.max_chunks_per_prompt, self.chunks_before_first_sample[req_id] + 1
                )
        self.num_mixed_steps += sizes == {True, False}
        tables = loop.core.scheduler.kv_cache_manager.req_to_blocks.values()
        holders = Counter(block.block_id for blocks in tables for block in blocks)
        self.num_steps_sharing_blocks += any(count > 1 for count in holders.values())


@dataclass
class LoggedRun:
    workload: Workload
    final: dict[str, RequestFinish]
    logits: list[tuple[str, int, torch.Tensor]]
    """(request id, position, logits predicting position + 1) for every sampled token."""
    coverage: Coverage


Corruption = Callable[[TorchModelRunner, int], None]
"""Called after the runner has read step N's output and before its forward pass."""


def run_logged(
    workload: Workload, model: LlamaForCausalLM, corrupt: Corruption | None = None
) -> LoggedRun:
    logged: list[tuple[str, int, torch.Tensor]] = []

    def on_logits(chunks: Sequence[ScheduledChunk], logits: torch.Tensor) -> None:
        for chunk, row in zip(chunks, logits, strict=True):
            logged.append((chunk.state.req_id, chunk.end - 1, row.clone()))

    runner = TorchModelRunner(model, workload.config, on_logits=on_logits)
    if corrupt is not None:
        _corrupt_after_update(runner, corrupt)
    loop = EngineLoop(workload, runner)
    coverage = Coverage()
    for record in loop.run():
        coverage.add(record, loop)
    return LoggedRun(workload, loop.final(), logged, coverage)


def _corrupt_after_update(runner: TorchModelRunner, corrupt: Corruption) -> None:
    update = runner.request_states.update
    step = 0

    def corrupted_update(scheduler_output: SchedulerOutput) -> list[ScheduledChunk]:
        nonlocal step
        chunks = update(scheduler_output)
        corrupt(runner, step)
        step += 1
        return chunks

    runner.request_states.update = corrupted_update  # type: ignore[method-assign]


def check_against_dense(model: LlamaForCausalLM, run: LoggedRun, atol: float) -> int:
    """Assert every logged row equals the dense forward of its request's sequence.

    Greedy requests must also have sampled the dense argmax, up to ties within
    `atol`. Returns the number of rows compared.
    """
    prompts = {spec.request_id: spec.prompt_token_ids for spec in run.workload.requests}
    references = {
        req_id: reference_logits(model, prompts[req_id] + finish.output_token_ids).cpu()
        for req_id, finish in run.final.items()
        if finish.output_token_ids
    }
    for req_id, position, row in run.logits:
        difference = float((references[req_id][position] - row.cpu()).abs().max())
        assert difference <= atol, f"{req_id} position {position}: |paged - dense| = {difference}"
    greedy = {s.request_id for s in run.workload.requests if s.sampling_params.is_greedy}
    for req_id in greedy & set(references):
        prompt_len = len(prompts[req_id])
        for index, token_id in enumerate(run.final[req_id].output_token_ids):
            dense = references[req_id][prompt_len - 1 + index]
            gap = float(dense.max() - dense[token_id])
            assert gap <= atol, f"{req_id} output {index}: token {token_id} is not dense's argmax"
    return len(run.logits)
