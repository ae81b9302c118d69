"""The weekly job's HTTP client: a GET or a JSON POST, bounded, and a conditional-GET cache.

Every exchange bounds each read, the bytes read and optionally the whole exchange (a server
that sends one byte a second forever). An answer of any status is a :class:`Response`; only a
failure to get a complete one raises :class:`HttpError`. A cache that cannot be read or
written is no error. urllib underneath; nothing of it leaks out.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.client
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from email.message import Message
from pathlib import Path
from typing import Literal

from pipeline.output import write_file

__all__ = ["ConditionalCache", "HttpError", "Response", "get_cached", "post_json", "request",
           "retry_after"]

#: How many bytes of an error answer are kept (enough for the message in it).
ERROR_BODY_BYTES = 65_536
_CHUNK = 65_536

Kind = Literal["unreachable", "timeout", "broken", "too large", "too slow"]


@dataclass(frozen=True)
class Response:
    """An answer: its status, its body and its headers (names in lower case)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The status line's reason ("Not Found").
    reason: str = ""
    #: True when the server said 304 and the cached copy is the body.
    from_cache: bool = False


class HttpError(Exception):
    """No complete answer came; the low-level error is the cause. ``limit`` is the bound
    (bytes or seconds) that was exceeded."""

    def __init__(self, url: str, kind: Kind, *, reason: object = None,
                 limit: float | None = None) -> None:
        super().__init__(f"{url}: {kind}" + (f": {reason}" if reason is not None else ""))
        self.url = url
        self.kind = kind
        self.reason = reason
        self.limit = limit

    @property
    def transient(self) -> bool:
        """Whether trying again may help (not for a name that does not resolve)."""
        if self.kind == "unreachable":
            return isinstance(self.reason, TimeoutError | ConnectionError)
        if self.kind == "broken":
            return isinstance(self.reason, ConnectionError | http.client.HTTPException)
        return self.kind == "timeout"


def request(url: str, headers: Mapping[str, str], *, data: bytes | None = None,
            timeout: float, max_bytes: int, total_seconds: float | None = None) -> Response:
    """One exchange (a GET, or a POST of ``data``), bounded; :class:`HttpError` else.

    ``total_seconds`` runs the exchange in a daemon thread the caller stops waiting for:
    urllib cannot bound a whole exchange, and a thread left reading ends at its next chunk.
    """
    return _within(url, headers, data, timeout, max_bytes, _deadline(total_seconds))


def _deadline(total_seconds: float | None) -> tuple[float, float] | None:
    """When an exchange must be over (monotonic clock), and the bound it came from."""
    return None if total_seconds is None else (time.monotonic() + total_seconds, total_seconds)


def _within(url: str, headers: Mapping[str, str], data: bytes | None, timeout: float,
            max_bytes: int, deadline: tuple[float, float] | None) -> Response:
    if deadline is None:
        return _exchange(url, headers, data, timeout, max_bytes, None)
    end, limit = deadline
    if time.monotonic() >= end:
        raise HttpError(url, "too slow", limit=limit)
    outcome: list[Response | BaseException] = []

    def work() -> None:
        try:
            outcome.append(_exchange(url, headers, data, timeout, max_bytes, deadline))
        except Exception as exc:  # handed to the caller, who re-raises it
            outcome.append(exc)

    worker = threading.Thread(target=work, name="http-request", daemon=True)
    worker.start()
    worker.join(max(end - time.monotonic(), 0.0))
    if worker.is_alive() or not outcome:
        raise HttpError(url, "too slow", limit=limit)
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def post_json(url: str, body: bytes, headers: Mapping[str, str], *, timeout: float,
              max_bytes: int) -> Response:
    return request(url, {"Content-Type": "application/json; charset=utf-8",
                         "Accept": "application/json", **headers},
                   data=body, timeout=timeout, max_bytes=max_bytes)


