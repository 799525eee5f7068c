"""This checkout of stepscope installed for another Python, such as a vLLM venv, untouched.

The package goes into a scratch folder (`pip install --target`, no dependencies) that
the other interpreter reads through PYTHONPATH, so one vLLM venv serves any number of
checkouts and nothing is written into it. pip builds the wheel in the checkout's own
`build/` folder, so two installs of one checkout at once (pytest's workers) take turns.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import tempfile
from pathlib import Path

INSTALL_TIMEOUT_S = 600


def install_site(python: Path, source: Path, site: Path) -> Path:
    """Install `source` (a stepscope checkout) into `site` with `python`'s pip; returns `site`."""
    key = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    with (Path(tempfile.gettempdir()) / f"stepscope-site-install-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        _pip_install(python, source, site)
    return site


def _pip_install(python: Path, source: Path, site: Path) -> None:
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT_S,
    )
