"""One run at a time per issue, on this machine: an exclusive ``flock`` on a file.

The ledger's claims keep two runs from sending one message twice, but the start of a run
turns claims left in flight into *unconfirmed* ones, and that is only right when no other
run is still sending them. The kernel drops the lock when its holder dies, so a crashed run
never leaves a stale lock behind. (A lock shared between machines comes with the production
store.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import LockedError


@contextlib.contextmanager
def hold(path: Path, what: str) -> Iterator[None]:
    """Hold the lock at ``path`` for the block, or raise :class:`LockedError` at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise LockedError(f"another run of {what} holds {path} (pid {holder}); "
                              "wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
