"""``issue.json``: the one hand-off between ``build`` and every later stage.

The shape is DESIGN.md's. Identical input gives identical bytes: no wall-clock time, keys in
a fixed order, times in UTC with ``Z``. ``content_hash`` covers the canonical JSON (without
the hash) and every rendered artifact, so an approval pins exactly what the editor proofed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .github import PullFacts
from .model import LANGS, Issue, Item, Problem, Skipped, Text
from .week import iso_z

SCHEMA_VERSION = 1


def _text(text: Text | None) -> dict[str, Any] | None:
    if text is None:
        return None
    return {"title": text.title, "body_html": text.body_html, "body_text": text.body_text,
            "source": text.source}


def _item(item: Item) -> dict[str, Any]:
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
        **{lang: _text(item.text(lang)) for lang in LANGS},
        "github": _github(item.github),
    } | _github_headline(item)


def _github_headline(item: Item) -> dict[str, Any]:
    """No English text but a GitHub title: the PR's own title is the English headline
    (DESIGN.md's precedence), marked ``github-title``, with no body. It is a headline, not
    a translation: the item keeps its blocking ``missing-language`` problem."""
    if item.en is not None or item.github is None or not item.github.title:
        return {}
    return {"en": {"title": item.github.title, "body_html": "", "body_text": "",
                   "source": "github-title"}}


def _github(facts: PullFacts | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    return {"title": facts.title, "author": facts.author, "state": facts.state,
            "merged_at": iso_z(facts.merged_at) if facts.merged_at else None,
            "additions": facts.additions, "deletions": facts.deletions,
            "changed_files": facts.changed_files, "labels": list(facts.labels),
            "tags": list(facts.tags)}


def _skipped(entry: Skipped) -> dict[str, Any]:
    return {"id": entry.id, "link": entry.link, "title": entry.title, "reason": entry.reason}


def _problem(problem: Problem) -> dict[str, Any]:
    data: dict[str, Any] = {"code": problem.code, "severity": problem.severity}
    if problem.pr is not None:
        data["pr"] = problem.pr
    if problem.layout is not None:
        data["layout"] = problem.layout
    data["message"] = problem.message
    return data


def to_dict(issue: Issue, artifacts: Mapping[str, bytes]) -> dict[str, Any]:
    """The issue as DESIGN.md lays it out, ``content_hash`` included."""
    data: dict[str, Any] = {
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
    data["content_hash"] = content_hash(data, artifacts)
    return data


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
