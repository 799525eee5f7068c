"""Whether, and where, a vLLM engine records: an environment variable or vLLM's config.

    STEPSCOPE_TRACE=/traces/run-{pid}.duckdb     a file ({pid}: the engine process)
    STEPSCOPE_TRACE=/traces/                     a directory (made if missing): a file per engine
    --additional-config '{"stepscope": {"trace": "/traces/"}}'
    STEPSCOPE_TRACE_REDACT=1                     token ids as keyed pseudonyms

Unset, nothing is wrapped and the scheduler runs exactly as vLLM's own class.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

TRACE_ENV = "STEPSCOPE_TRACE"
REDACT_ENV = "STEPSCOPE_TRACE_REDACT"
CONFIG_KEY = "stepscope"


def trace_path(vllm_config: Any) -> Path | None:
    """The file this engine records into, or None when recording is off."""
    raw = os.environ.get(TRACE_ENV) or _from_config(vllm_config, "trace")
    if not raw:
        return None
    path = Path(str(raw).replace("{pid}", str(os.getpid())))
    if path.is_dir() or str(raw).endswith(os.sep):
        path.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        path = path / f"vllm-{stamp}-{os.getpid()}.duckdb"
    return path


def redact(vllm_config: Any) -> bool:
    raw = os.environ.get(REDACT_ENV) or _from_config(vllm_config, "redact")
    return str(raw).lower() in ("1", "true", "yes")


def _from_config(vllm_config: Any, key: str) -> Any:
    additional = getattr(vllm_config, "additional_config", None)
    if not isinstance(additional, dict):
        return None
    section = additional.get(CONFIG_KEY)
    return section.get(key) if isinstance(section, dict) else None
