"""Replay a trace through vLLM's own scheduler (or a custom vLLM scheduler class) and diff it.

The trace's arrivals, aborts and sampled tokens drive vLLM's real `Scheduler` (or
`AsyncScheduler`, as the trace's config says) with the recorder attached; the
replay's trace is then diffed against the original. A trace recorded from vLLM
replays identically; one recorded by stepscope's engine does too, wherever the
engine matches vLLM. Needs vLLM 0.32.x or 0.33.0 installed (`stepscope[vllm]` pins 0.33.0).
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import InputError
from stepscope.schema import open_trace

from .diff import TraceDiff, diff_traces
from .inputs import workload_from_trace
from .trace_runner import recorded_drafter

PINNED_VLLM_VERSION = "0.33.0"
"""The version `pip install 'stepscope[vllm]'` installs."""


@dataclass(frozen=True)
class VllmReplay:
    trace: Path
    output: Path | None
    scheduler_class: str
    diff: TraceDiff
    num_padded_tokens: int
    """Tokens the replay sampled past a request's recorded outputs (its course changed)."""
    vllm_version: str
    """The installed vLLM the trace was replayed through."""


def require_vllm() -> str:
    """The installed vLLM's version; a one-line error where it is missing or not supported."""
    if importlib.util.find_spec("vllm") is None:
        raise InputError(
            "--engine vllm: vLLM is not installed in this Python "
            f"(pip install 'stepscope[vllm]', which pins vllm=={PINNED_VLLM_VERSION})"
        )
    from stepscope.tracer.vllm.attach.versions import UnsupportedVllmVersion, recorded_version

    try:
        return recorded_version()
    except UnsupportedVllmVersion as error:
        raise InputError(f"--engine vllm: {error}") from None


def replay_with_vllm(
    trace_path: Path,
    output: Path | None = None,
    scheduler_cls: type | None = None,
    knobs: Mapping[str, Any] | None = None,
    *,
    ignore_block_ids: bool = False,
) -> VllmReplay:
    """Replay `trace_path` through vLLM; the replay's trace is kept at `output` if given.

    `knobs` change the config first (a what-if run through vLLM).
    """
    vllm_version = require_vllm()
    from stepscope.tracer.vllm.drive.driver import record_with_vllm

    with open_trace(trace_path) as trace:
        if trace.first_step or trace.gaps:
            raise InputError(
                f"{trace_path}: --engine vllm replays a trace from step 0, and this one "
                + (f"starts at step {trace.first_step}" if trace.first_step else "has gaps")
                + " (vLLM's Scheduler is not restored to a checkpoint); replay it through "
                "stepscope's engine"
            )
        workload = workload_from_trace(trace, knobs)
        drafter = recorded_drafter(workload, trace)
    with tempfile.TemporaryDirectory() as scratch:
        target = output or Path(scratch) / "vllm-replay.duckdb"
        run = record_with_vllm(
            workload,
            target,
            scheduler_cls=scheduler_cls,
            meta={"replay_of": str(trace_path), "model": "replay (recorded tokens)"},
            drafter=drafter,
        )
        with open_trace(target) as replayed:
            scheduler_class = replayed.meta.get("scheduler_class", "")
        diff = diff_traces(trace_path, target, ignore_block_ids=ignore_block_ids)
    return VllmReplay(
        trace_path, output, scheduler_class, diff, run.num_padded_tokens, vllm_version
    )
