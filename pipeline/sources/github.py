"""The PR's own facts from GitHub's REST API: title, author, state, size, labels, title tags.

Each answer is cached under ``<data_dir>/github/`` with its ETag, and asked for again with
``If-None-Match``: an unchanged PR answers 304, which GitHub does not count against the rate
limit, so a re-run costs no quota. Nothing here can fail a build: a timeout, an error status,
no network or a long rate-limit wait give ``None`` and one ``github-unavailable`` warning per
build, after which the client stops asking for the rest of the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.core.pulls import title_tags
from pipeline.core.sanitize import one_line
from pipeline.model import Problem, PullFacts
from pipeline.sources.feeds import USER_AGENT

#: The longest rate-limit wait worth taking inside a build, in seconds.
MAX_WAIT_SECONDS = 10.0
MAX_BYTES = 5_000_000


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_pull(data: Mapping[str, Any], files: tuple[str, ...] = ()) -> PullFacts:
    """A ``GET /repos/{owner}/{repo}/pulls/{n}`` answer as :class:`PullFacts`."""
    title = one_line(str(data.get("title") or ""))
    merged_at = _parse_time(data.get("merged_at"))
    state = "merged" if merged_at else ("closed" if data.get("state") == "closed" else "open")
    user = data.get("user")
    author = user.get("login") if isinstance(user, Mapping) else None
    labels = tuple(sorted(name for name in (
        one_line(str(label.get("name"))) for label in data.get("labels") or ()
        if isinstance(label, Mapping) and label.get("name")) if name))
    return PullFacts(title=title, author=str(author or ""), state=state,
                     merged_at=merged_at, additions=_int(data.get("additions")),
                     deletions=_int(data.get("deletions")),
                     changed_files=_int(data.get("changed_files")), labels=labels,
                     tags=title_tags(title), files=files)


class _Unavailable(Exception):
    """GitHub cannot be asked now; the message says why."""


class GithubClient:
    """Read PR facts from ``api_url``, politely, with an on-disk cache in ``cache_dir``."""

    def __init__(self, api_url: str, token: str | None, cache_dir: Path | None, *,
                 timeout: float = 10, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token or None
        self.cache_dir = cache_dir
        self.timeout = timeout
        self.sleep = sleep
        self.clock = clock
        #: Why GitHub was given up on for this build, or None while it answers.
        self.unavailable: str | None = None
        self.requests = 0

    def problems(self) -> list[Problem]:
        """One warning when GitHub could not be asked, none otherwise."""
        if self.unavailable is None:
            return []
        return [Problem("github-unavailable", "warning",
                        message=f"PR facts from GitHub left out: {self.unavailable}")]

    def pull(self, repo: str, n: int) -> PullFacts | None:
        data = self._get_json(f"/repos/{repo}/pulls/{n}")
        return parse_pull(data) if isinstance(data, Mapping) else None

    def files(self, repo: str, n: int) -> tuple[str, ...] | None:
        data = self._get_json(f"/repos/{repo}/pulls/{n}/files?per_page=100")
        if not isinstance(data, list):
            return None
        return tuple(str(f["filename"]) for f in data
                     if isinstance(f, Mapping) and f.get("filename"))

    # -- HTTP ---------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": "2022-11-28"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _cache_path(self, url: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"

    def _get_json(self, path: str) -> Any:
        if self.unavailable is not None:
            return None
        url = self.api_url + path
        cache_path = self._cache_path(url)
        cached = _read_cache(cache_path)
        try:
            return self._ask(url, cached, cache_path)
        except _Unavailable as exc:
            self.unavailable = str(exc)
            return None

    def _ask(self, url: str, cached: dict[str, Any] | None, cache_path: Path | None) -> Any:
        for _ in range(2):  # at most one short rate-limit wait
            headers = self._headers()
            if cached and cached.get("etag"):
                headers["If-None-Match"] = cached["etag"]
            status, body, answer = self._send(url, headers)
            if status == 304 and cached is not None:
                return cached.get("data")
            if status == 200:
                try:
                    data = json.loads(body)
                except ValueError:
                    raise _Unavailable(f"{url} answered with something that is not JSON") from None
                _write_cache(cache_path, {"url": url, "etag": answer.get("etag") or "",
                                          "data": data})
                return data
            if status in (403, 429):
                wait = self._rate_limit_wait(answer)
                if wait is None:
                    raise _Unavailable(f"{url} answered HTTP {status}")
                if wait > MAX_WAIT_SECONDS:
                    raise _Unavailable(f"rate limited for {wait:.0f} s more (HTTP {status})")
                self.sleep(max(wait, 0.0))
                continue
            if status == 404:
                return None  # no such PR: nothing to show, and GitHub itself is fine
            raise _Unavailable(f"{url} answered HTTP {status}")
        raise _Unavailable(f"{url} is still rate limited after waiting")

    def _rate_limit_wait(self, answer: Mapping[str, str]) -> float | None:
        retry_after = answer.get("retry-after")
        if retry_after:
            try:
                return float(retry_after)
            except ValueError:
                return None
        if answer.get("x-ratelimit-remaining") == "0" and answer.get("x-ratelimit-reset"):
            try:
                return float(answer["x-ratelimit-reset"]) - self.clock()
            except ValueError:
                return None
        return None

    def _send(self, url: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        self.requests += 1
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 (configured URL)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                body = response.read(MAX_BYTES + 1)
                if len(body) > MAX_BYTES:
                    raise _Unavailable(f"{url} answered more than {MAX_BYTES:,} bytes")
                return response.status, body, _lower(response.headers.items())
        except urllib.error.HTTPError as exc:
            return exc.code, b"", _lower(exc.headers.items() if exc.headers else ())
        except urllib.error.URLError as exc:
            raise _Unavailable(f"cannot connect to {self.api_url}: {exc.reason}") from None
        except TimeoutError:
            raise _Unavailable(f"no answer from {self.api_url} within {self.timeout:g} s") from None
        except OSError as exc:
            raise _Unavailable(f"cannot reach {self.api_url}: {exc}") from None


def _lower(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {key.lower(): value for key, value in items}


def _read_cache(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "data" in data else None


def _write_cache(path: Path | None, entry: dict[str, Any]) -> None:
    """Keep the answer and its ETag; a cache that cannot be written is not an error."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entry, handle, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError:
        pass
