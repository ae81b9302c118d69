"""How ``newsletter serve`` bounds what clients that hold connections open can take.

uvicorn bounds no request's arrival, so a slowloris client could take every file
descriptor. Here a request must arrive whole within ``request_seconds``; at most ``limit``
connections are held, one more closing the one that has waited longest for a request (never
one whose request is in); the open-file limit is raised to fit; and out of descriptors the
loop pauses accepting rather than spin (:class:`SteadyEventLoop`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionGuard", "OncePerInterval", "SteadyEventLoop",
           "connection_limit", "guarded_protocol", "quiet_accept_errors", "raise_open_files"]

#: What a client can make happen at will; ``serve`` holds its repeats back (OncePerInterval).
log = logging.getLogger("newsletter.app.limits")

#: Connections held at most; beyond, the one waiting longest for its request is closed.
MAX_CONNECTIONS = 10_000
#: Connections accepted in one go before any is seen (uvicorn's default listen backlog).
BACKLOG = 2048
#: Files the process keeps for itself (the store, SMTP connections, templates, logs).
RESERVED_FILES = 256
#: However low the open-file limit, this many are tried (an accept that fails is logged).
MIN_CONNECTIONS = 64
#: A form is a few hundred bytes: only a client that holds the connection on purpose needs
#: longer to send it.
REQUEST_SECONDS = 10.0
#: Longer than a proxy's own idle timeout (CloudFront's and an AWS load balancer's 60 s), so
#: the proxy never sends a request down a connection this end is closing (a 502).
KEEP_ALIVE_SECONDS = 75
#: A request head still incomplete past this is refused (400): it bounds a connection's memory.
MAX_HEAD_BYTES = 16 * 1024
#: One log line per this many seconds for an event that repeats.
LOG_INTERVAL = 10.0

#: The states of the client's side while its request has not arrived whole.
_ARRIVING = (h11.IDLE, h11.SEND_BODY)


def raise_open_files(wanted: int) -> int:
    """The process's open-file soft limit, raised to ``wanted`` if it was lower and the hard
    limit allows (as far as it allows otherwise)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return max(soft, target)


def connection_limit(open_files: int) -> int:
    """How many connections fit in ``open_files`` beside the backlog and our own files."""
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, open_files - BACKLOG - RESERVED_FILES))


class OncePerInterval(logging.Filter):
    """Lets a warning through once per ``interval`` for each message; the next one that
    passes says how many were held back. Errors always pass."""

    def __init__(self, interval: float = LOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        #: Message (before its arguments) → when one last passed, how many held back since.
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        key, now = str(record.msg), self.clock()
        passed, held = self._seen.get(key, (now - self.interval, 0))
        if now - passed < self.interval:
            self._seen[key] = (passed, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more since the last one shown)"
        return True


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log asyncio's "accept() out of system resource" as one line, without the traceback
    (``log`` holds its repeats back); every other report as asyncio would."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            exc = context.get("exception")
            log.warning("serve: cannot accept connections (raise the open-file limit): %s",
                        getattr(exc, "strerror", None) or exc)
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


#: The ``accept()`` failures after which asyncio pauses accepting for a second.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class _StopsWhenFull:
    """A listening socket whose ``accept()``, once it failed for want of resources, says
    "nothing more to accept" until asyncio tries again (a second later)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._full = False

    def accept(self) -> tuple[socket.socket, Any]:
        if self._full:
            raise BlockingIOError(errno.EAGAIN, "stopped until asyncio tries again")
        try:
            return self.sock.accept()
        except OSError as exc:
            self._full = exc.errno in _OUT_OF_RESOURCES
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class SteadyEventLoop(asyncio.SelectorEventLoop):
    """asyncio's event loop, but out of file descriptors it stops accepting at the first
    failure, where asyncio went on for the whole backlog, logging and rescheduling each time."""

    def _accept_connection(self, protocol_factory: Any, sock: Any, *args: Any) -> None:
        if isinstance(sock, _StopsWhenFull):  # the socket of a retry asyncio scheduled
            sock = sock.sock
        accept: Any = getattr(super(), "_accept_connection")  # noqa: B009 (private)
        accept(protocol_factory, _StopsWhenFull(sock), *args)


class ConnectionGuard:
    """The connections of one server: how many are held, and which wait for a request, in
    the order they started waiting."""

    def __init__(self, limit: int, request_seconds: float = REQUEST_SECONDS) -> None:
        self.limit = limit
        self.request_seconds = request_seconds
        self._held: set[_Guarded] = set()
        self._waiting: OrderedDict[_Guarded, None] = OrderedDict()

    def opened(self, conn: _Guarded) -> None:
        """A new connection, waiting for its request; closes the longest waiting one when
        over the limit (the new one itself if every other has its request in)."""
        self._held.add(conn)
        self._waiting[conn] = None
        while len(self._held) > self.limit and self._waiting:
            oldest, _ = self._waiting.popitem(last=False)
            self._held.discard(oldest)
            oldest.transport.close()
            log.warning("serve: over %d connections; the longest waiting for a request "
                        "closed", self.limit)

    def waiting(self, conn: _Guarded, waits: bool) -> None:
        """Whether ``conn`` is waiting for a request (again, at the back of the line)."""
        if not waits:
            self._waiting.pop(conn, None)
        elif conn not in self._waiting and conn in self._held:
            self._waiting[conn] = None

    def closed(self, conn: _Guarded) -> None:
        self._held.discard(conn)
        self._waiting.pop(conn, None)


class _Guarded(H11Protocol):
    """uvicorn's h11 protocol with the deadline for a request and the guard's count."""

    guard: ClassVar[ConnectionGuard]
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        self.guard.opened(self)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.closed(self)
        super().connection_lost(exc)

    def _follow(self) -> None:
        """After the client's side moved: a request whose head is in is no longer pushed out
        for a newcomer; one that arrived whole no longer has a deadline."""
        state = self.conn.their_state
        self.guard.waiting(self, state is h11.IDLE)
        if state not in _ARRIVING:
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.guard.request_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state in _ARRIVING and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """The protocol class uvicorn is given (``Config(http=...)``), bound to ``guard``."""
    return type("GuardedH11Protocol", (_Guarded,), {"guard": guard})
