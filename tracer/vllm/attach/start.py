"""Start recording a live vLLM scheduler: settings, the trace's `meta`, and the session."""

from __future__ import annotations

import atexit
import datetime
import logging
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stepscope.engine import Workload
from stepscope.tracer.redact import Redactor
from stepscope.tracer.segments.prune import prune_in_background

from stepscope import __version__

from . import settings
from .dp_rank import data_parallel_rank
from .session import VllmRecording

logger = logging.getLogger("stepscope.tracer.vllm")

ENGINE_NAME = "vllm"


def attach_recording(
    scheduler: Any,
    path: Path,
    *,
    planned: Workload | None = None,
    meta: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
) -> VllmRecording:
    """Record `scheduler` into a new trace at `path` from now on (raises if it exists)."""
    if path.exists():
        raise FileExistsError(f"{path}: already exists")
    recording = VllmRecording(
        scheduler, path, {**vllm_meta(scheduler), **(meta or {})}, planned, redactor
    )
    return recording.attach()


def start_from_settings(scheduler: Any) -> VllmRecording | None:
    """Record if `STEPSCOPE_TRACE` (or the config) asks to; never stops vLLM from starting."""
    path = settings.trace_path(scheduler.vllm_config, data_parallel_rank(scheduler.vllm_config))
    if path is None:
        return None
    log_through_vllm()
    try:
        redactor = Redactor() if settings.redact(scheduler.vllm_config) else None
        recording = attach_recording(scheduler, path, redactor=redactor)
    except Exception as error:
        logger.error("stepscope: not recording this engine: %s", error)
        return None
    atexit.register(recording.close)
    logger.info("stepscope: recording the scheduler into %s", path)
    dp_rank = data_parallel_rank(scheduler.vllm_config)
    if recording.prune is not None and (dp_rank is None or dp_rank.rank == 0):
        prune_in_background(*recording.prune)  # one rank of a server prunes for all
    return recording


def log_through_vllm() -> None:
    """stepscope's lines in the server's log, written as vLLM writes its own.

    vLLM configures only its `vllm` logger, so without this the lines an engine logs at
    INFO (where it records, what it pruned) reach no one, and warnings reach stderr bare.
    Where vLLM's logging is off (`VLLM_CONFIGURE_LOGGING=0`), or logging is configured
    already (handlers on `stepscope` or on the root), nothing changes."""
    ours, theirs = logging.getLogger("stepscope"), logging.getLogger("vllm")
    if ours.handlers or logging.getLogger().handlers or not theirs.handlers:
        return
    for handler in theirs.handlers:
        ours.addHandler(handler)
    if ours.level == logging.NOTSET:
        ours.setLevel(theirs.level)


def vllm_meta(scheduler: Any) -> dict[str, str]:
    """What the trace says about the engine that made it (and its rank, if data parallel)."""
    import vllm

    config = scheduler.vllm_config
    cls = type(scheduler)
    dp_rank = data_parallel_rank(config)
    return {
        "tool_version": __version__,
        "engine": ENGINE_NAME,
        "vllm_version": vllm.__version__,
        "scheduler_class": f"{cls.__module__}.{cls.__qualname__}",
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python_version": platform.python_version(),
        "workload": "vllm",
        "description": "",
        "model": str(config.model_config.model),
        "dtype": str(config.model_config.dtype).removeprefix("torch."),
        "device": str(config.device_config.device_type)
        if config.device_config is not None
        else "unknown",
        "use_v2_model_runner": str(bool(scheduler.use_v2_model_runner)).lower(),
        "prefix_caching_hash_algo": str(config.cache_config.prefix_caching_hash_algo),
        **(dp_rank.meta() if dp_rank is not None else {}),
    }
