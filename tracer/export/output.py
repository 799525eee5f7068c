"""Where an export goes: checked first, written under a temporary name, then renamed into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..held_signals import signals_held


class ExportError(ValueError):
    """An export that cannot be written where it was asked to go."""


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """A temporary file beside `path`, renamed onto it when the block succeeds, removed if not."""
    if path.is_dir():
        raise ExportError(f"{path}: is a folder; name a file to write")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ExportError(f"{path}: no such folder {folder}")
    temporary: Path | None = None
    try:
        # Held: a stop landing between the file's creation and this name would leave it behind.
        with signals_held():
            temporary = _scratch_file(path, folder)
        os.chmod(temporary, 0o666 & ~_umask())  # the mode a new `path` would get
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise


def _scratch_file(path: Path, folder: Path) -> Path:
    """An empty file `.NAME.XXXXXXXX` in `folder`."""
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as error:
        raise ExportError(f"{path}: cannot write there ({error.strerror})") from None
    os.close(handle)
    return Path(temporary)


@contextmanager
def scratch_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary folder inside `parent` (same file system, so renames out of it are atomic)."""
    folder: Path | None = None
    try:
        with signals_held():  # as for atomic_file's scratch file
            folder = _new_folder(parent, prefix)
        yield folder
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _new_folder(parent: Path, prefix: str) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as error:
        raise ExportError(f"{parent}: cannot write there ({error.strerror})") from None


def _umask() -> int:
    """The process's file-creation mask (read by setting it, then restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def writing(path: Path, error: OSError) -> ExportError:
    """An OSError met while writing `path`, as a one-line ExportError."""
    return ExportError(f"{path}: cannot write there ({error.strerror or error})")
