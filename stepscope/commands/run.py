"""`stepscope run`: run a workload and print each step's decisions (or the oracle's JSON lines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from stepscope import run_printout
from stepscope.engine import EngineLoop, Workload
from stepscope.engine.model_runner_choice import TAPE, create_model_runner
from stepscope.engine.oracle_lines import final_line_text, step_lines
from stepscope.inputs import apply_knobs, load_workload_arg
from stepscope.safe_text import safe_text

from .options import DeviceOption, DtypeOption, KnobsOption, ModelOption


def run(
    workload: Annotated[
        Path | None,
        typer.Argument(
            help="Workload: JSON (conformance format) or a synthetic .toml description. "
            "Default: the bundled example."
        ),
    ] = None,
    *,
    jsonl: Annotated[
        bool,
        typer.Option("--jsonl", help="One JSON object per step, in the vLLM oracle's format."),
    ] = False,
    knobs: KnobsOption = None,
    model: ModelOption = TAPE,
    device: DeviceOption = "auto",
    dtype: DtypeOption = "float32",
) -> None:
    """Run a workload through the engine and show each step's scheduling decisions."""
    loaded = apply_knobs(load_workload_arg(workload), knobs or [])
    runner = create_model_runner(model, loaded, device=device, dtype=dtype)
    # Only the oracle's final line lists each request's output tokens.
    loop = EngineLoop(loaded, runner, keep_output_tokens=jsonl)
    if jsonl:
        for line in step_lines(loop):
            sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.writelines(final_line_text(loop))
        sys.stdout.write("\n")
        return
    console = run_printout.run_console()
    # One line however long the path: the terminal wraps it, a pipe keeps it whole.
    console.print(
        safe_text(f"{loaded.source}  ({_config_line(loaded)}; model {model})"),
        soft_wrap=True,
        markup=False,
    )
    table = run_printout.new_step_table(console, loaded)
    summary = run_printout.RunSummary()
    table.print_header()
    for record in loop.run():
        table.print_row(run_printout.step_cells(record, loop, loaded.config.token_budget))
        summary.add(record)
    table.print_footer()
    console.print(run_printout.CAPTION, style="dim", soft_wrap=True, highlight=False)
    run_printout.print_summary(console, summary, loop)


def _config_line(workload: Workload) -> str:
    config = workload.config
    return (
        f"bs {config.block_size}, {config.num_blocks} blocks, budget {config.token_budget}, "
        f"max_num_seqs {config.max_num_seqs}, {config.policy.value}, "
        f"prefix caching {'on' if config.enable_prefix_caching else 'off'}, "
        f"chunked prefill {'on' if config.enable_chunked_prefill else 'off'}"
    )
