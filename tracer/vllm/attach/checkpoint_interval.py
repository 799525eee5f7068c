"""How often a vLLM recording takes a checkpoint: every N steps, or every T seconds.

    STEPSCOPE_TRACE_CHECKPOINT=5000steps    at the start of every 5000th step
    STEPSCOPE_TRACE_CHECKPOINT=30s          at the first step that long (monotonic) after the last
    STEPSCOPE_TRACE_CHECKPOINT=off          none (or 0)

Step 0 is never checkpointed: its state is empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_CHECKPOINT = "5000steps"
"""The interval unless told otherwise: on vLLM's engine thread its snapshots cost well
within the 1 % goal of `schedule()` + `update_from_output()` at 1,024 running requests
and 100,000 blocks (`benchmarks/RESULTS.md`, vllm_checkpoint_cost), while a replay
from any step runs at most this many steps silently."""

_OFF = ("0", "off")
_STEPS = re.compile(r"(\d+)\s*steps?")
_SECONDS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*s")


@dataclass(frozen=True, slots=True)
class CheckpointInterval:
    """Either `every_steps` or `every_s` is set."""

    every_steps: int | None = None
    every_s: float | None = None

    def due(self, step: int, seconds_since_last: float) -> bool:
        """Whether the start of `step` takes a checkpoint."""
        if step == 0:
            return False
        if self.every_steps is not None:
            return step % self.every_steps == 0
        assert self.every_s is not None
        return seconds_since_last >= self.every_s


def parse_checkpoint_interval(raw: str, setting: str) -> CheckpointInterval | None:
    """`5000steps`, `30s`, or `0`/`off` (None); anything else is a ValueError naming `setting`."""
    text = raw.strip().lower()
    if text in _OFF:
        return None
    steps = _STEPS.fullmatch(text)
    if steps is not None and int(steps.group(1)) > 0:
        return CheckpointInterval(every_steps=int(steps.group(1)))
    seconds = _SECONDS.fullmatch(text)
    if seconds is not None and float(seconds.group(1)) > 0:
        return CheckpointInterval(every_s=float(seconds.group(1)))
    raise ValueError(
        f"{setting}={raw!r}: expected steps or seconds between checkpoints (5000steps, 30s), or off"
    )
