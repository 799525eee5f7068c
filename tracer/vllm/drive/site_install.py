"""This checkout of stepscope installed for another Python, such as a vLLM venv, untouched.

The package goes into a scratch folder (`pip install --target`, no dependencies) that
the other interpreter reads through PYTHONPATH, so one vLLM venv serves any number of
checkouts and nothing is written into it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

INSTALL_TIMEOUT_S = 600


def install_site(python: Path, source: Path, site: Path) -> Path:
    """Install `source` (a stepscope checkout) into `site` with `python`'s pip; returns `site`."""
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
    return site