def _exchange(url: str, headers: Mapping[str, str], data: bytes | None, timeout: float,
              max_bytes: int, deadline: tuple[float, float] | None) -> Response:
    # Callers pass configured http(s) URLs only; urllib POSTs when there is data.
    req = urllib.request.Request(url, data=data, headers=dict(headers))  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:  # noqa: S310
            body = _read(answer, url, max_bytes, deadline)
            return Response(answer.status, body, _lower(answer.headers), str(answer.reason or ""))
    except urllib.error.HTTPError as exc:
        return Response(exc.code, _error_body(exc), _lower(exc.headers), str(exc.reason or ""))
    except urllib.error.URLError as exc:
        raise HttpError(url, "unreachable", reason=exc.reason) from exc
    except TimeoutError as exc:
        raise HttpError(url, "timeout", reason=exc, limit=timeout) from exc
    except (http.client.HTTPException, OSError) as exc:  # e.g. closed mid-body
        raise HttpError(url, "broken", reason=exc) from exc


def _read(answer: http.client.HTTPResponse, url: str, max_bytes: int,
          deadline: tuple[float, float] | None) -> bytes:
    body = bytearray()
    while chunk := answer.read1(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            raise HttpError(url, "too large", limit=max_bytes)
        if deadline is not None and time.monotonic() > deadline[0]:
            raise HttpError(url, "too slow", limit=deadline[1])
    return bytes(body)


def _error_body(exc: urllib.error.HTTPError) -> bytes:
    """The start of an error answer's body: it may explain the error."""
    try:
        return exc.read(ERROR_BODY_BYTES)  # urllib gives an answer without a body an empty one
    except (OSError, http.client.HTTPException):
        return b""
    finally:
        exc.close()


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date
    (RFC 9110, 10.2.3); None when there is none or it says neither."""
    value = (value or "").strip()
    with contextlib.suppress(ValueError):
        seconds = float(value)
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # "" too
        return None
    return max(0.0, (when - now).total_seconds()) if when.tzinfo else None


def _lower(headers: Message | None) -> dict[str, str]:
    return {key.lower(): value for key, value in (headers.items() if headers else ())}


#: What the cache keeps beside a body: each name it is kept under, and its header.
_KEPT = {"etag": "etag", "last_modified": "last-modified", "content_type": "content-type"}


@dataclass(frozen=True)
class ConditionalCache:
    """Answers kept in ``folder``: the body beside its validators, named by a hash of the URL."""

    folder: Path

    def _paths(self, url: str) -> tuple[Path, Path]:
        key = hashlib.sha256(url.encode()).hexdigest()[:32]
        return self.folder / f"{key}.body", self.folder / f"{key}.json"

    def validators(self, url: str) -> dict[str, str]:
        """The kept answer's etag, last_modified and content_type; {} if none is usable."""
        body_path, meta_path = self._paths(url)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not body_path.is_file() or not isinstance(meta, dict):
            return {}
        return {name: str(meta.get(name) or "") for name in _KEPT}

    def body(self, url: str) -> bytes | None:
        try:
            return self._paths(url)[0].read_bytes()
        except OSError:
            return None

    def put(self, url: str, response: Response) -> None:
        body_path, meta_path = self._paths(url)
        meta = {"url": url} | {name: response.headers.get(header) or ""
                               for name, header in _KEPT.items()}
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            write_file(body_path, response.body)
            write_file(meta_path, json.dumps(meta).encode())


def get_cached(url: str, headers: Mapping[str, str], cache: ConditionalCache | None, *,
               timeout: float, max_bytes: int, total_seconds: float | None = None
               ) -> Response:
    """GET ``url`` conditionally on what ``cache`` keeps: a 304 comes back as the kept body
    with status 200 and ``from_cache``."""
    deadline = _deadline(total_seconds)  # one for both requests
    kept = cache.validators(url) if cache is not None else {}
    asked = dict(headers)
    if kept.get("etag"):
        asked["If-None-Match"] = kept["etag"]
    if kept.get("last_modified"):
        asked["If-Modified-Since"] = kept["last_modified"]
    response = _within(url, asked, None, timeout, max_bytes, deadline)
    if response.status == 304 and cache is not None and kept:
        if (body := cache.body(url)) is not None:
            return Response(200, body, {header: kept[name] for name, header in _KEPT.items()},
                            "Not Modified", from_cache=True)
        # Validators sent, but the copy is gone: ask in full.
        response = _within(url, headers, None, timeout, max_bytes, deadline)
    if response.status == 200 and cache is not None:
        cache.put(url, response)
    return response
