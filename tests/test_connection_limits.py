"""``newsletter serve`` against clients that hold connections open (slowloris): real sockets
against the real app on 127.0.0.1 (pipeline/web/connection_limits.py)."""

from __future__ import annotations

import http.client
import logging
import re
import resource
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from support.app_server import (
    App,
    free_port,
    let_go,
    project_settings,
    request,
    serve_app,
    serve_process,
)
from support.commands import clean_env, newsletter_cmd

from pipeline.web.connection_limits import OncePerInterval

HEAD = (b"POST /subscribe HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:8000\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\n")


@pytest.fixture
def settings(tmp_path):
    return project_settings(tmp_path, free_port())


def connect(app: App) -> socket.socket:
    port = int(app.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def closed_by_server(sock: socket.socket, wait: float = 0.0) -> bool:
    """Whether the server has closed ``sock`` (end of stream or reset), waiting up to
    ``wait`` seconds for it; any answer it wrote first is read and ignored."""
    deadline = time.monotonic() + wait
    while True:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            if sock.recv(65536) == b"":
                return True
        except ConnectionError:
            return True


@contextmanager
def sockets(app: App, count: int) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        yield [stack.enter_context(connect(app)) for _ in range(count)]


@pytest.mark.parametrize(("opening", "then"), [
    (b"", b""),                                   # connects, sends nothing
    (b"GET /healthz HTTP/1.1\r\n", b"X: y\r\n"),  # a head, a line now and then
    (HEAD, b"e"),                                 # a whole head, its body a byte at a time
], ids=["nothing", "head", "body"])
def test_a_request_that_does_not_arrive_in_time_is_closed(settings, caplog, opening: bytes,
                                                           then: bytes) -> None:
    """uvicorn bounds no request's arrival (each byte restarts its keep-alive clock)."""
    server_log = logging.getLogger("uvicorn.error")  # its own: it does not propagate
    with serve_app(settings, limits={"request_seconds": 0.3}) as app, connect(app) as sock:
        server_log.addHandler(caplog.handler)  # once uvicorn has set up its logging
        sock.sendall(opening)
        for _ in range(200):  # 10 s at most: 0.3 s is the bound
            if closed_by_server(sock, 0.05):
                break
            if then:
                sock.sendall(then)
        else:
            pytest.fail("the connection was still open after 10 s")
        assert request("GET", f"{app.url}/healthz").status == 200
    server_log.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.slow
def test_a_kept_alive_connection_idle_beyond_the_request_bound_still_serves(settings) -> None:
    """The bound runs from a request's first byte: a proxy's idle kept-alive connection stays."""
    with serve_app(settings, limits={"request_seconds": 0.2}) as app:
        port = int(app.url.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            for _ in range(2):
                client.request("GET", "/healthz")
                assert client.getresponse().read() == b"ok"
                time.sleep(0.5)  # idle, longer than a request may take to arrive
            client.request("GET", "/healthz")
            assert client.getresponse().status == 200
        finally:
            client.close()


def test_over_the_limit_the_longest_waiting_connections_make_room(settings) -> None:
    """Idle connections must not pile up until none is left for a real request."""
    with serve_app(settings, limits={"connections": 50, "request_seconds": 60}) as app, \
            sockets(app, 300) as idle:
        assert request("GET", f"{app.url}/healthz").status == 200
        assert all(closed_by_server(sock, 5) for sock in idle[:250])
        assert not any(closed_by_server(sock) for sock in idle[-40:])


def test_a_request_in_progress_is_never_pushed_out(settings, caplog) -> None:
    form = b"email=reader%40example.org&layout=zh-en"
    caplog.set_level(logging.WARNING)
    with serve_app(settings, limits={"connections": 10, "request_seconds": 60}) as app, \
            connect(app) as busy:
        busy.sendall(b"POST /subscribe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Origin: http://127.0.0.1:8000\r\nExpect: 100-continue\r\n"
                     b"Content-Type: application/x-www-form-urlencoded\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(form))
        assert busy.recv(100).startswith(b"HTTP/1.1 100 ")  # the app waits for the form
        with sockets(app, 30) as idle:
            assert all(closed_by_server(sock, 5) for sock in idle[:20])
            assert not closed_by_server(busy)
            busy.sendall(form)
            assert busy.recv(65536).startswith(b"HTTP/1.1 200 ")
    assert "over 10 connections; the longest waiting for a request closed" in caplog.text


@pytest.mark.subprocess
@pytest.mark.slow  # a real `newsletter serve`, its files exhausted and given back
def test_refused_accepts_are_counted_not_logged_one_by_one(tmp_path) -> None:
    """Out of file descriptors: a line per interval with a count, not a traceback per accept."""
    port = let_go(free_port())
    (tmp_path / "newsletter.toml").write_text(
        f'[site]\napp_url = "http://127.0.0.1:{port}"\n', encoding="utf-8")

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    command = [*newsletter_cmd(), "serve", "--port", str(port)]
    with serve_process(command, port, cwd=tmp_path, env=clean_env(),
                       preexec_fn=few_files) as served:
        with ExitStack() as stack:
            for _ in range(100):  # the kernel's backlog takes what accept() cannot
                stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=5))
            time.sleep(0.5)  # the server meets the limit
        assert request("GET", f"http://127.0.0.1:{port}/healthz").status == 200
        for _ in range(20):  # uvicorn warns of each: one line now, the rest counted
            with socket.create_connection(("127.0.0.1", port), timeout=5) as garbage:
                garbage.sendall(b"NOT HTTP\r\n\r\n")
                assert garbage.recv(100).startswith(b"HTTP/1.1 400 ")
    err = served.err
    assert served.process.returncode == 0, err
    assert "serve: the open-file limit (64) lets it hold 64 connections, not 10000" in err
    refused = [line for line in err.splitlines() if "cannot accept connections" in line]
    assert refused and refused[0].endswith("Too many open files"), err[-3000:]
    more = [int(m) for m in re.findall(r"cannot accept .*\((\d+) more since the last", err)]
    assert len(refused) == 1 + len(more) and sum(more) < 10, err[-3000:]
    assert "Traceback" not in err and "out of system resource" not in err, err[-6000:]
    assert err.count("Invalid HTTP request received.") == 1, err[-3000:]


def test_a_warning_a_client_causes_at_will_passes_once_per_interval() -> None:
    now = [0.0]
    once = OncePerInterval(interval=10, clock=lambda: now[0])

    def shown(msg: str, level: int = logging.WARNING) -> str | None:
        record = logging.LogRecord("uvicorn.error", level, __file__, 1, msg, None, None)
        return record.getMessage() if once.filter(record) else None

    assert shown("Invalid HTTP request received.") == "Invalid HTTP request received."
    assert [shown("Invalid HTTP request received.") for _ in range(500)] == [None] * 500
    assert shown("Exceeded concurrency limit.") == "Exceeded concurrency limit."
    assert shown("Exception in ASGI application", logging.ERROR) is not None
    now[0] = 10.0
    assert shown("Invalid HTTP request received.") == (
        "Invalid HTTP request received. (500 more since the last one shown)")
