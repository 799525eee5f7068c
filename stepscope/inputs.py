"""Turning command-line arguments into engine inputs: the workload and `--set` knobs."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from stepscope.engine import InputError, Workload, load_workload

DEFAULT_WORKLOAD = "default.json"


def load_workload_arg(path: Path | None) -> Workload:
    """The workload at `path`, or the bundled default workload when none is given."""
    if path is not None:
        return load_workload(path)
    bundled = resources.files("stepscope").joinpath("workloads", DEFAULT_WORKLOAD)
    with resources.as_file(bundled) as bundled_path:
        return load_workload(bundled_path)


def apply_knobs(workload: Workload, assignments: list[str]) -> Workload:
    """The workload with `--set knob=value` overrides applied to its config."""
    if not assignments:
        return workload
    knobs = dict(parse_knob(text) for text in assignments)
    return workload.with_config(workload.config.with_knobs(knobs))


def parse_knob(text: str) -> tuple[str, Any]:
    """`name=value`, the value read as JSON when it parses (4096, true, 0.1), else a string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise InputError(f"--set {text!r}: expected KNOB=VALUE")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def tapes(workload: Workload) -> dict[str, tuple[int, ...]]:
    """Each request's scripted outputs, for the tape model runner."""
    return {spec.request_id: spec.output_token_ids for spec in workload.requests}
