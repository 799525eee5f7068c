"""Reading what a process drew on a pseudo-terminal."""

from __future__ import annotations

import os


def everything_drawn(leader: int) -> bytes:
    """Every byte written to the terminal whose leader side is `leader`, until the process
    closes its side; then the leader is closed too."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the follower side closed: the process is done writing
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return b"".join(chunks)
