"""Where a command writes: each output checked against the command's inputs and what is there.

Every check runs before any work, so a refused output costs a moment, never a replay or a
sweep; a trace is never overwritten, nor anything in a recording folder, another file
that holds anything only with `--force` (or `--append`).
"""

from __future__ import annotations

import enum
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stepscope.engine import InputError
from stepscope.schema.recording_layout import is_recording
from stepscope.schema.trace_file import is_duckdb_file
from stepscope.tracer.export.output import ExportError, atomic_file
from stepscope.tracer.held_signals import signals_held

STDOUT = Path("-")
"""`-` as a report's path: the report is printed to stdout."""


class OutputKind(enum.Enum):
    """What an output is, which decides where it may go."""

    REPORT = "report"
    """A text report: `-` is stdout; missing folders are made; replaced with --force."""
    NEW_FILE = "new file"
    """A file the command creates (a trace, a sweep result): it must not exist."""
    FILE = "file"
    """A binary file (or one printed beside a table): its folder must exist; --force replaces."""
    FOLDER = "folder"
    """A folder the command writes into; what it may already hold is its owner's check."""


@dataclass(frozen=True)
class Output:
    """One path a command will write, named by the option that gave it."""

    option: str
    path: Path
    kind: OutputKind
    what: str
    """What is written there, for the error when `-` cannot be it ("a DuckDB trace")."""
    append: bool = False
    """A report added to the end of the file (which may exist) rather than replacing it."""

    @property
    def to_stdout(self) -> bool:
        return self.kind is OutputKind.REPORT and self.path == STDOUT


def report(option: str, path: Path | None, *, append: bool = False) -> Output | None:
    """A text report (`--junit`, `--markdown`), or None when the option was not given."""
    return None if path is None else Output(option, path, OutputKind.REPORT, "a report", append)


def new_file(option: str, path: Path | None, what: str = "a DuckDB trace") -> Output | None:
    return None if path is None else Output(option, path, OutputKind.NEW_FILE, what)


def data_file(option: str, path: Path | None, what: str) -> Output | None:
    return None if path is None else Output(option, path, OutputKind.FILE, what)


def data_folder(option: str, path: Path | None, what: str) -> Output | None:
    return None if path is None else Output(option, path, OutputKind.FOLDER, what)


def check_outputs(
    outputs: Iterable[Output | None],
    inputs: Iterable[Path | None],
    *,
    force: bool = False,
    stdout_taken_by: Sequence[str] = (),
) -> None:
    """InputError now for any output that may not be written, before the command's work.

    `stdout_taken_by`: the options that already print data to stdout (`--json`)."""
    given = [output for output in outputs if output is not None]
    read = [path for path in inputs if path is not None]
    _check_stdout(given, stdout_taken_by)
    for output in given:
        if output.path == STDOUT:
            _check_dash(output)
            continue
        _check_not_an_input(output, read)
        _check_what_is_there(output, force=force)
        _check_writable(output)
    _check_apart(given)


def claims_stdout(outputs: Iterable[Output | None]) -> bool:
    """Whether a report goes to stdout (the human-readable output then goes to stderr)."""
    return any(output is not None and output.to_stdout for output in outputs)


def write_text(output: Output, text: str) -> None:
    """The report to stdout, added to the file's end, or written whole under a temporary name."""
    if output.to_stdout:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    path = output.path
    try:
        if output.append:
            _append(path, text)
        elif path.is_symlink() or _is_special(path):
            path.write_text(text, encoding="utf-8")
        else:
            with atomic_file(path) as temporary:
                temporary.write_text(text, encoding="utf-8")
    except (OSError, ExportError) as error:
        raise _unwritable(output, error) from None


def _is_special(path: Path) -> bool:
    """A device or a pipe (`/dev/stderr`): written into, never replaced."""
    return path.exists() and not path.is_file() and not path.is_dir()


