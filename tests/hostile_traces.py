"""Real recordings whose every free string is hostile: escape sequences, C1 controls, markup.

The request ids come from the workload, as a user's or a crafted one would give them;
the strings a workload cannot set (a finish reason, `_meta`, a config name, a sweep's
meta and columns) are written into a copy of the recorded file, as another tool's
trace could hold them.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
from conftest import REPO
from stepscope.engine.workload import parse_workload
from stepscope.replay.whatif import replay_whatif
from traces import record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"

PAYLOAD = "\x1b[2J\x1b[31mEVIL\x1b]0;pwned\x07\x1b[0m"
"""Clears the screen, draws red text and retitles the terminal, when it reaches one raw."""

HOSTILE_IDS = (
    PAYLOAD,
    "EVIL\x9b31mC1",  # a one-byte CSI on terminals that read C1 controls
    "EVIL\x7fdel\rcr\x08bs",
    "[bold red]EVIL[/]",
    "[link=file:///etc/passwd]EVIL[/link]",
    "EVIL" + "L" * 900 + "\x1b[2J",  # longer than any screen shows whole
)
"""The first requests' ids; all hold `EVIL`, so finding `EVIL` offers a choice."""

HOSTILE_TEXT = PAYLOAD + "[link=file:///etc/passwd]x[/link]\x9b"
"""What the tampered strings (meta, finish reasons, config and sweep names) hold."""

RAW_PAYLOADS = (
    b"\x1b[2J",  # clear the screen (then red: rich's own red can precede an EVIL)
    b"\x1b]0;",  # set the title
    b"pwned\x07",  # the title's BEL (Textual ends its own OSC 22 with one)
    b"\xc2\x9b",  # a C1 CSI, in UTF-8
    b"\x7fdel",  # DEL
    b"cr\x08bs",  # backspace
    b"\x1b]8;",  # a hyperlink: markup's `[link=...]` read from an id
)
"""Bytes that only the hostile strings put on a terminal (rich's and Textual's own codes are
others)."""

SHOWN_PAYLOAD = "\\x1b[2J\\x1b[31mEVIL\\x1b]0;pwned\\x07\\x1b[0m"
"""The payload as it is shown: every control written as its escape."""

TAMPERED_META = ("model", "workload", "description", "device", "created_at", "host")


@dataclass(frozen=True)
class HostileTraces:
    """The recordings, in one folder."""

    folder: Path
    trace: Path
    """The hostile ids, meta values and some finish reasons."""
    what_if: Path
    """`trace` replayed with fewer KV blocks: decisions and request outcomes differ."""
    other_inputs: Path
    """The hostile workload with a hostile request's prompt changed: the workloads differ."""
    config: Path
    """`trace` with a hostile `vllm_version` in its config (it no longer replays)."""
    retyped: Path
    """`trace` whose `_steps` holds why each pass ended as text, some of it hostile: a file
    defines its own column types."""
    workload: Path
    """The hostile workload file."""


def _hostile_workload(*, change_prompt: bool = False) -> str:
    raw = json.loads(STORM.read_text())
    for request, request_id in zip(raw["requests"], HOSTILE_IDS, strict=False):
        request["id"] = request_id
    if change_prompt:
        raw["requests"][0]["prompt_token_ids"][0] += 1
    return json.dumps(raw)


def _tamper(path: Path, statements: list[tuple[str, list[object]]]) -> None:
    with duckdb.connect(str(path)) as connection:
        for statement, params in statements:
            connection.execute(statement, params)


