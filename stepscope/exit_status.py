"""Exit statuses the command line gives besides 0, 1 and 2 (bad input)."""

from __future__ import annotations

import signal

INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT
"""The exit status a shell gives a command ended by Ctrl-C."""
