"""Turning command-line arguments into engine inputs: the workload and `--set` knobs."""

from __future__ import annotations

import importlib
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from stepscope.engine import InputError, Scheduler, Workload, load_workload

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


def load_scheduler_class(spec: str) -> type[Scheduler]:
    """`package.module:Class`, a subclass of the engine's Scheduler, imported from the path."""
    cls = _load_class(spec, "--scheduler", separators=":")
    if not issubclass(cls, Scheduler):
        raise InputError(
            f"--scheduler {spec!r}: {cls.__name__} is not a subclass of stepscope.engine.Scheduler"
        )
    return cls


def load_vllm_scheduler_class(spec: str) -> type:
    """`package.module.Class` (as vLLM's `--scheduler-cls` takes it) or `module:Class`."""
    from stepscope.tracer.vllm.drive.driver import prepare_environment

    prepare_environment()
    cls = _load_class(spec, "--scheduler-cls", separators=":.")
    from vllm.v1.core.sched.interface import SchedulerInterface

    if not issubclass(cls, SchedulerInterface):
        raise InputError(
            f"--scheduler-cls {spec!r}: {cls.__name__} is not a vLLM scheduler "
            "(a subclass of vllm.v1.core.sched.interface.SchedulerInterface)"
        )
    return cls


def _load_class(spec: str, option: str, separators: str) -> type:
    """Import `module<sep>Class` (the last separator splits), the working directory first."""
    cut = max(spec.rfind(sep) for sep in separators)
    module_name, class_name = spec[:cut], spec[cut + 1 :]
    if cut <= 0 or not class_name:
        expected = " or ".join(f"module{sep}Class" for sep in separators)
        raise InputError(f"{option} {spec!r}: expected {expected}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"{option} {spec!r}: cannot import {module_name}: {error}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise InputError(f"{option} {spec!r}: {module_name} has no class {class_name}")
    return cls
