"""Read a feed's bytes from a file or an http(s) URL, politely.

URLs are fetched with a conditional GET whose cache lives in ``<data_dir>/feeds/``, so an
unchanged feed costs a 304. Bounds, the same for a URL and a file: at most
:data:`MAX_BYTES`, and for a URL at most :data:`TOTAL_SECONDS` in all, since a per-read
timeout does not bound a server that sends one byte a second forever.
"""

from __future__ import annotations

import http.client
import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import FeedError
from pipeline.http import ConditionalCache, HttpError, get_cached
from pipeline.log import safe_url

USER_AGENT = "vllm-pr-weekly/0.1 (+https://github.com/vllm-project/vllm)"
#: Longest wait for any one network operation (connect, one read).
TIMEOUT_SECONDS = 30.0
#: Longest a whole fetch of one URL may take, redirects and a 304 re-fetch included.
TOTAL_SECONDS = 120.0
MAX_BYTES = 20_000_000
_log = logging.getLogger("newsletter.fetch")


@dataclass(frozen=True)
class Fetched:
    """A feed's bytes and the headers that say how to decode them."""

    location: str
    body: bytes
    content_type: str | None = None
    #: True when the server said 304 and the cached copy was used.
    from_cache: bool = False


def fetch(location: str, cache_dir: Path | None, *, total_seconds: float = TOTAL_SECONDS
          ) -> Fetched:
    """The bytes of the feed at ``location`` (a path or an http(s) URL); a URL must be read
    whole within ``total_seconds``."""
    if location.startswith(("http://", "https://")):
        return _fetch_url(location, cache_dir, total_seconds)
    if "://" in location:
        raise FeedError(location, "only files and http(s) URLs are supported")
    try:
        with Path(location).open("rb") as handle:  # capped: a device or a growing file has no size
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


def _fetch_url(url: str, cache_dir: Path | None, total_seconds: float) -> Fetched:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/atom+xml, application/rss+xml, "
               "application/xml;q=0.9, text/xml;q=0.9, */*;q=0.1"}
    cache = ConditionalCache(cache_dir) if cache_dir is not None else None
    try:
        response = get_cached(url, headers, cache, timeout=TIMEOUT_SECONDS,
                              max_bytes=MAX_BYTES, total_seconds=total_seconds)
    except HttpError as exc:
        raise FeedError(url, _failure(exc)) from None
    if response.status >= 300:
        raise FeedError(url, f"HTTP {response.status} {response.reason}")
    if response.status != 200:
        raise FeedError(url, f"unexpected HTTP {response.status}")
    how = "HTTP 304, the cached copy of" if response.from_cache else "HTTP 200,"
    _log.debug("feed %s: %s %d bytes", safe_url(url), how, len(response.body))
    return Fetched(url, response.body, response.headers.get("content-type"),
                   from_cache=response.from_cache)


def _failure(exc: HttpError) -> str:
    """Why a feed could not be fetched, in the feed's terms."""
    if exc.kind == "unreachable":
        return f"cannot connect: {exc.reason}"
    if exc.kind == "timeout":
        return f"no answer within {TIMEOUT_SECONDS:.0f} s"
    if exc.kind == "too large":
        return f"larger than {MAX_BYTES:,} bytes"
    if exc.kind == "too slow":
        return f"not received in full within {exc.limit:g} s (the server sends too slowly)"
    if isinstance(exc.reason, http.client.HTTPException):  # e.g. the connection closed mid-body
        return f"cannot fetch: {type(exc.reason).__name__}"
    return f"cannot fetch: {exc.reason}"