def _append(path: Path, text: str) -> None:
    """One write with O_APPEND, so reports that several steps add to one file never interleave."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        data = (("\n" if os.fstat(descriptor).st_size else "") + text).encode("utf-8")
        while data:
            data = data[os.write(descriptor, data) :]
    finally:
        os.close(descriptor)


def _check_stdout(outputs: Sequence[Output], taken_by: Sequence[str]) -> None:
    claims = [*taken_by, *(f"{output.option} -" for output in outputs if output.to_stdout)]
    if len(claims) > 1:
        raise InputError(f"{' and '.join(claims)}: both write to stdout; send one to a file")


def _check_dash(output: Output) -> None:
    if output.kind is not OutputKind.REPORT:
        place = "folder" if output.kind is OutputKind.FOLDER else "file"
        raise InputError(
            f"{output.option} -: {output.what} cannot go to stdout; give a {place} name"
        )


def _check_not_an_input(output: Output, inputs: Sequence[Path]) -> None:
    target = output.path.resolve()
    for path in inputs:
        source = path.resolve()
        if _same_file(output.path, path):
            raise _refused(output, "is an input of this command")
        if target == source.with_name(source.name + ".wal"):
            raise _refused(output, f"is the write-ahead log of {path}, an input of this command")
        in_set = path.is_dir() and not is_recording(path)
        if in_set and target.is_relative_to(source) and _read_as_trace(target):
            raise _refused(
                output, f"inside {path}, where this command reads every *.duckdb as a trace"
            )
        if output.kind is OutputKind.FOLDER and source.is_relative_to(target):
            raise _refused(output, f"holds {path}, an input of this command")


def _read_as_trace(path: Path) -> bool:
    """A name a folder of traces is read by (`*.duckdb`, and the `.wal` beside one)."""
    return path.name.endswith((".duckdb", ".duckdb.wal"))


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _check_what_is_there(output: Output, *, force: bool) -> None:
    path = output.path
    recording = _recording_holding(path)
    if recording is not None:
        where = "" if recording == path.resolve() else f"inside {recording}, "
        raise _refused(output, f"{where}a recording folder, which only its recorder writes")
    if output.kind is OutputKind.NEW_FILE:
        for taken in (path, path.with_name(path.name + ".wal")):
            if taken.exists():
                raise InputError(f"{taken}: already exists (remove it or choose another "
                                 f"{output.option})")  # fmt: skip
        return
    if _is_trace(path):
        raise _refused(output, "an existing trace, never overwritten (even with --force)")
    if output.kind is OutputKind.FOLDER:
        if path.exists() and not path.is_dir():
            raise _refused(output, "exists and is not a folder")
        return
    if path.is_dir():
        raise _refused(output, "is a folder; give a file name")
    if _is_special(path) and output.kind is not OutputKind.REPORT:
        raise _refused(output, "not a regular file; give a file name")
    if path.is_file() and path.stat().st_size and not (force or output.append):
        also = " or --append to add to it" if output.option == "--markdown" else ""
        raise _refused(output, f"already exists (give --force to replace it{also})")


def _recording_holding(path: Path) -> Path | None:
    """The recording folder `path` is, or lies in (None: none)."""
    resolved = path.resolve()
    return next((folder for folder in (resolved, *resolved.parents) if is_recording(folder)), None)


def _is_trace(path: Path) -> bool:
    """A DuckDB file, or the write-ahead log beside one."""
    if is_duckdb_file(path):
        return True
    return path.suffix == ".wal" and is_duckdb_file(path.with_suffix(""))


def _check_writable(output: Output) -> None:
    """A file can be made where the output goes (a report's missing folders are made first)."""
    path = output.path
    folder = path.parent
    if _is_special(path):
        if not os.access(path, os.W_OK):
            raise _unwritable(output, PermissionError(13, "permission denied"))
        return
    try:
        if output.kind is OutputKind.REPORT:
            folder.mkdir(parents=True, exist_ok=True)
        elif output.kind is OutputKind.FOLDER:
            folder = _nearest_folder(path)
        elif not folder.is_dir():
            raise InputError(f"{output.option} {path}: no such folder {folder}")
        # Held: a stop inside the probe would leave its file behind.
        with signals_held(), tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}."):
            pass
    except OSError as error:
        raise _unwritable(output, error) from None
    if path.is_file() and not os.access(path, os.W_OK):
        raise _unwritable(output, PermissionError(13, "permission denied"))


def _nearest_folder(path: Path) -> Path:
    """The folder itself, or the deepest of its parents that exists (it is made from there)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        raise NotADirectoryError(20, "not a folder", str(path))
    return path


def _check_apart(outputs: Sequence[Output]) -> None:
    seen: dict[Path, Output] = {}
    for output in outputs:
        if output.to_stdout:
            continue
        first = seen.setdefault(output.path.resolve(), output)
        if first is not output:
            raise _refused(output, f"the same path as {first.option}")


def _refused(output: Output, why: str) -> InputError:
    return InputError(f"{output.option} {output.path}: {why}")


def _unwritable(output: Output, error: OSError | ExportError) -> InputError:
    return cannot_write(output.option, output.path, error)


def cannot_write(
    option: str, path: Path, error: OSError | ExportError, kept_in: Path | None = None
) -> InputError:
    """The one-line error for a path that could not be written (and where the work was kept)."""
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    kept = "" if kept_in is None else f"; the result is kept in {kept_in}"
    return InputError(f"{option} {path}: cannot write there ({reason}){kept}")
