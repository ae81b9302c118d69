"""A scripted HTTP server on loopback for the client tests (feeds, GitHub, the LLM backend):
the test's ``answer`` says what each request gets, and the server keeps every request and
reply, each before the reply goes out, so a test never sees an answer it has no record of.

conftest.py registers this module as a plugin: the ``serve_http`` fixture starts servers and
stops them at the test's end.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    #: Header names lower-cased.
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    #: Sent as given, then Content-Length (none for a 304).
    headers: Mapping[str, str] = field(default_factory=dict)


#: What a request gets: a reply, or raw bytes written (and flushed) one chunk at a time, for a
#: server that misbehaves below HTTP.
Answer = Callable[[Request], Reply | Iterable[bytes]]


class HttpServer:
    """Serves ``answer`` (which a test may swap) on 127.0.0.1 from a thread."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[Request] = []
        self.replies: list[Reply] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.005,),
                                        daemon=True)
        self._thread.start()

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler(server: HttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = Request(self.command, self.path,
                              {name.lower(): value for name, value in self.headers.items()},
                              self.rfile.read(length))
            server.requests.append(request)
            reply = server.answer(request)
            if not isinstance(reply, Reply):
                self._write_raw(reply)
                return
            server.replies.append(reply)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.status != 304:
                self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def _write_raw(self, chunks: Iterable[bytes]) -> None:
            self.close_connection = True
            for chunk in chunks:
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except OSError:  # the client hung up
                    return

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def serve_http(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Answer], HttpServer]]:
    """Start a server per call (no proxy in between); all stop when the test ends."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    started: list[HttpServer] = []

    def serve(answer: Answer) -> HttpServer:
        started.append(HttpServer(answer))
        return started[-1]

    yield serve
    for server in started:
        server.close()
