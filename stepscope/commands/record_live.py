"""`stepscope record --engine vllm-live`: a workload or a trace's arrivals on a real vLLM engine."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from stepscope.engine import InputError, Workload
from stepscope.engine.model_runner_choice import TAPE
from stepscope.safe_text import safe_text
from stepscope.schema import open_trace
from stepscope.tracer.redact import Redactor


def record_with_vllm_live(
    workload: Workload,
    from_trace: Path | None,
    output: Path,
    model: str,
    device: str,
    dtype: str | None,
    engine_args: list[str],
    *,
    redact: bool,
    console: Console,
) -> None:
    """Run the workload on a real vLLM engine for its config, recorded at `output`."""
    _require_vllm()
    from stepscope.tracer.vllm.drive.live_driver import record_live
    from stepscope.tracer.vllm.drive.live_engine import LiveEngineOptions, parse_engine_args

    meta = _trace_meta(from_trace)
    if meta.get("redacted") == "true":
        raise InputError(
            f"{from_trace}: the trace is redacted; its token ids are pseudonyms no model can read"
        )
    options = LiveEngineOptions(
        model=_model_dir(model, meta),
        dtype=dtype or meta.get("dtype") or "auto",
        device=device,
        engine_args=parse_engine_args(engine_args),
    )
    rerun = {"rerun_of": str(from_trace)} if from_trace is not None else {}
    run = record_live(
        workload, output, options, meta=rerun, redactor=Redactor() if redact else None
    )
    state = "complete" if run.complete else "incomplete"
    size_mb = output.stat().st_size / 1e6
    console.print(
        safe_text(
            f"recorded {run.num_steps} steps of {len(workload.requests)} requests on vLLM "
            f"({run.dtype}) to {output} ({size_mb:.2f} MB, {state})"
        ),
        highlight=False,
        markup=False,
    )
    if run.num_seeds_dropped:
        console.print(
            f"warning: vLLM's CPU sampler takes no per-request seed: {run.num_seeds_dropped} "
            "request(s) sampled unseeded, so their tokens are not expected to match",
            highlight=False,
        )
    if from_trace is not None:
        console.print(
            safe_text(f"compare: stepscope diff {from_trace} {output}"),
            highlight=False,
            markup=False,
        )


def _require_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise InputError(
            "--engine vllm-live: vLLM is not installed in this Python (run stepscope from "
            "the Python environment vLLM is installed in)"
        )


def _trace_meta(from_trace: Path | None) -> Mapping[str, str]:
    if from_trace is None:
        return {}
    with open_trace(from_trace) as trace:
        return dict(trace.meta)


def _model_dir(model: str, meta: Mapping[str, str]) -> Path:
    """--model, else the model directory the trace names; a local model directory either way."""
    if model != TAPE:
        path, source = Path(model), f"--model {model}"
    else:
        named = meta.get("model", "")
        if not named or named == TAPE:
            raise InputError("--engine vllm-live needs --model DIR (a local model directory)")
        path, source = Path(named), f"the trace's model {named} (give --model DIR)"
    if not (path / "config.json").is_file():
        raise InputError(f"{source}: not a model directory (no config.json there)")
    return path
