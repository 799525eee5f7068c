"""Report files (`--junit`, `--markdown`): checked before the work, written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from stepscope.engine import InputError


def check_report_path(path: Path | None, option: str) -> None:
    """Fail now, not after the work, if `path` cannot be written; create its missing folders."""
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"{option} {path}: is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
    except OSError as error:
        raise InputError(f"{option} {path}: cannot be written ({error.strerror})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{option} {path}: cannot be written (permission denied)")


def write_report(path: Path, text: str, option: str) -> None:
    """Write `text` to a temporary file beside `path`, then move it into place."""
    try:
        descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as error:
        raise InputError(f"{option} {path}: cannot be written ({error.strerror})") from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(name, 0o666 & ~_umask())
        os.replace(name, path)
    except OSError as error:
        Path(name).unlink(missing_ok=True)
        raise InputError(f"{option} {path}: cannot be written ({error.strerror})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