@cache
def hostile_traces() -> HostileTraces:
    """The recordings, made once per test run."""
    folder = Path(tempfile.mkdtemp(prefix="stepscope-hostile-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    workload = folder / "hostile.json"
    workload.write_text(_hostile_workload())
    trace, what_if = folder / "hostile.duckdb", folder / "what_if.duckdb"
    record(parse_workload(workload.read_text(), source="hostile"), trace)
    meta = ", ".join(f"'{key}'" for key in TAMPERED_META)
    _tamper(
        trace,
        [
            (f"UPDATE _meta SET value = ? WHERE key IN ({meta})", [HOSTILE_TEXT]),
            ("UPDATE _events SET detail = ? WHERE kind = 'finish' AND request_index < 3",
             [HOSTILE_TEXT]),
        ],
    )  # fmt: skip
    replay_whatif(trace, what_if, {"num_blocks": 30})
    other_inputs = folder / "other_inputs.duckdb"
    record(parse_workload(_hostile_workload(change_prompt=True), source="hostile"), other_inputs)
    config = folder / "config.duckdb"
    shutil.copyfile(trace, config)
    _tamper(config, [("UPDATE _config SET vllm_version = ?", [HOSTILE_TEXT])])
    retyped = folder / "retyped.duckdb"
    shutil.copyfile(trace, retyped)
    _tamper(
        retyped,
        [
            ("ALTER TABLE _steps ALTER admission_stop TYPE VARCHAR", []),
            ("ALTER TABLE _steps ALTER running_pass_end TYPE VARCHAR", []),
            ("UPDATE _steps SET admission_stop = ?, running_pass_end = ?",
             [HOSTILE_TEXT, HOSTILE_TEXT]),
        ],
    )  # fmt: skip
    return HostileTraces(folder, trace, what_if, other_inputs, config, retyped, workload)


@cache
def hostile_sweep() -> Path:
    """A sweep of the hostile trace whose meta, a knob's name and a kept path are hostile.

    Point 1 keeps its real trace, so it opens; point 0's kept path is the payload.
    """
    traces = hostile_traces()
    result = traces.folder / "sweep.duckdb"
    done = stepscope_on_pipe(
        "sweep", str(traces.trace), "--grid", "num_blocks=30,41", "--keep", "all",
        "--jobs", "1", "-o", str(result),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _tamper(
        result,
        [
            ("UPDATE sweep_meta SET value = ? WHERE key IN ('scheduler', 'fit_problem')",
             [HOSTILE_TEXT]),
            ("UPDATE sweep_meta SET value = ? WHERE key = 'grid'",
             [json.dumps({HOSTILE_TEXT: [30, 41]})]),
            ("UPDATE sweep_points SET kept_trace = ? WHERE point = 0", [HOSTILE_TEXT]),
            (f'ALTER TABLE sweep_points RENAME COLUMN num_blocks TO "{HOSTILE_TEXT}"', []),
        ],
    )  # fmt: skip
    return result


def stepscope_on_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI with its output captured through pipes."""
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


# ----- a real terminal ----------------------------------------------------------------


@dataclass(frozen=True)
class TerminalRun:
    returncode: int
    output: bytes
    """Every byte the command wrote to the terminal (stdout and stderr share it)."""
    unsent: tuple[bytes, ...]
    """The keys never typed: what the screen was awaited for never showed."""


def on_terminal(
    *args: str,
    cwd: Path,
    keys: tuple[tuple[bytes, bytes], ...] = (),
    columns: int = 160,
    safety_s: float = 240,
) -> TerminalRun:
    """The real CLI on a pseudo-terminal: what it writes there, byte for byte.

    `keys`: (wait for these bytes, written after the keys before, then type these) in
    turn, for the TUI. `safety_s` only bounds a hung run: it is then killed, and the test
    fails on what it wrote.
    """
    master, slave = os.openpty()
    _set_size(slave, columns)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(cwd)),
        "TERM": "xterm-256color",
        "COLUMNS": str(columns),
        "LINES": "50",
    }
    for name in ("XDG_CACHE_HOME", "TMPDIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    process = subprocess.Popen(
        [sys.executable, "-m", "stepscope", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = bytearray()
    pending = list(keys)
    since = 0  # where the output after the last keys typed starts
    deadline = time.monotonic() + safety_s
    try:
        while time.monotonic() < deadline:
            if pending and pending[0][0] in output[since:]:
                since = len(output)
                os.write(master, pending.pop(0)[1])
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the other side closed: the command ended
                break
            if not chunk:
                break
            output += chunk
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
        process.wait(timeout=60)
    return TerminalRun(process.returncode, bytes(output), tuple(key for _, key in pending))


def _set_size(fd: int, columns: int) -> None:
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))


def raw_payloads(output: bytes) -> list[bytes]:
    """The payload's raw bytes found in `output` (none, when it was shown escaped)."""
    return [raw for raw in RAW_PAYLOADS if raw in output]
