"""Damaged trace bytes through the CLI: exit 0, 1 or 2 only, one line, nothing half-written.

What damage hits: DuckDB checksums every block it stores (the main and database
headers, the catalog's metadata block, every table's data blocks) and checks a
block when it reads it. A damaged byte in a block in use is therefore always
found, but only by a command that reads that block: `info` and `sql` read the
catalog, `_meta`, `_config` and what their query needs; `replay`, `diff` and
`check` read every block first, so they never call a damaged trace identical.
Bytes in free blocks (left by checkpoints) are never read and change nothing.
"""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from itertools import count
from pathlib import Path
from unittest import mock

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from traces import case, record

from stepscope.cli import main

Rows = dict[str, list[tuple[object, ...]]]
BLOCK_BYTES = 65536
HEADER_BYTES = 3 * 4096
_names = count()


def run_cli(*args: str) -> tuple[int, str, str]:
    """The real entry point in this process: (exit status, stdout, stderr); a traceback raises."""
    out, err = io.StringIO(), io.StringIO()
    argv = mock.patch.object(sys, "argv", ["stepscope", *args])
    with argv, redirect_stdout(out), redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    return code, out.getvalue(), err.getvalue()


def table_rows(path: Path) -> Rows | None:
    """Every row of every stored table, read directly; None when DuckDB cannot read them all."""
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            names = [r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()]
            return {name: con.sql(f"SELECT * FROM {name}").fetchall() for name in names}
    except duckdb.Error:
        return None


@pytest.fixture(scope="module")
def original(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Rows]:
    path = tmp_path_factory.mktemp("original") / "t.duckdb"
    record(case("03"), path)
    rows = table_rows(path)
    assert rows is not None
    return path, rows


def check_commands(
    damaged: Path, original: Path, rows: Rows, *, check: bool = False
) -> Iterator[tuple[str, int]]:
    """Run each command on the damaged copy and check what it may say; yield (command, exit)."""
    reads_whole = table_rows(damaged) == rows
    report = damaged.with_suffix(".xml")
    output = damaged.with_suffix(".replayed.duckdb")
    runs = {
        "info": ("info", str(damaged)),
        "sql": ("sql", str(damaged), "SELECT * FROM steps"),
        "replay": ("replay", str(damaged), "-o", str(output)),
        "diff": ("diff", str(original), str(damaged), "--junit", str(report)),
    }
    if check:
        runs["check"] = ("check", str(damaged))
    for name, args in runs.items():
        code, _, err = run_cli(*args)
        assert code in (0, 1, 2), (name, code, err)
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error:"), (name, err)
            assert damaged.name in lines[0], (name, lines[0])
        if name in ("replay", "diff", "check") and code != 2:
            assert reads_whole, f"{name} exited {code} on a trace that does not read whole"
        written = output if name == "replay" else report if name == "diff" else None
        if written is not None and code == 2:
            assert not written.exists(), f"{name} left {written.name} behind"
        yield name, code


def damage(data: bytes, offset: int, replacement: bytes) -> bytes:
    end = min(offset + len(replacement), len(data))
    return data[:offset] + replacement[: end - offset] + data[end:]


def test_one_damaged_byte_in_every_block(original: tuple[Path, Rows], tmp_path: Path) -> None:
    """A seeded byte in each header and block: in a used block, every full reader exits 2."""
    path, rows = original
    data = path.read_bytes()
    rng = random.Random(14)
    starts = [0, 4096, 8192, *range(HEADER_BYTES, len(data), BLOCK_BYTES)]
    outcomes = {}
    for start in starts:
        offset = rng.randrange(start, min(start + (4096 if start < HEADER_BYTES else BLOCK_BYTES),
                                          len(data)))  # fmt: skip
        damaged = tmp_path / f"d{offset}.duckdb"
        damaged.write_bytes(damage(data, offset, bytes([data[offset] ^ 0x5A])))
        codes = dict(check_commands(damaged, path, rows, check=start == starts[-1]))
        if table_rows(damaged) != rows:
            assert codes["replay"] == codes["diff"] == codes.get("check", 2) == 2, (offset, codes)
        outcomes[offset] = codes
    # Most blocks are in use: the damage must be found in them, not just survived.
    assert sum(codes["replay"] == 2 for codes in outcomes.values()) >= len(starts) // 2


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.data(),
    st.sampled_from(["overwrite", "truncate"]),
    st.binary(min_size=1, max_size=4096),
)
def test_damaged_trace_bytes(
    original: tuple[Path, Rows],
    tmp_path: Path,
    data: st.DataObject,
    how: str,
    replacement: bytes,
) -> None:
    path, rows = original
    raw = path.read_bytes()
    offset = data.draw(st.integers(0, len(raw) - 1), label="offset")
    damaged = tmp_path / f"f{next(_names)}.duckdb"
    damaged.write_bytes(raw[:offset] if how == "truncate" else damage(raw, offset, replacement))
    for _ in check_commands(damaged, path, rows):
        pass
