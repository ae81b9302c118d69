"""Read a feed's bytes from a file or an http(s) URL, politely.

URLs are fetched with a conditional GET: the ETag and Last-Modified of the last answer are
kept beside a copy of its body in ``<data_dir>/feeds/``, so an unchanged feed costs a 304.
A 304 with no cached copy (the cache was wiped in between) is answered by fetching in full.
This is the only module that touches the network or the disk for feeds; ``collect`` gets bytes.

Bounds, the same for a URL and a file: at most :data:`MAX_BYTES`, and for a URL at most
:data:`TOTAL_SECONDS` from the first connection to the last byte. The per-read timeout alone
does not bound a server that sends one byte a second forever.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import FeedError
from pipeline.log import safe_url

USER_AGENT = "vllm-pr-weekly/0.1 (+https://github.com/vllm-project/vllm)"
#: Longest wait for any one network operation (connect, one read).
TIMEOUT_SECONDS = 30.0
#: Longest a whole fetch of one URL may take, redirects and a 304 re-fetch included.
TOTAL_SECONDS = 120.0
MAX_BYTES = 20_000_000
_log = logging.getLogger("newsletter.fetch")
_CHUNK = 65_536


@dataclass(frozen=True)
class Fetched:
    """A feed's bytes and the headers that say how to decode them."""

    location: str
    body: bytes
    content_type: str | None = None
    #: True when the server said 304 and the cached copy was used.
    from_cache: bool = False


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def fetch(location: str, cache_dir: Path | None, *, total_seconds: float = TOTAL_SECONDS
          ) -> Fetched:
    """The bytes of the feed at ``location`` (a path or an http(s) URL); a URL must be read
    whole within ``total_seconds``."""
    if is_url(location):
        return _fetch_url(location, cache_dir, total_seconds)
    if "://" in location:
        raise FeedError(location, "only files and http(s) URLs are supported")
    path = Path(location)
    try:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            raise FeedError(location, f"larger than {MAX_BYTES:,} bytes")
        with path.open("rb") as handle:  # read capped: a device or a growing file has no size
            body = handle.read(MAX_BYTES + 1)
        if len(body) > MAX_BYTES:
            raise FeedError(location, f"larger than {MAX_BYTES:,} bytes")
        _log.debug("feed %s: %d bytes read", location, len(body))
        return Fetched(location, body)
    except FileNotFoundError:
        raise FeedError(location, "no such file") from None
    except IsADirectoryError:
        raise FeedError(location, "is a folder, not a feed file") from None
    except OSError as exc:
        raise FeedError(location, f"cannot read: {exc.strerror or exc}") from exc


def _cache_paths(cache_dir: Path, url: str) -> tuple[Path, Path]:
    key = hashlib.sha256(url.encode()).hexdigest()[:32]
    return cache_dir / f"{key}.body", cache_dir / f"{key}.json"


def _fetch_url(url: str, cache_dir: Path | None, total_seconds: float) -> Fetched:
    body_path = meta_path = None
    meta: dict[str, str] = {}
    if cache_dir is not None:
        body_path, meta_path = _cache_paths(cache_dir, url)
        if body_path.is_file() and meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = {}
    headers = {"User-Agent": USER_AGENT, "Accept": "application/atom+xml, application/rss+xml, "
               "application/xml;q=0.9, text/xml;q=0.9, */*;q=0.1"}
    if meta.get("etag"):
        headers["If-None-Match"] = meta["etag"]
    if meta.get("last_modified"):
        headers["If-Modified-Since"] = meta["last_modified"]
    deadline = time.monotonic() + total_seconds
    try:
        status, body, response_headers = _get_within(url, headers, deadline, total_seconds)
        if status == 304:
            cached = _read_cached(body_path) if body_path else None
            if cached is not None:
                _log.debug("feed %s: HTTP 304, the cached copy (%d bytes) used",
                           safe_url(url), len(cached))
                return Fetched(url, cached, meta.get("content_type"), from_cache=True)
            _log.debug("feed %s: HTTP 304 but no cached copy; fetching in full", safe_url(url))
            headers.pop("If-None-Match", None)
            headers.pop("If-Modified-Since", None)
            status, body, response_headers = _get_within(url, headers, deadline, total_seconds)
    except urllib.error.HTTPError as exc:
        raise FeedError(url, f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FeedError(url, f"cannot connect: {exc.reason}") from None
    except TimeoutError:
        raise FeedError(url, f"no answer within {TIMEOUT_SECONDS:.0f} s") from None
    except http.client.HTTPException as exc:  # e.g. the connection closed mid-body
        raise FeedError(url, f"cannot fetch: {type(exc).__name__}") from None
    except OSError as exc:
        raise FeedError(url, f"cannot fetch: {exc}") from None
    if status != 200:
        raise FeedError(url, f"unexpected HTTP {status}")
    content_type = response_headers.get("Content-Type")
    _log.debug("feed %s: HTTP 200, %d bytes", safe_url(url), len(body))
    if cache_dir is not None and body_path and meta_path:
        _store(cache_dir, body_path, meta_path, body, {
            "url": url,
            "etag": response_headers.get("ETag") or "",
            "last_modified": response_headers.get("Last-Modified") or "",
            "content_type": content_type or "",
        })
    return Fetched(url, body, content_type)


def _get_within(url: str, headers: dict[str, str], deadline: float, total_seconds: float
                ) -> tuple[int, bytes, dict[str, str]]:
    """:func:`_get`, given up at ``deadline`` wherever it is (DNS, connect, headers, body).

    The request runs in a daemon thread that the caller stops waiting for: urllib has no way
    to bound a whole exchange, and a thread left reading ends with its own per-read timeout
    or at its next chunk, which checks the deadline too.
    """
    outcome: list[tuple[int, bytes, dict[str, str]] | Exception] = []

    def work() -> None:
        try:
            outcome.append(_get(url, headers, deadline, total_seconds))
        except Exception as exc:  # handed to the caller, who re-raises it
            outcome.append(exc)

    worker = threading.Thread(target=work, name="feed-fetch", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if worker.is_alive() or not outcome:
        raise _too_slow(url, total_seconds)
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


def _too_slow(url: str, total_seconds: float) -> FeedError:
    return FeedError(url, f"not received in full within {total_seconds:g} s (the server "
                          "sends too slowly)")


def _get(url: str, headers: dict[str, str], deadline: float, total_seconds: float
         ) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (scheme checked)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            chunks: list[bytes] = []
            size = 0
            while chunk := response.read1(_CHUNK):
                size += len(chunk)
                if size > MAX_BYTES:
                    raise FeedError(url, f"larger than {MAX_BYTES:,} bytes")
                if time.monotonic() > deadline:
                    raise _too_slow(url, total_seconds)
                chunks.append(chunk)
            return response.status, b"".join(chunks), dict(response.headers.items())
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return 304, b"", dict(exc.headers.items()) if exc.headers else {}
        raise


def _read_cached(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _store(cache_dir: Path, body_path: Path, meta_path: Path, body: bytes,
           meta: dict[str, Any]) -> None:
    """Keep the body and validators; a cache that cannot be written is not an error."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        for path, data in ((body_path, body), (meta_path, json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
    except OSError:
        pass
