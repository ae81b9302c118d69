"""Read a feed's bytes from a file or an http(s) URL, politely.

URLs are fetched with a conditional GET: the ETag and Last-Modified of the last answer are
kept beside a copy of its body in ``<data_dir>/feeds/``, so an unchanged feed costs a 304.
A 304 with no cached copy (the cache was wiped in between) is answered by fetching in full.
This is the only module that touches the network or the disk for feeds; ``collect`` gets bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import FeedError

USER_AGENT = "vllm-pr-weekly/0.1 (+https://github.com/vllm-project/vllm)"
TIMEOUT_SECONDS = 30.0
MAX_BYTES = 20_000_000


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


def fetch(location: str, cache_dir: Path | None) -> Fetched:
    """The bytes of the feed at ``location`` (a path or an http(s) URL)."""
    if is_url(location):
        return _fetch_url(location, cache_dir)
    if "://" in location:
        raise FeedError(location, "only files and http(s) URLs are supported")
    path = Path(location)
    try:
        return Fetched(location, path.read_bytes())
    except FileNotFoundError:
        raise FeedError(location, "no such file") from None
    except IsADirectoryError:
        raise FeedError(location, "is a folder, not a feed file") from None
    except OSError as exc:
        raise FeedError(location, f"cannot read: {exc.strerror or exc}") from exc


def _cache_paths(cache_dir: Path, url: str) -> tuple[Path, Path]:
    key = hashlib.sha256(url.encode()).hexdigest()[:32]
    return cache_dir / f"{key}.body", cache_dir / f"{key}.json"


def _fetch_url(url: str, cache_dir: Path | None) -> Fetched:
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
    try:
        status, body, response_headers = _get(url, headers)
        if status == 304:
            cached = _read_cached(body_path) if body_path else None
            if cached is not None:
                return Fetched(url, cached, meta.get("content_type"), from_cache=True)
            headers.pop("If-None-Match", None)
            headers.pop("If-Modified-Since", None)
            status, body, response_headers = _get(url, headers)
    except urllib.error.HTTPError as exc:
        raise FeedError(url, f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FeedError(url, f"cannot connect: {exc.reason}") from None
    except TimeoutError:
        raise FeedError(url, f"no answer within {TIMEOUT_SECONDS:.0f} s") from None
    except OSError as exc:
        raise FeedError(url, f"cannot fetch: {exc}") from None
    if status != 200:
        raise FeedError(url, f"unexpected HTTP {status}")
    content_type = response_headers.get("Content-Type")
    if cache_dir is not None and body_path and meta_path:
        _store(cache_dir, body_path, meta_path, body, {
            "url": url,
            "etag": response_headers.get("ETag") or "",
            "last_modified": response_headers.get("Last-Modified") or "",
            "content_type": content_type or "",
        })
    return Fetched(url, body, content_type)


def _get(url: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (scheme checked)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            body = response.read(MAX_BYTES + 1)
            if len(body) > MAX_BYTES:
                raise FeedError(url, f"larger than {MAX_BYTES:,} bytes")
            return response.status, body, dict(response.headers.items())
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return 304, b"", dict(exc.headers.items()) if exc.headers else {}
        raise


def _read_cached(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _store(cache_dir: Path, body_path: Path, meta_path: Path, body: bytes, meta: dict) -> None:
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
