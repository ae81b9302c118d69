"""``newsletter serve``: the subscription app on uvicorn, wired from the settings.

Behind a proxy, ``[subscriptions] forwarded_allow_ips`` makes the client address recorded
with consent (and rate-limited) the visitor's. Clients that hold connections open are
bounded by :mod:`pipeline.web.connection_limits`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import replace
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import uvicorn
from starlette.applications import Starlette

from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.web import connection_limits as limits
from pipeline.web.app import open_app
from pipeline.web.mail_queue import MailQueue

log = logging.getLogger("newsletter.app")

#: Host names of an ``app_url`` that can only mean this machine: links to them must name
#: the port actually served, or they lead nowhere.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def default_port(settings: Settings) -> int:
    """The port of ``[site] app_url`` when it names one, else 8001."""
    return urlsplit(settings.site.app_url).port or 8001


def served_app_url(app_url: str, port: int) -> str:
    """The app URL links should carry: a loopback ``app_url`` is this very process, so it
    names the port served; a public one is a proxy's, kept as is."""
    parts = urlsplit(app_url)
    if (parts.hostname not in LOOPBACK
            or (parts.port or {"http": 80, "https": 443}.get(parts.scheme)) == port):
        return app_url
    host = "[::1]" if parts.hostname == "::1" else parts.hostname
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, bound here rather than in uvicorn so that a
    port in use is one line and exit 2."""
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
        sock.listen(limits.BACKLOG)
    except OSError as exc:  # socket.gaierror included
        if sock is not None:
            sock.close()
        reason = ("the port is in use (another newsletter serve?); choose another with "
                  "--port" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc))
        raise UsageError(f"serve: cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, environ: Mapping[str, str], *, host: str, port: int) -> int:
    """Run until interrupted (Ctrl-C or SIGTERM end it cleanly: exit 0)."""
    open_files = limits.raise_open_files(
        limits.MAX_CONNECTIONS + limits.BACKLOG + limits.RESERVED_FILES)
    connections = limits.connection_limit(open_files)
    if connections < limits.MAX_CONNECTIONS:
        log.warning("serve: the open-file limit (%d) lets it hold %d connections, not %d: "
                    "raise its hard limit (ulimit -Hn, systemd's LimitNOFILE)", open_files,
                    connections, limits.MAX_CONNECTIONS)
    with ExitStack() as stack:
        sock = stack.enter_context(listen(host, port))
        served = sock.getsockname()[1]
        app_url = served_app_url(settings.site.app_url, served)
        if app_url != settings.site.app_url:
            log.info("note: [site] app_url names another port (%s); links name the port "
                     "served: %s. The archive's subscribe form and the issues' links are "
                     "built from app_url: run the rest with NEWSLETTER_SITE_APP_URL=%s for "
                     "them to reach this app", settings.site.app_url, app_url, app_url)
            settings = replace(settings, site=replace(settings.site, app_url=app_url))
        app = open_app(settings, environ, stack)
        log.info("subscription app: %s/subscribe (listening on %s:%d; Ctrl-C stops)",
                 app_url.rstrip("/"), host, served)
        server = _Server(server_config(app, host=host, port=served, forwarded_allow_ips=(
            settings.subscriptions.forwarded_allow_ips), connections=connections))
        server.mail_queue = app.state.mail_queue
        server.run(sockets=[sock])
        if not server.started:  # uvicorn said why, on stderr
            raise UsageError(f"could not serve on {host}:{served}")
    log.info("subscription app stopped")
    return 0


class _Server(uvicorn.Server):
    """uvicorn's server, minus re-raising SIGTERM after a graceful stop: the process would
    die by it before the store is closed, instead of exiting 0."""

    #: The app's sign-up work, told to stop waiting when the server stops (it waits for it).
    mail_queue: MailQueue
    #: Hold back the warnings a client causes at will (ours and uvicorn's).
    _once: limits.OncePerInterval
    _noisy = (logging.getLogger("uvicorn.error"), limits.log)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        limits.quiet_accept_errors(asyncio.get_running_loop())
        self._once = limits.OncePerInterval()
        for logger in self._noisy:
            logger.addFilter(self._once)
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.mail_queue.stop_waiting()
        await super().shutdown(sockets)
        for logger in self._noisy:
            logger.removeFilter(self._once)


def server_config(app: Starlette, *, host: str, port: int, forwarded_allow_ips: str,
                  connections: int = limits.MAX_CONNECTIONS,
                  request_seconds: float = limits.REQUEST_SECONDS) -> uvicorn.Config:
    """How uvicorn serves the app (the tests too, some with smaller bounds)."""
    return uvicorn.Config(
        app, host=host, port=port, proxy_headers=True, forwarded_allow_ips=forwarded_allow_ips,
        http=limits.guarded_protocol(limits.ConnectionGuard(connections, request_seconds)),
        loop=f"{limits.SteadyEventLoop.__module__}:{limits.SteadyEventLoop.__qualname__}",
        timeout_keep_alive=limits.KEEP_ALIVE_SECONDS, backlog=limits.BACKLOG,
        h11_max_incomplete_event_size=limits.MAX_HEAD_BYTES,
        # Requests and connections in flight; beyond, uvicorn answers 503. The guard keeps
        # the connections to ``connections``, passed for a moment by one accept burst.
        limit_concurrency=connections + limits.BACKLOG,
        # The access log would write every token of every query string.
        access_log=False, server_header=False, log_level="warning")
