"""One run at a time per issue (or per shard): a lease in the subscriber store.

A run's start turns claims left in flight into unconfirmed ones, which is only right when no
other run still sends them; so a run holds ``send:<week>`` in the store the ledger lives in,
shared by every machine. The holder renews it from a thread; a dead holder's lease is taken
over once it expires (at once when its pid is gone from this machine); a holder that lost its
lease is told, and stops sending.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pipeline.errors import LockedError
from pipeline.week import iso_z, now
from subscribers.model import Lease

if TYPE_CHECKING:
    from subscribers.store import Leases

#: How long a crashed run on another machine blocks the next one.
LEASE_TTL = timedelta(minutes=2)

_PROCESS_TOKEN = secrets.token_hex(3)


@dataclass
class _Holding:
    """A lease this process holds (``run`` holds it, and ``send`` inside it again), and whom
    to tell if it is lost."""

    on_lost: list[Callable[[], None]] = field(default_factory=list)
    lost: bool = False


_held: dict[str, _Holding] = {}
_held_lock = threading.Lock()


def owner_id() -> str:
    """``host:pid:random``, the same for every ``hold`` of one process."""
    return f"{socket.gethostname()}:{os.getpid()}:{_PROCESS_TOKEN}"


@contextlib.contextmanager
def hold(store: Leases, name: str, what: str, *, ttl: timedelta = LEASE_TTL,
         clock: Callable[[], datetime] = now,
         on_lost: Callable[[], None] = lambda: None) -> Iterator[Lease]:
    """Hold the lease ``name`` for the block, or raise :class:`LockedError` (exit 5).
    ``on_lost`` is called from the renewing thread if the lease is taken over or lapses."""
    owner = owner_id()
    with _held_lock:
        holding = _held.get(name)
        if holding is not None:
            holding.on_lost.append(on_lost)
    if holding is not None:  # this process holds it already, and renews it
        try:
            lease = store.acquire_lease(name, owner, clock(), ttl)
            if holding.lost or lease.owner != owner:
                raise _locked(what, lease)
            yield lease
        finally:
            with _held_lock:
                holding.on_lost.remove(on_lost)
        return
    lease = store.acquire_lease(name, owner, clock(), ttl)
    if lease.owner != owner and _dead_here(lease.owner):
        store.release_lease(name, lease.owner)
        lease = store.acquire_lease(name, owner, clock(), ttl)
    if lease.owner != owner:
        raise _locked(what, lease)
    holding = _Holding(on_lost=[on_lost])
    with _held_lock:
        _held[name] = holding
    done = threading.Event()

    def renew() -> None:
        renewed_at = time.monotonic()
        while not done.wait(ttl.total_seconds() / 4):
            try:
                kept = store.renew_lease(name, owner, clock(), ttl)
            except Exception:  # a store hiccup: try again next beat...
                if time.monotonic() - renewed_at < ttl.total_seconds():
                    continue
                kept = False  # ...but a whole lease without renewal: it may be taken
            if not kept:  # taken over or lapsed: tell every holder in this process
                with _held_lock:
                    holding.lost = True
                    callbacks = list(holding.on_lost)
                for callback in callbacks:
                    callback()
                return
            renewed_at = time.monotonic()

    beat = threading.Thread(target=renew, name=f"lease {name}", daemon=True)
    beat.start()
    try:
        yield lease
    finally:
        done.set()
        beat.join()
        with _held_lock:
            _held.pop(name, None)
        with contextlib.suppress(Exception):  # it expires by itself anyway
            store.release_lease(name, owner)


def _locked(what: str, lease: Lease) -> LockedError:
    return LockedError(f"another run of {what} holds its lock: {lease.owner}, since "
                       f"{iso_z(lease.acquired_at)}, renewed until {iso_z(lease.expires_at)} "
                       "(a dead holder's lock is taken over after that); wait for it to "
                       "finish")


def _dead_here(owner: str) -> bool:
    """Whether ``owner`` was a process on this machine that no longer exists."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False
