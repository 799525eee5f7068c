"""Record real vLLM (0.32.x, 0.33.0): its own scheduling decisions, into a stepscope trace.

`RecordingScheduler` and `RecordingAsyncScheduler` are for vLLM's `--scheduler-cls`;
`attach_recording` records any scheduler instance (a custom class included). The
classes import vLLM, so they load on first use: `import stepscope.tracer.vllm`
works without vLLM installed.
"""

from __future__ import annotations

from typing import Any

from .attach.session import VllmRecording
from .attach.start import attach_recording, vllm_meta

__all__ = [
    "RecordingAsyncScheduler",
    "RecordingScheduler",
    "VllmRecording",
    "attach_recording",
    "vllm_meta",
]


def __getattr__(name: str) -> Any:
    if name in ("RecordingScheduler", "RecordingAsyncScheduler"):
        from .attach import schedulers

        return getattr(schedulers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
