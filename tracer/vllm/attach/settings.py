"""Whether, and where, a vLLM engine records: an environment variable or vLLM's config.

    STEPSCOPE_TRACE=/traces/run-{pid}.duckdb     a file ({pid}: the engine process)
    STEPSCOPE_TRACE=/traces/run-{rank}.duckdb    a file per data-parallel rank ({rank}: 0..N-1)
    STEPSCOPE_TRACE=/traces/                     a directory (made if missing): a file per engine
    --additional-config '{"stepscope": {"trace": "/traces/"}}'
    STEPSCOPE_TRACE_REDACT=1                     token ids as keyed pseudonyms
    STEPSCOPE_TRACE_CHECKPOINT=5000steps         a checkpoint every 5000 steps (or `30s`, `off`)
    --additional-config '{"stepscope": {"checkpoint": "30s"}}'

Each engine core of a data-parallel server records its own scheduler. A file path
without `{rank}` gets `-rank{R}` before its suffix there, so the ranks never share a
file; a directory gets one folder per server, `vllm-{instance_id}/rank{R}.duckdb`
(vLLM's `instance_id`, which every rank of a server shares). `{rank}` is 0 on an engine
that is not data parallel.

Unset, nothing is wrapped and the scheduler runs exactly as vLLM's own class.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from .checkpoint_interval import DEFAULT_CHECKPOINT, CheckpointInterval, parse_checkpoint_interval
from .dp_rank import DataParallelRank

TRACE_ENV = "STEPSCOPE_TRACE"
REDACT_ENV = "STEPSCOPE_TRACE_REDACT"
CHECKPOINT_ENV = "STEPSCOPE_TRACE_CHECKPOINT"
CONFIG_KEY = "stepscope"
RANK_FIELD = "{rank}"


def trace_path(vllm_config: Any, dp_rank: DataParallelRank | None = None) -> Path | None:
    """The file this engine core records into, or None when recording is off."""
    raw = os.environ.get(TRACE_ENV) or _from_config(vllm_config, "trace")
    if not raw:
        return None
    template = str(raw)
    rank = 0 if dp_rank is None else dp_rank.rank
    path = Path(template.replace("{pid}", str(os.getpid())).replace(RANK_FIELD, str(rank)))
    if path.is_dir() or template.endswith(os.sep):
        return _in_directory(path, vllm_config, dp_rank)
    if dp_rank is not None and RANK_FIELD not in template:
        return path.with_name(f"{path.stem}-rank{rank}{path.suffix}")
    return path


def _in_directory(directory: Path, vllm_config: Any, dp_rank: DataParallelRank | None) -> Path:
    """A new file in `directory` (made if missing): per engine, or per server and rank."""
    if dp_rank is not None:
        server = directory / f"vllm-{vllm_config.instance_id}"
        server.mkdir(parents=True, exist_ok=True)
        return server / f"rank{dp_rank.rank}.duckdb"
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return directory / f"vllm-{stamp}-{os.getpid()}.duckdb"


def redact(vllm_config: Any) -> bool:
    raw = os.environ.get(REDACT_ENV) or _from_config(vllm_config, "redact")
    return str(raw).lower() in ("1", "true", "yes")


def checkpoint_interval(vllm_config: Any) -> CheckpointInterval | None:
    """How often the recording takes a checkpoint (None: never); a malformed value is a
    ValueError naming the setting it came from."""
    raw = os.environ.get(CHECKPOINT_ENV)
    setting = CHECKPOINT_ENV
    if not raw:
        raw = _from_config(vllm_config, "checkpoint")
        setting = f"additional_config {CONFIG_KEY}.checkpoint"
    if raw is None or raw == "":
        return parse_checkpoint_interval(DEFAULT_CHECKPOINT, CHECKPOINT_ENV)
    return parse_checkpoint_interval(str(raw), setting)


def _from_config(vllm_config: Any, key: str) -> Any:
    additional = getattr(vllm_config, "additional_config", None)
    if not isinstance(additional, dict):
        return None
    section = additional.get(CONFIG_KEY)
    return section.get(key) if isinstance(section, dict) else None
