"""``issue.json``: the one hand-off between ``build`` and every later stage.

The shape is DESIGN.md's. Identical input gives identical bytes: no wall-clock time, keys in
a fixed order, times in UTC with ``Z``. ``content_hash`` covers the canonical JSON (without
the hash) and every rendered artifact, so an approval pins exactly what the editor proofed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Generic, TypedDict, TypeGuard, TypeVar

from pipeline.model import Issue, Item, Problem, PullFacts, Severity, Skipped, Text
from pipeline.week import iso_z

SCHEMA_VERSION = 1

T = TypeVar("T")


# -- the shape, as TypedDicts: what build writes is what the later stages read ---------------


class PairData(TypedDict, Generic[T]):
    zh: T
    en: T


class TextData(TypedDict):
    title: str
    body_html: str
    body_text: str
    #: ``feed``, ``editor``, ``machine:<model>`` or ``github-title``.
    source: str


class GithubData(TypedDict):
    title: str
    author: str
    state: str
    merged_at: str | None
    additions: int
    deletions: int
    changed_files: int
    labels: list[str]
    tags: list[str]


class ItemData(TypedDict):
    pr: int
    url: str
    tier: str
    scope_note: str | None
    why: PairData[str]
    reviewed_at: str
    areas: list[str]
    reading_minutes: PairData[int]
    note: PairData[str | None] | None
    zh: TextData | None
    en: TextData | None
    github: GithubData | None


class SkippedData(TypedDict):
    id: str
    link: str
    title: str
    reason: str


class ProblemWhere(TypedDict, total=False):
    """The keys a problem has only when it is about one PR or one layout."""

    pr: int
    layout: str


class ProblemData(ProblemWhere):
    code: str
    severity: Severity
    message: str


class WeekData(TypedDict):
    start: str
    end: str
    tz: str


class IssueBody(TypedDict):
    """``issue.json`` without its ``content_hash`` (what the hash covers)."""

    schema_version: int
    id: str
    week: WeekData
    repo: str
    archive_url: str
    subject: dict[str, str]
    preheader: dict[str, str]
    items: list[ItemData]
    skipped: list[SkippedData]
    problems: list[ProblemData]


class IssueData(IssueBody):
    content_hash: str


def _text(text: Text | None) -> TextData | None:
    if text is None:
        return None
    return {"title": text.title, "body_html": text.body_html, "body_text": text.body_text,
            "source": text.source}


def _item(item: Item) -> ItemData:
    return {
        "pr": item.pr,
        "url": item.url,
        "tier": item.tier,
        "scope_note": item.scope_note,
        "why": {"zh": item.why.zh, "en": item.why.en},
        "reviewed_at": iso_z(item.reviewed_at),
        "areas": list(item.areas),
        "reading_minutes": {"zh": item.reading_minutes.zh, "en": item.reading_minutes.en},
        "note": {"zh": item.note.zh, "en": item.note.en} if item.note else None,
        "zh": _text(item.zh),
        "en": _text(item.en) if item.en is not None else _github_headline(item),
        "github": _github(item.github),
    }


def _github_headline(item: Item) -> TextData | None:
    """No English text but a GitHub title: the PR's own title is the English headline
    (DESIGN.md's precedence), marked ``github-title``, with no body. It is a headline, not
    a translation: the item keeps its blocking ``missing-language`` problem."""
    if item.github is None or not item.github.title:
        return None
    return {"title": item.github.title, "body_html": "", "body_text": "",
            "source": "github-title"}


def _github(facts: PullFacts | None) -> GithubData | None:
    if facts is None:
        return None
    return {"title": facts.title, "author": facts.author, "state": facts.state,
            "merged_at": iso_z(facts.merged_at) if facts.merged_at else None,
            "additions": facts.additions, "deletions": facts.deletions,
            "changed_files": facts.changed_files, "labels": list(facts.labels),
            "tags": list(facts.tags)}


def _skipped(entry: Skipped) -> SkippedData:
    return {"id": entry.id, "link": entry.link, "title": entry.title, "reason": entry.reason}


def _problem(problem: Problem) -> ProblemData:
    where: ProblemWhere = {}
    if problem.pr is not None:
        where["pr"] = problem.pr
    if problem.layout is not None:
        where["layout"] = problem.layout
    # DESIGN.md's key order: code, severity, pr and layout when set, message.
    return {"code": problem.code, "severity": problem.severity, **where,
            "message": problem.message}


def to_dict(issue: Issue, artifacts: Mapping[str, bytes]) -> IssueData:
    """The issue as DESIGN.md lays it out, ``content_hash`` included."""
    body: IssueBody = {
        "schema_version": SCHEMA_VERSION,
        "id": issue.id,
        "week": {"start": iso_z(issue.week.start), "end": iso_z(issue.week.end),
                 "tz": issue.week.tz},
        "repo": issue.repo,
        "archive_url": issue.archive_url,
        "subject": dict(issue.subject),
        "preheader": dict(issue.preheader),
        "items": [_item(item) for item in issue.items],
        "skipped": [_skipped(entry) for entry in issue.skipped],
        "problems": [_problem(problem) for problem in issue.problems],
    }
    return {**body, "content_hash": content_hash(body, artifacts)}


def checked(data: object) -> IssueData:
    """``data`` (an issue.json as ``json.loads`` gives it) as :class:`IssueData`, once its
    top level has every key and the week its times; ValueError says what is missing. Read
    from a file or an archive, JSON is anything: a list or a stray object must be said as
    such, not end in a KeyError deep in a template."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {_json_kind(data)}")
    missing = [key for key in IssueData.__annotations__ if key not in data]
    if missing:
        raise ValueError(f"not an issue: no {', '.join(missing)}")
    week = data["week"]
    if not isinstance(week, dict) or not all(
            isinstance(week.get(key), str) for key in WeekData.__annotations__):
        raise ValueError("not an issue: week needs start, end and tz as strings")
    for key in ("start", "end"):
        try:
            datetime.fromisoformat(week[key])
        except ValueError:
            raise ValueError(f"not an issue: week {key} {week[key][:40]!r} is not a date and "
                             "time") from None
    if not _is_issue(data):
        raise ValueError("not an issue: id must be a string, items and problems lists")
    return data


def _is_issue(data: dict[str, Any]) -> TypeGuard[IssueData]:
    """The last of :func:`checked`'s checks: the one that lets the type checker take
    ``data`` as an issue from here on."""
    return (isinstance(data.get("id"), str) and isinstance(data.get("items"), list)
            and isinstance(data.get("problems"), list))


def _json_kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(
        type(value), "a number")


def content_hash(data: Mapping[str, Any], artifacts: Mapping[str, bytes]) -> str:
    """sha256 over the canonical JSON (without the hash) and each artifact, by name."""
    body = {key: value for key, value in data.items() if key != "content_hash"}
    digest = hashlib.sha256(canonical(body))
    for name in sorted(artifacts):
        content = artifacts[name]
        digest.update(b"\0%s\0%d\0" % (name.encode(), len(content)))
        digest.update(content)
    return digest.hexdigest()


def canonical(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def dumps(data: Mapping[str, Any]) -> bytes:
    """The file's bytes: readable, stable, UTF-8 (Chinese kept as is)."""
    return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
