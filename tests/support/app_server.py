"""The real subscription app served by uvicorn on 127.0.0.1 (over the store, keys and outbox
of the settings given) or by a ``newsletter serve`` process, and an HTTP client that follows
no redirect and adds nothing."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import uvicorn

from pipeline.config import Settings
from pipeline.core.email.render import Footer
from pipeline.web.app import MailQueue, create_app
from pipeline.web.serve import server_config
from pipeline.web.sns import SnsVerifier
from pipeline.week import now as clock_now
from pipeline.wiring import open_subscriptions
from subscribers.subscriptions import Policy, Subscriptions


class _PromptServer(uvicorn.Server):
    """uvicorn's server, stopped at once by :meth:`stop` rather than at its next tick and
    grace period, which every app test's teardown would wait for. The app's lifespan
    shutdown still runs; ``newsletter serve`` keeps uvicorn's graceful ways."""

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await self.lifespan.shutdown()

    def stop(self) -> None:
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(wake.set)


#: Bound sockets by port, from :func:`free_port` until :func:`serve_app` takes its own.
_HELD: dict[int, socket.socket] = {}


def free_port() -> int:
    """A loopback port bound and held, so no other test can take it: :func:`serve_app` serves
    on that very socket; a port for another process must be let go first."""
    from support.servers import bound_socket

    sock = bound_socket()
    port: int = sock.getsockname()[1]
    _HELD[port] = sock
    return port


def let_go(port: int) -> int:
    """``port``, no longer held, for another process to bind."""
    _HELD.pop(port).close()
    return port


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class App:
    url: str
    settings: Settings
    subscriptions: Subscriptions
    #: The app's queue of work done after an answer (the sign-up's store work and mail).
    mail_queue: MailQueue | None = None

    @property
    def store(self):
        return self.subscriptions.store

    def request(self, method: str, path: str, *, form: Mapping[str, str] | None = None,
                body: bytes | None = None, headers: Mapping[str, str] | None = None,
                settle: bool = True) -> Answer:
        """One request; with ``settle``, also waits for the work queued after its answer,
        so the test then sees the store and the outbox as they end up."""
        answer = request(method, self.url + path if path.startswith("/") else path,
                         form=form, body=body, headers=headers)
        if settle:
            self.settle()
        return answer

    def settle(self) -> None:
        """Wait until the work queued after the answers so far is done."""
        if self.mail_queue is not None:
            assert self.mail_queue.wait(timeout=30), "queued work did not finish"

    def outbox(self) -> list[EmailMessage]:
        self.settle()
        folder = self.settings.resolve(self.settings.paths.build_dir) / "outbox"
        files = sorted(folder.glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
        return [BytesParser(policy=policy.default).parsebytes(p.read_bytes()) for p in files]


@dataclass
class Served:
    """A ``newsletter serve`` process; ``err`` is its stderr once it has stopped."""

    process: subprocess.Popen[str]
    err: str = ""


@contextmanager
def serve_process(command: list[str], port: int, **popen: Any) -> Iterator[Served]:
    """``command`` (one that serves the app) started, once ``/healthz`` answers on ``port``;
    at the end its process group is sent SIGTERM, as an operator stops it."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, **popen)
    served = Served(process)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                request("GET", f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        yield served
    finally:
        with contextlib.suppress(ProcessLookupError):  # it had already ended
            os.killpg(process.pid, signal.SIGTERM)
        _, served.err = process.communicate(timeout=30)


def request(method: str, url: str, *, form: Mapping[str, str] | None = None,
            body: bytes | None = None, headers: Mapping[str, str] | None = None) -> Answer:
    parts = urlsplit(url)
    sent_headers = dict(headers or {})
    if form is not None:
        body = urlencode(form).encode("utf-8")
        sent_headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
    assert parts.hostname is not None, url  # an absolute http:// URL
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=sent_headers)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      text)
    finally:
        connection.close()


def project_settings(tmp_path: Path, port: int, extra: str = "") -> Settings:
    """Settings rooted in ``tmp_path`` whose app_url is ``http://127.0.0.1:<port>``."""
    from support.project import sample_settings

    return sample_settings(tmp_path, extra='[site]\nbase_url = "http://127.0.0.1:8000"\n'
                                            f'app_url = "http://127.0.0.1:{port}"\n{extra}')


@contextmanager
def serve_app(settings: Settings, *, environ: Mapping[str, str] | None = None,
              verifier: SnsVerifier | None = None, clock: Callable[[], datetime] | None = None,
              policy: Policy | None = None, mail_queue: MailQueue | None = None,
              limits: Mapping[str, Any] | None = None) -> Iterator[App]:
    """``mail_queue``: one with short waits, for a test whose mail fails; ``limits``:
    ``server_config``'s bounds on connections."""
    port = urlsplit(settings.site.app_url).port
    assert port, "app_url must name the port to serve on"
    with open_subscriptions(settings, environ or {}) as subscriptions:
        if policy is not None:
            subscriptions.policy = replace(policy)
        queue = mail_queue or MailQueue()
        footer = Footer.configured(settings.delivery, settings.site)  # as `newsletter serve`
        app = create_app(subscriptions, app_url=settings.site.app_url,
                         base_url=settings.site.base_url, verifier=verifier,
                         mail_queue=queue, clock=clock or clock_now, footer=footer)
        server = _PromptServer(server_config(app, host="127.0.0.1", port=port,
                                              forwarded_allow_ips="127.0.0.1",
                                              **(limits or {})))
        held = _HELD.pop(port, None)
        thread = threading.Thread(target=server.run, daemon=True,
                                  kwargs={"sockets": [held]} if held else {})
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        try:
            yield App(settings.site.app_url, settings, subscriptions, queue)
        finally:
            server.stop()
            thread.join(timeout=10)
            if held:
                held.close()
