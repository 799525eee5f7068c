"""A workload's arrivals and aborts driven into a real vLLM engine at their steps, recorded.

The driver calls `LLMEngine.add_request`, `abort_request` and `step()` as a
client of the offline engine would, but in step order: a request whose
`arrival_step` is s is added just before the engine's iteration s, an abort at s
lands before it, and an abort marked `abort_before_update` is put on the engine
core's `aborts_queue`, which `EngineCore.step` drains after the forward pass and
before `update_from_output` (where a server's input thread puts an abort that
arrives mid-step; under async scheduling that is the next update the engine core
makes, one step later when the step returned right after scheduling). When the
scheduler has nothing to do but arrivals are still to come, the iteration is
recorded idle, as the scripted driver records it. The model samples: tokens, and
so every later decision, are the engine's own.

This is not the engine's `StepLoop`: `LLMEngine` owns the step, each `step()` is
one whole `EngineCore.step()` (schedule, forward pass, aborts queue, update) that
cannot be entered between its parts and that returns the client's outputs, not
the scheduler's. Arrivals and aborts come from the same `WorkloadArrivals`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import InputError, Workload
from stepscope.engine.arrivals import WorkloadArrivals
from stepscope.engine.workload import RequestSpec
from stepscope.tracer.redact import Redactor

from ..attach.session import VllmRecording
from ..attach.start import attach_recording
from . import live_engine
from .live_engine import LiveEngineOptions
from .tiny_lora import adapter_dir

logger = logging.getLogger("stepscope.tracer.vllm")


@dataclass(frozen=True)
class LiveRun:
    num_steps: int
    complete: bool
    num_rejected: int
    num_seeds_dropped: int
    dtype: str


class LiveDriver:
    """Steps one in-process `LLMEngine` through a workload, one iteration per recorded step."""

    def __init__(
        self,
        workload: Workload,
        engine: Any,
        recording: VllmRecording,
        *,
        keep_seeds: bool,
        model_dir: Path | None = None,
    ) -> None:
        self.workload = workload
        self.engine = engine
        self.scheduler = live_engine.scheduler_of(engine)
        self.recording = recording
        self.keep_seeds = keep_seeds
        self.model_dir = model_dir
        self.num_rejected = 0
        self.arrivals = WorkloadArrivals(workload)

    def run(self) -> tuple[int, bool]:
        """Step until every request is done (steps taken, finished) or `max_steps` runs out."""
        for step in range(self.workload.max_steps):
            for spec in self.arrivals.due(step):
                self._add(spec)
            self._abort(step)
            if not self._busy():
                if self.arrivals.all_arrived():
                    return step, True
                self.recording.idle_step()
                continue
            self._abort_before_update(step)
            self.engine.step()
            self._check_one_iteration(step)
        return self.workload.max_steps, False

    def _busy(self) -> bool:
        """What `EngineCore` checks before a step: requests, or batches in flight (async)."""
        batch_queue = self.engine.engine_core.engine_core.batch_queue
        return bool(self.scheduler.has_requests() or batch_queue)

    def _add(self, spec: RequestSpec) -> None:
        params = live_engine.vllm_sampling_params(spec.sampling_params, keep_seed=self.keep_seeds)
        try:
            self.engine.add_request(
                spec.request_id,
                {"prompt_token_ids": list(spec.prompt_token_ids)},
                params,
                arrival_time=spec.arrival_time,
                priority=spec.priority,
                lora_request=self._lora_request(spec),
            )
        except ValueError as error:
            logger.warning("stepscope: vLLM rejected request %s: %s", spec.request_id, error)
            self.num_rejected += 1
            self.recording.reject(spec)

    def _lora_request(self, spec: RequestSpec) -> Any:
        """The request's adapter, from the model's `loras/` folder (`tiny_lora` makes them)."""
        if spec.lora_id is None:
            return None
        from vllm.lora.request import LoRARequest

        assert self.model_dir is not None
        path = adapter_dir(self.model_dir, spec.lora_id)
        if not (path / "adapter_config.json").exists():
            raise InputError(
                f"request {spec.request_id}: lora_id {spec.lora_id} has no adapter at {path} "
                "(python -m stepscope.tracer.vllm.drive.tiny_lora makes random ones)"
            )
        return LoRARequest(f"lora{spec.lora_id}", spec.lora_id, str(path))

    def _abort(self, step: int) -> None:
        """Aborts between iterations: `LLMEngine.abort_request` reaches the scheduler at once."""
        for request_id in self.arrivals.aborts.get(step, ()):
            self.engine.abort_request([request_id])

    def _abort_before_update(self, step: int) -> None:
        """Aborts that land after this iteration's `schedule()` and before its update."""
        request_ids = self.arrivals.aborts_before_update.get(step, [])
        if request_ids:
            self.engine.output_processor.abort_requests(request_ids, internal=False)
            self.engine.engine_core.engine_core.aborts_queue.put_nowait(list(request_ids))

    def _check_one_iteration(self, step: int) -> None:
        if self.recording.active and self.recording.step != step:
            raise RuntimeError(
                f"LLMEngine.step() for step {step} left the recording at step "
                f"{self.recording.step}: not one EngineCore.step() per call"
            )


def record_live(
    workload: Workload,
    path: Path,
    options: LiveEngineOptions,
    meta: dict[str, str] | None = None,
    redactor: Redactor | None = None,
) -> LiveRun:
    """Run the workload on a real vLLM engine built for its config, recorded at `path`."""
    engine = live_engine.build_engine(workload.config, options)
    try:
        keep_seeds = live_engine.seeds_supported()
        seeds_dropped = _seeds_dropped(workload, keep_seeds=keep_seeds)
        extra = {**(meta or {}), **({"seeds_dropped": str(seeds_dropped)} if seeds_dropped else {})}
        recording = attach_recording(
            live_engine.scheduler_of(engine),
            path,
            planned=workload,
            meta=_meta(workload, engine, extra),
            redactor=redactor,
        )
        driver = LiveDriver(
            workload, engine, recording, keep_seeds=keep_seeds, model_dir=options.model
        )
        num_steps, finished = 0, False
        try:
            num_steps, finished = driver.run()
        finally:
            recording.close(finished=finished)
        dtype = live_engine.engine_dtype(engine)
    finally:
        live_engine.shutdown(engine)
    return LiveRun(num_steps, finished, driver.num_rejected, seeds_dropped, dtype)


def _seeds_dropped(workload: Workload, *, keep_seeds: bool) -> int:
    """Requests whose seed this platform cannot honour (they then sample unseeded)."""
    if keep_seeds:
        return 0
    return sum(spec.sampling_params.seed is not None for spec in workload.requests)


def _meta(workload: Workload, engine: Any, extra: dict[str, str]) -> dict[str, str]:
    return {
        "workload": workload.source,
        "description": workload.description,
        "max_steps": str(workload.max_steps),
        "dtype": live_engine.engine_dtype(engine),
        **extra,
    }
