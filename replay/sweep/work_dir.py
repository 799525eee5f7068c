"""A sweep's work folder beside its result, named for the process that owns it.

The points' traces are written there, then moved beside the result or removed with
the folder when the sweep ends, however it ends in Python. A sweep killed outright
(`kill -9`, a lost machine) cannot remove it: the next sweep into the same folder
removes each one whose owner, on this host, is no longer running, and never one
whose owner still runs (or whose owner it cannot tell).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = ".stepscope-sweep-"


@dataclass(frozen=True)
class Owner:
    """The process a work folder's name says made it."""

    host: str
    pid: int

    @classmethod
    def of_folder(cls, name: str) -> Owner | None:
        """`<PREFIX><host>-<pid>-<random>`; None for any other name."""
        if not name.startswith(PREFIX):
            return None
        parts = name.removeprefix(PREFIX).rsplit("-", 2)
        if len(parts) != 3 or not all(parts) or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]))

    @classmethod
    def this_process(cls) -> Owner:
        return cls(_host_name(), os.getpid())

    def is_gone(self) -> bool:
        """Whether this host runs no process with the owner's pid (a reused pid counts as
        running: the folder is then kept)."""
        if self.host != _host_name():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def new_work_dir(parent: Path) -> Path:
    """A fresh work folder in `parent`, named after this process."""
    owner = Owner.this_process()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{owner.host}-{owner.pid}-", dir=parent))


def remove_stale_work_dirs(parent: Path) -> list[Path]:
    """Remove the work folders in `parent` left by sweeps that are gone; returns them."""
    removed = []
    for path in sorted(parent.glob(f"{PREFIX}*")):
        owner = Owner.of_folder(path.name)
        if owner is None or path.is_symlink() or not path.is_dir() or not owner.is_gone():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _host_name() -> str:
    """This host's name as it may stand in a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", platform.node()) or "localhost"
