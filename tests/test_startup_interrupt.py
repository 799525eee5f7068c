"""Ctrl-C while the command line is still loading ends it as Ctrl-C later does: one line, 130."""

from __future__ import annotations

import subprocess
import sys

import pytest

_INTERRUPT_ON_IMPORT = """
import builtins, os, signal, sys
# As a terminal starts a command: Ctrl-C neither ignored nor blocked (a pytest run in the
# background, or an earlier test, may leave it either way for the processes it starts).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}})
real_import = builtins.__import__

def interrupting_import(name, *args, **kwargs):
    if name == {module!r}:
        builtins.__import__ = real_import
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, delivered mid-import
    return real_import(name, *args, **kwargs)

builtins.__import__ = interrupting_import
sys.argv = ["stepscope", "info", "missing.duckdb"]
{start}
"""

_STARTS = {
    "python -m stepscope": 'import runpy; runpy.run_module("stepscope", run_name="__main__")',
    "the stepscope script": (
        "from importlib.metadata import entry_points; "
        "entry_points(group='console_scripts')['stepscope'].load()()"
    ),
}
"""The two ways the command line starts: as a module, and as the installed console script."""


@pytest.mark.parametrize("start", _STARTS)
@pytest.mark.parametrize("module", ["duckdb", "typer", "stepscope.schema"])
def test_ctrl_c_while_the_commands_load_is_one_line(module: str, start: str) -> None:
    script = _INTERRUPT_ON_IMPORT.format(module=module, start=_STARTS[start])
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"
