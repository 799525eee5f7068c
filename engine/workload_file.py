"""A workload file read: the conformance suite's JSON, or a synthetic description in TOML."""

from __future__ import annotations

from pathlib import Path

from .errors import WorkloadError
from .memory_limit import BYTES_PER_JSON_CHAR, over_memory_limit
from .synthetic.toml_workload import parse_toml_workload
from .workload import Workload, parse_workload


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file: JSON, or a synthetic description if it ends in `.toml`."""
    path = Path(path)
    _check_file_size(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise WorkloadError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise WorkloadError(f"{path}: not a UTF-8 text file") from None
    if path.suffix == ".toml":
        return parse_toml_workload(text, source=str(path))
    return parse_workload(text, source=str(path))


def _check_file_size(path: Path) -> None:
    """A file too big to parse in the memory this run may use is refused before it is read."""
    try:
        size = path.stat().st_size
    except OSError:
        return  # reading it reports the error
    problem = over_memory_limit(size, BYTES_PER_JSON_CHAR, "bytes of workload text")
    if problem is not None:
        raise WorkloadError(f"{path}: {problem}")
