"""Options shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer

KnobsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KNOB=VALUE",
        help="Override an engine knob, e.g. --set max_num_batched_tokens=4096 (repeatable).",
    ),
]
