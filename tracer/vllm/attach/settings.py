"""Whether, and where, a vLLM engine records: an environment variable or vLLM's config.

    STEPSCOPE_TRACE=/traces/run-{pid}.duckdb     a file ({pid}: the engine process)
    STEPSCOPE_TRACE=/traces/run-{rank}.duckdb    a file per data-parallel rank ({rank}: 0..N-1)
    STEPSCOPE_TRACE=/traces/                     a directory (made if missing): a file per engine
    --additional-config '{"stepscope": {"trace": "/traces/"}}'
    STEPSCOPE_TRACE_REDACT=1                     token ids as keyed pseudonyms
    STEPSCOPE_TRACE_CHECKPOINT=5000steps         a checkpoint every 5000 steps (or `30s`, `off`)
    --additional-config '{"stepscope": {"checkpoint": "30s"}}'
    STEPSCOPE_TRACE_SEGMENT=60s                  a folder of segments, one closed every `60s`
                                                 (or `5000steps`), each replayable on its own
    STEPSCOPE_TRACE_RETAIN=2GB,24h               the oldest closed segments deleted past `2GB`
                                                 or `24h` (either alone too)
    --additional-config '{"stepscope": {"trace": "/traces/", "segment": "60s", "retain": "2GB"}}'
    STEPSCOPE_TRACE_KEEP="num_preemptions > 0"   closed segments with a step where it holds are
                                                 spared from retention ...
    STEPSCOPE_TRACE_KEEP_MAX=500MB               ... up to this much (default: retain's size)
    STEPSCOPE_TRACE_PRUNE=20GB,7d                at the engine's start, stopped recordings in
                                                 STEPSCOPE_TRACE's directory past it deleted
                                                 (`stepscope prune DIR --retain 20GB,7d`)
    STEPSCOPE_TRACE_BACKLOG=2048                 steps the recorder may fall behind before it
                                                 drops steps (default 512)
    STEPSCOPE_TRACE_PRIORITY=normal              the recorder's threads at the engine's CPU
                                                 priority (default `low`: nice 19 on Linux)

Each engine core of a data-parallel server records its own scheduler. A file path
without `{rank}` gets `-rank{R}` before its suffix there, so the ranks never share a
file; a directory gets one folder per server, `vllm-{instance_id}/rank{R}.duckdb`
(vLLM's `instance_id`, which every rank of a server shares). `{rank}` is 0 on an engine
that is not data parallel.

With a segment setting the recording is a folder instead of a file: in a directory,
`vllm-{stamp}-{pid}/` per engine (`vllm-{instance_id}/rank{R}/` per rank); a path not
ending in `/` names the folder itself (`-rank{R}` appended without `{rank}`), and one
ending in `.duckdb` is an error (a segmented recording is not one file).

Unset, nothing is wrapped and the scheduler runs exactly as vLLM's own class.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.tracer.segments import (
    Retention,
    SegmentSettings,
    keep_rule,
    parse_retention,
    parse_segment_every,
)

from .checkpoint_interval import DEFAULT_CHECKPOINT, CheckpointInterval, parse_checkpoint_interval
from .dp_rank import DataParallelRank

TRACE_ENV = "STEPSCOPE_TRACE"
REDACT_ENV = "STEPSCOPE_TRACE_REDACT"
CHECKPOINT_ENV = "STEPSCOPE_TRACE_CHECKPOINT"
SEGMENT_ENV = "STEPSCOPE_TRACE_SEGMENT"
RETAIN_ENV = "STEPSCOPE_TRACE_RETAIN"
KEEP_ENV = "STEPSCOPE_TRACE_KEEP"
KEEP_MAX_ENV = "STEPSCOPE_TRACE_KEEP_MAX"
PRUNE_ENV = "STEPSCOPE_TRACE_PRUNE"
BACKLOG_ENV = "STEPSCOPE_TRACE_BACKLOG"
PRIORITY_ENV = "STEPSCOPE_TRACE_PRIORITY"
PRIORITIES = ("low", "normal")
CONFIG_KEY = "stepscope"
RANK_FIELD = "{rank}"


def trace_path(vllm_config: Any, dp_rank: DataParallelRank | None = None) -> Path | None:
    """The file (or, segmented, the folder) this engine core records into, or None when
    recording is off; a `.duckdb` path with a segment setting is a ValueError."""
    raw = os.environ.get(TRACE_ENV) or _from_config(vllm_config, "trace")
    if not raw:
        return None
    template = str(raw)
    rank = 0 if dp_rank is None else dp_rank.rank
    path = Path(template.replace("{pid}", str(os.getpid())).replace(RANK_FIELD, str(rank)))
    folder = segments(vllm_config) is not None
    if path.is_dir() or template.endswith(os.sep):
        return _in_directory(path, vllm_config, dp_rank, folder=folder)
    if folder and path.suffix == ".duckdb":
        raise ValueError(
            f"{TRACE_ENV}={raw!r}: a segmented recording ({SEGMENT_ENV}) is a folder, not "
            "a .duckdb file: name a folder (/traces/) or a path without .duckdb"
        )
    if dp_rank is not None and RANK_FIELD not in template:
        return path.with_name(f"{path.stem}-rank{rank}{path.suffix}")
    return path


def _in_directory(
    directory: Path, vllm_config: Any, dp_rank: DataParallelRank | None, *, folder: bool
) -> Path:
    """A new file (or `folder`) in `directory` (made if missing): per engine, or per server
    and rank."""
    suffix = "" if folder else ".duckdb"
    if dp_rank is not None:
        server = directory / f"vllm-{vllm_config.instance_id}"
        server.mkdir(parents=True, exist_ok=True)
        return server / f"rank{dp_rank.rank}{suffix}"
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return directory / f"vllm-{stamp}-{os.getpid()}{suffix}"


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


def backlog_steps(vllm_config: Any) -> int | None:
    """Steps the recorder's builder may fall behind before steps are dropped (None: the
    recorder's default); a value that is not a positive whole number is a ValueError naming
    the setting it came from."""
    raw, setting = _setting(vllm_config, BACKLOG_ENV, "backlog")
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise ValueError(f"{setting}={raw!r}: want a positive number of steps, e.g. 2048")
    return int(raw)


def low_priority(vllm_config: Any) -> bool:
    """Whether the recorder's threads run at the lowest CPU priority (`low`, the default) or
    at the engine's (`normal`); any other value is a ValueError naming its setting."""
    raw, setting = _setting(vllm_config, PRIORITY_ENV, "priority")
    if raw is None:
        return True
    priority = raw.strip().lower()
    if priority not in PRIORITIES:
        raise ValueError(f"{setting}={raw!r}: want one of {', '.join(PRIORITIES)}")
    return priority == "low"


