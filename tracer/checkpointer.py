"""Takes a checkpoint into the trace every N steps, at a step's start (`StepLoop.on_step_start`)."""

from __future__ import annotations

import time
from typing import Any

from stepscope.engine.checkpoint import take_checkpoint
from stepscope.engine.engine_loop import StepLoop

from .recorder import TraceRecorder

DEFAULT_CHECKPOINT_EVERY = 1000
"""Steps between checkpoints unless told otherwise: on the chat traffic of `benchmarks/` it
keeps their cost on the engine thread within the 1 % goal (`benchmarks/RESULTS.md`,
checkpoint_cost), while a replay from any step runs at most this many steps silently."""


class Checkpointer:
    """The loop's `on_step_start`: every `every` steps (not at step 0, whose state is
    empty), a snapshot of the engine's state to the recorder (whose writer thread builds
    its rows); `take_ns` is the snapshot's time, the engine thread's whole part."""

    def __init__(self, loop: StepLoop[Any], recorder: TraceRecorder, every: int) -> None:
        assert every > 0
        self.loop = loop
        self.recorder = recorder
        self.every = every

    def __call__(self, step: int) -> None:
        if step % self.every or step == 0:
            return
        started = time.perf_counter_ns()
        loop = self.loop
        pending_step = loop.batch_steps[0] if loop.batch_steps else None
        checkpoint = take_checkpoint(loop.core, step, pending_step)
        self.recorder.record_checkpoint(checkpoint, time.perf_counter_ns() - started)

    @staticmethod
    def attach(loop: StepLoop[Any], recorder: TraceRecorder, every: int | None) -> None:
        """Take checkpoints every `every` steps in `loop` (None or 0: none)."""
        if every:
            loop.on_step_start = Checkpointer(loop, recorder, every)
