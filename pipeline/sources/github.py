"""The PR's own facts from GitHub's REST API: title, author, state, size, labels, title tags.

Each answer is cached with its ETag, so an unchanged PR answers 304, which GitHub does not
count against the rate limit. Nothing here can fail a build: any failure gives ``None`` and
one ``github-unavailable`` warning, after which the client stops asking for this build. A
short rate limit is waited out once, only as long as GitHub says.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline import retry
from pipeline.core.issue.pulls import title_tags
from pipeline.core.issue.sanitize import one_line
from pipeline.http import ConditionalCache, HttpError, get_cached, retry_after
from pipeline.model import Problem, PullFacts
from pipeline.sources.feeds import USER_AGENT

#: The longest rate-limit wait worth taking inside a build, in seconds.
MAX_WAIT_SECONDS = 10.0
MAX_BYTES = 5_000_000


def _parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_pull(data: Mapping[str, Any]) -> PullFacts:
    """A ``GET /repos/{owner}/{repo}/pulls/{n}`` answer as :class:`PullFacts`."""
    title = one_line(str(data.get("title") or ""))
    merged_at = _parse_time(data.get("merged_at"))
    state = "merged" if merged_at else ("closed" if data.get("state") == "closed" else "open")
    user = data.get("user")
    author = user.get("login") if isinstance(user, Mapping) else None
    labels = tuple(sorted(
        name for label in data.get("labels") or () if isinstance(label, Mapping)
        if (name := one_line(str(label.get("name") or "")))))
    return PullFacts(title=title, author=str(author or ""), state=state,
                     merged_at=merged_at, additions=_int(data.get("additions")),
                     deletions=_int(data.get("deletions")),
                     changed_files=_int(data.get("changed_files")), labels=labels,
                     tags=title_tags(title))


class _Unavailable(Exception):
    """GitHub cannot be asked now; the message says why."""


class _RateLimited(Exception):
    """HTTP 403 or 429: GitHub's rate limit, perhaps with how long to wait."""

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.headers = headers


class GithubClient:
    """Read PR facts from ``api_url``, politely, with an on-disk cache in ``cache_dir``."""

    def __init__(self, api_url: str, token: str | None, cache_dir: Path | None, *,
                 timeout: float = 10, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.api_url = api_url.rstrip("/")
        self.headers = {"User-Agent": USER_AGENT, "Accept": "application/vnd.github+json",
                        "X-GitHub-Api-Version": "2022-11-28"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.cache = ConditionalCache(cache_dir) if cache_dir is not None else None
        self.timeout = timeout
        self.sleep = sleep
        self.clock = clock
        #: Why GitHub was given up on for this build, or None while it answers.
        self.unavailable: str | None = None

    def problems(self) -> list[Problem]:
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

    def _get_json(self, path: str) -> Any:
        """The JSON at ``path`` (None for 404), waiting out at most one short rate limit;
        None from the first failure on."""
        if self.unavailable is not None:
            return None
        url = self.api_url + path
        try:
            return retry.call(lambda: self._answer(url), retry_on=_RateLimited, attempts=2,
                              wait=lambda _, limited: self._rate_limit_wait(limited.headers),
                              max_wait=MAX_WAIT_SECONDS, sleep=self.sleep)
        except retry.GaveUp as exc:
            if exc.why == "too long":
                self.unavailable = f"rate limited for {exc.wait:.0f} s more ({exc.last})"
            elif exc.why == "no wait":
                self.unavailable = f"{url} answered {exc.last}"
            else:
                self.unavailable = f"{url} is still rate limited after waiting"
        except _Unavailable as exc:
            self.unavailable = str(exc)
        return None

    def _answer(self, url: str) -> Any:
        try:
            response = get_cached(url, self.headers, self.cache, timeout=self.timeout,
                                  max_bytes=MAX_BYTES)
        except HttpError as exc:
            raise _Unavailable(self._failure(url, exc)) from None
        if response.status == 200:
            try:
                return json.loads(response.body)
            except ValueError:
                raise _Unavailable(f"{url} answered with something that is not JSON") from None
        if response.status in (403, 429):
            raise _RateLimited(response.status, response.headers)
        if response.status == 404:
            return None  # no such PR: nothing to show, and GitHub itself is fine
        raise _Unavailable(f"{url} answered HTTP {response.status}")

    def _rate_limit_wait(self, answer: Mapping[str, str]) -> float | None:
        if answer.get("retry-after"):
            return retry_after(answer["retry-after"], datetime.fromtimestamp(self.clock(), UTC))
        if answer.get("x-ratelimit-remaining") == "0":
            with contextlib.suppress(KeyError, ValueError):
                return float(answer["x-ratelimit-reset"]) - self.clock()
        return None

    def _failure(self, url: str, exc: HttpError) -> str:
        """Why GitHub could not be asked, for the build's one warning."""
        if exc.kind == "unreachable":
            return f"cannot connect to {self.api_url}: {exc.reason}"
        if exc.kind == "timeout":
            return f"no answer from {self.api_url} within {self.timeout:g} s"
        if exc.kind == "too large":
            return f"{url} answered more than {MAX_BYTES:,} bytes"
        return f"cannot reach {self.api_url}: {exc.reason}"