def segments(vllm_config: Any) -> SegmentSettings | None:
    """How the recording is cut into segments and how much is kept (None: one file); a
    malformed value is a ValueError naming the setting it came from."""
    every_raw, every_setting = _setting(vllm_config, SEGMENT_ENV, "segment")
    retain_raw, retain_setting = _setting(vllm_config, RETAIN_ENV, "retain")
    keep_raw, keep_setting = _setting(vllm_config, KEEP_ENV, "keep")
    keep_max = _setting(vllm_config, KEEP_MAX_ENV, "keep_max")
    if keep_max[0] is not None and keep_raw is None:
        raise ValueError(f"{keep_max[1]}={keep_max[0]!r} needs {KEEP_ENV} as well")
    if every_raw is None:
        for raw, setting in ((retain_raw, retain_setting), (keep_raw, keep_setting)):
            if raw is not None:
                raise ValueError(f"{setting}={raw!r} needs {SEGMENT_ENV} as well")
        return None
    every = parse_segment_every(every_raw, every_setting)
    retain = Retention() if retain_raw is None else parse_retention(retain_raw, retain_setting)
    keep = None if keep_raw is None else keep_rule((keep_raw, keep_setting), keep_max, retain)
    return SegmentSettings(every, retain, keep)


def prune(vllm_config: Any) -> tuple[Path, Retention] | None:
    """The directory whose stopped recordings are pruned at the engine's start, and past what
    (None: not set); a ValueError naming the setting when it is malformed, when the recording
    is not segmented, or when `STEPSCOPE_TRACE` names no directory (its parent may hold
    anything). Read before the recording's folder is made."""
    raw, setting = _setting(vllm_config, PRUNE_ENV, "prune")
    if raw is None:
        return None
    if segments(vllm_config) is None:
        raise ValueError(f"{setting}={raw!r} needs {SEGMENT_ENV} as well")
    template = str(os.environ.get(TRACE_ENV) or _from_config(vllm_config, "trace") or "")
    directory = Path(template)
    if not (template.endswith(os.sep) or directory.is_dir()) or "{" in template:
        raise ValueError(
            f"{setting}={raw!r} needs {TRACE_ENV} to name a directory of recordings "
            f"(/traces/), not {template!r}"
        )
    return directory, parse_retention(raw, setting)


def _setting(vllm_config: Any, env: str, key: str) -> tuple[str | None, str]:
    """A setting's raw value (None: not set) and where it came from."""
    raw = os.environ.get(env)
    if raw:
        return raw, env
    value = _from_config(vllm_config, key)
    setting = f"additional_config {CONFIG_KEY}.{key}"
    return (None if value is None or value == "" else str(value)), setting


def _from_config(vllm_config: Any, key: str) -> Any:
    additional = getattr(vllm_config, "additional_config", None)
    if not isinstance(additional, dict):
        return None
    section = additional.get(CONFIG_KEY)
    return section.get(key) if isinstance(section, dict) else None


@dataclass(frozen=True)
class RecordingSettings:
    """How one engine core records, every setting read (a malformed one refused) up front."""

    interval: CheckpointInterval | None
    segments: SegmentSettings | None
    backlog_steps: int | None
    low_priority: bool
    prune: tuple[Path, Retention] | None = None
    """The directory pruned at the engine's start, and past what (`stepscope prune`)."""


def read(vllm_config: Any) -> RecordingSettings:
    """Every setting of the recording, read before it starts: nothing is created for a
    recording whose settings are refused."""
    return RecordingSettings(
        checkpoint_interval(vllm_config),
        segments(vllm_config),
        backlog_steps(vllm_config),
        low_priority(vllm_config),
        prune(vllm_config),
    )
