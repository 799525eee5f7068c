"""`stepscope export`: a trace as a Perfetto timeline or as a Parquet dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from stepscope.output_paths import check_outputs, data_file, data_folder
from stepscope.safe_text import safe_text
from stepscope.stop_signals import stops_like_ctrl_c
from stepscope.tracer.export import ExportError, export_parquet, export_perfetto
from stepscope.tracer.export.parquet_folder import ExportFolder

from .options import ForceOption, step_window


@stops_like_ctrl_c
def export(
    trace: Annotated[Path, typer.Argument(help="A trace: a file or a recording folder.")],
    perfetto: Annotated[
        Path | None,
        typer.Option(
            "--perfetto",
            metavar="OUT.pftrace",
            help="Write a Perfetto protobuf trace (open it at ui.perfetto.dev).",
        ),
    ] = None,
    parquet: Annotated[
        Path | None,
        typer.Option(
            "--parquet",
            metavar="OUT_DIR",
            help="Write every table as zstd Parquet under OUT_DIR/<table>/trace=<name>/, "
            "with OUT_DIR/stepscope_export.json; other traces' exports there are kept "
            "(with --from-step/--to-step: the window's rows, as `stepscope sql` reads them).",
        ),
    ] = None,
    from_step: Annotated[
        int | None,
        typer.Option("--from-step", metavar="STEP", help="Export the steps from STEP on only."),
    ] = None,
    to_step: Annotated[
        int | None,
        typer.Option("--to-step", metavar="STEP", help="Export up to STEP (default: the last)."),
    ] = None,
    *,
    force: ForceOption = False,
) -> None:
    """Export a trace: a Perfetto timeline (--perfetto) and/or a Parquet dataset (--parquet).

    --from-step/--to-step export those steps only: the timeline's slices crossing either
    edge cut there; the dataset's step-keyed tables cut to them, its requests those they
    name. An existing --perfetto file is replaced only with --force, never when it is a
    trace."""
    if perfetto is None and parquet is None:
        raise ExportError("nothing to export: give --perfetto OUT.pftrace and/or --parquet OUT_DIR")
    window = step_window(from_step, to_step)
    perfetto_out = data_file("--perfetto", perfetto, "a Perfetto trace (binary protobuf)")
    parquet_out = data_folder("--parquet", parquet, "a folder of Parquet files")
    check_outputs([perfetto_out, parquet_out], [trace], force=force)
    if parquet is not None:
        ExportFolder.check(parquet)
    console = Console(stderr=True)
    if perfetto is not None:
        timeline = export_perfetto(trace, perfetto, from_step=from_step, to_step=to_step)
        base = "step time" if timeline.timed else "step numbers (no recorded times)"
        _say(
            console,
            f"wrote {perfetto}: {timeline.num_steps} steps, {timeline.num_request_events} "
            f"request events, timed by {base} ({perfetto.stat().st_size / 1e6:.1f} MB); "
            "open it at https://ui.perfetto.dev",
        )
    if parquet is not None:
        dataset = export_parquet(trace, parquet, window)
        _say(
            console,
            f"wrote {dataset.total_rows} rows of {len(dataset.rows)} tables to {parquet} "
            f"as trace={dataset.trace}",
        )


def _say(console: Console, text: str) -> None:
    console.print(escape(safe_text(text)), highlight=False, soft_wrap=True)
