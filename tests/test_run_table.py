"""`stepscope run`'s table: rows printed as steps complete, fixed columns, escaped request ids."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from stepscope.engine import EngineLoop, StepRecord
from test_cli import CASE as CASE_03
from test_cli import stepscope as stepscope_cli

from stepscope.commands import run as run_command
from stepscope.safe_text import safe_text as plain
from stepscope.streamed_table import Column, StepTable

LONG = """
num_requests = 40
seed = 1
[config]
block_size = 16
num_blocks = 400
max_num_batched_tokens = 256
max_num_seqs = 8
max_model_len = 256
[arrivals]
process = "constant"
interval = 3
[prompt_len]
distribution = "fixed"
value = 20
[output_len]
distribution = "fixed"
value = 30
"""


class CountingLoop(EngineLoop):
    """The engine loop, counting the steps it has yielded so far."""

    steps_yielded = 0

    def run(self) -> Iterator[StepRecord]:
        for record in super().run():
            CountingLoop.steps_yielded += 1
            yield record


class ProgressOut(io.StringIO):
    """stdout that notes, for each step row written, how many steps the engine had taken."""

    def __init__(self) -> None:
        super().__init__()
        self.steps_when_written: dict[int, int] = {}

    def write(self, text: str) -> int:
        for line in text.splitlines():
            cells = line.split("│")
            if len(cells) > 2 and cells[1].strip().isdigit():
                self.steps_when_written[int(cells[1])] = CountingLoop.steps_yielded
        return super().write(text)


def test_each_row_is_printed_when_its_step_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = tmp_path / "long.toml"
    workload.write_text(LONG)
    out = ProgressOut()
    monkeypatch.setattr(run_command, "EngineLoop", CountingLoop)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "120")
    run_command.run(workload)
    num_steps = CountingLoop.steps_yielded
    assert num_steps > 100
    assert sorted(out.steps_when_written) == list(range(num_steps))
    for step, steps_taken in out.steps_when_written.items():
        assert steps_taken == step + 1, f"step {step}'s row written after {steps_taken} steps"
    assert f"{num_steps} steps (0 idle)" in out.getvalue()


def test_a_row_keeps_its_columns_however_long_a_cell(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=60, color_system=None)
    table = StepTable(console, [Column("step", 3, right=True), Column("ids", 0, share=1)])
    table.print_header()
    table.print_row([[("7", "")], [(f"request-{i}", "") for i in range(20)]])
    table.print_row([[("8", "")], [("x" * 130, "")]])  # folded: wider than its cell
    table.print_footer()
    lines: list[Any] = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len({len(line) for line in lines}) == 1, lines
    assert len(lines[0]) == 60
    body = [line for line in lines if line.startswith("│")]
    assert body[0].split("│")[1] == "   7 " and body[1].split("│")[1] == "     "
    assert "".join(line.split("│")[2].strip() for line in body if "x" in line) == "x" * 130


def test_unprintable_characters_in_request_ids_are_escaped() -> None:
    assert plain("r\x1b[31mred") == "r\\x1b[31mred"
    assert plain("ok [bold]") == "ok [bold]"
    console = Console(file=io.StringIO(), width=40, color_system=None)
    table = StepTable(console, [Column("ids", 0, share=1)])
    table.print_row([[(plain("a\x07b"), ""), ("[red]c[/red]", "")]])
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "a\\x07b [red]c[/red]" in text and "\x07" not in text


def _header_cells(output: str) -> dict[str, int]:
    """Each column's width, read off the header line."""
    header = next(line for line in output.splitlines() if line.startswith("┃"))
    return {cell.strip(): len(cell) for cell in header.strip("┃").split("┃")}


def test_at_80_columns_the_table_fits_and_scheduled_gets_the_room() -> None:
    result = stepscope_cli("run", str(CASE_03), columns=80)
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and all(len(line) <= 80 for line in table), table
    widths = _header_cells(result.stdout)
    assert widths["scheduled"] >= 20 and widths["scheduled"] > widths["admission"]
    assert "+r0:7 +r1:7" in result.stdout  # one step's admissions on one line


def test_a_pipe_without_columns_is_not_wrapped_at_80() -> None:
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "run"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) > 80
    assert "chat-0:1 chat-1:1 +doc:22" in result.stdout
