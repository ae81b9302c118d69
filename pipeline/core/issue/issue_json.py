"""``issue.json``: the one hand-off between ``build`` and every later stage.

The shape is docs/architecture.md's. Identical input gives identical bytes (no wall-clock
time, keys in a fixed order, UTC times with ``Z``), and reading back then writing again gives
the same bytes. ``content_hash`` covers the canonical JSON and every rendered artifact, so an
approval pins exactly what the editor proofed. :func:`from_dict` reads the file into the
records of ``pipeline.model``: a missing key or a wrong type is one clear ValueError here,
not a KeyError in a template.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, NotRequired, TypedDict, TypeGuard, TypeVar

from pipeline.core.issue.interests import Variant, issue_areas
from pipeline.model import (
    LANGS,
    LAYOUTS,
    Correction,
    Issue,
    Item,
    Pair,
    Problem,
    PullFacts,
    Severity,
    Skipped,
    Text,
    Week,
)
from pipeline.week import iso_z

SCHEMA_VERSION = 1

T = TypeVar("T")


# -- the shape: what build writes is what the later stages read ------------------------------


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


class VariantData(TypedDict):
    """One interest variant the build rendered (``email-<key>.html`` / ``.txt``)."""

    key: str
    layout: str
    #: The areas it puts first: sorted, each one an area of the issue's items.
    areas: list[str]
    #: PRs shown as a title and a link only, to fit the budget.
    brief: list[int]
    #: How many PRs are left to the archive's "N more" link.
    folded: int


class CorrectionData(TypedDict):
    on: str
    reason: str


class IssueBody(TypedDict):
    """``issue.json`` without its ``content_hash`` (what the hash covers)."""

    schema_version: int
    id: str
    week: WeekData
    repo: str
    archive_url: str
    number: int
    subject: dict[str, str]
    preheader: dict[str, str]
    items: list[ItemData]
    skipped: list[SkippedData]
    problems: list[ProblemData]
    #: Written only when the build rendered interest variants: an issue without them keeps
    #: the bytes (and the hash) it had before variants existed.
    variants: NotRequired[list[VariantData]]
    #: The PRs the editor's file hid, written only when it hid any (as ``variants``).
    hidden: NotRequired[list[int]]
    #: Written only on a correction of an issue already sent (``build --correct``).
    correction: NotRequired[CorrectionData]


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
    """No English text but a GitHub title: the PR's title is the English headline, marked
    ``github-title``; a headline, not a translation (``missing-language`` stays)."""
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


def _problem(problem: Problem) -> ProblemData:
    where: ProblemWhere = {}
    if problem.pr is not None:
        where["pr"] = problem.pr
    if problem.layout is not None:
        where["layout"] = problem.layout
    # The key order readers rely on: code, severity, pr and layout when set, message.
    return {"code": problem.code, "severity": problem.severity, **where,
            "message": problem.message}


def to_dict(issue: Issue, artifacts: Mapping[str, bytes],
            variants: Sequence[VariantData] = ()) -> IssueData:
    """The issue as docs/architecture.md lays it out, ``content_hash`` included."""
    body = _body(issue, variants)
    return {**body, "content_hash": content_hash(body, artifacts)}


def with_hash(issue: Issue, known_hash: str,
              variants: Sequence[VariantData] = ()) -> IssueData:
    """:func:`to_dict` with a hash already known: an issue read back, its artifacts checked."""
    return {**_body(issue, variants), "content_hash": known_hash}


def variant_data(variant: Variant, brief: Sequence[int] = (), folded: int = 0) -> VariantData:
    """How ``issue.json`` lists one rendered interest variant."""
    return {"key": variant.key, "layout": variant.layout, "areas": list(variant.areas),
            "brief": list(brief), "folded": folded}


def _body(issue: Issue, variants: Sequence[VariantData] = ()) -> IssueBody:
    body: IssueBody = {
        "schema_version": SCHEMA_VERSION,
        "id": issue.id,
        "week": {"start": iso_z(issue.week.start), "end": iso_z(issue.week.end),
                 "tz": issue.week.tz},
        "repo": issue.repo,
        "archive_url": issue.archive_url,
        "number": issue.number,
        "subject": dict(issue.subject),
        "preheader": dict(issue.preheader),
        "items": [_item(item) for item in issue.items],
        "skipped": [{"id": s.id, "link": s.link, "title": s.title, "reason": s.reason}
                    for s in issue.skipped],
        "problems": [_problem(problem) for problem in issue.problems],
    }
    if variants:
        body["variants"] = list(variants)
    if issue.hidden:
        body["hidden"] = list(issue.hidden)
    if issue.correction is not None:
        body["correction"] = {"on": issue.correction.on, "reason": issue.correction.reason}
    return body


#: Top-level keys an issue.json written before they existed lacks (read as their default).
_ADDED_LATER = frozenset({"number", "variants", "hidden", "correction"})


def checked(data: object) -> IssueData:
    """``data`` (as ``json.loads`` gives it) as :class:`IssueData`, once its top level has
    every key and the week its times; ValueError says what is missing or what it is instead."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {_json_kind(data)}")
    missing = [key for key in IssueData.__annotations__
               if key not in data and key not in _ADDED_LATER]
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
    """The check that lets the type checker take ``data`` as an issue."""
    return (isinstance(data.get("id"), str) and isinstance(data.get("items"), list)
            and isinstance(data.get("problems"), list))


def from_dict(data: object) -> Issue:
    """``data`` (as ``json.loads`` gives it) as the :class:`Issue` it was written from;
    ValueError, in one line, for another schema version or a key missing or of the wrong type,
    saying where (``items[2].why.en``). A key that may be null may also be absent (a file
    written before it existed); what ``build`` keeps only while it works (an item's
    ``original_lang`` and ``scopes``, a PR's ``files``) comes back as the defaults."""
    if isinstance(data, dict) and data.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"not an issue this version reads: schema_version "
                         f"{str(data['schema_version'])[:20]}, expected {SCHEMA_VERSION}")
    top = _Fields(checked(data), "")
    week = top.object("week")
    issue_id = top.string("id")
    return Issue(
        id=issue_id,
        week=Week(issue_id, week.time("start"), week.time("end"), week.string("tz")),
        repo=top.string("repo"),
        items=tuple(_read_item(item) for item in top.objects("items")),
        subject=top.strings_by_key("subject"),
        preheader=top.strings_by_key("preheader"),
        skipped=tuple(Skipped(s.string("id"), s.string("link"), s.string("title"),
                              s.string("reason")) for s in top.objects("skipped")),
        problems=tuple(_read_problem(p) for p in top.objects("problems")),
        archive_url=top.string("archive_url"),
        number=top.optional_integer("number") or 0,
        hidden=top.integers("hidden"),
        correction=_read_correction(top.optional_object("correction")),
    )


def _read_correction(fields: _Fields | None) -> Correction | None:
    return Correction(fields.string("on"), fields.string("reason")) if fields else None


#: What a variant's key may be: it becomes a file name (``email-<key>.html``), so nothing else.
_VARIANT_KEY = re.compile(r"(?:zh-en|en-zh|zh|en)(?:\.[0-9a-f]{10})?")


@dataclass(frozen=True)
class BuiltVariant:
    """One interest variant as a built issue lists it."""

    variant: Variant
    #: PRs shown as a title and a link only, to fit the budget.
    brief: tuple[int, ...] = ()
    #: How many PRs are left to the archive's "N more" link.
    folded: int = 0

    @property
    def key(self) -> str:
        return self.variant.key

    def data(self) -> VariantData:
        return variant_data(self.variant, self.brief, self.folded)


def read_variants(data: object, issue: Issue) -> tuple[BuiltVariant, ...]:
    """The interest variants ``data`` lists for ``issue``. A key becomes a file name, so it
    is taken only when :class:`Variant` would write it for its layout and areas (no ``../x``),
    the areas are the issue's own, sorted and distinct, and no key repeats; else ValueError."""
    if not isinstance(data, dict) or data.get("variants") is None:
        return ()
    known = set(issue_areas(issue.items))
    prs = {item.pr for item in issue.items}
    found = [_read_variant(entry, known, prs) for entry in _Fields(data, "").objects("variants")]
    keys = [v.key for v in found]
    if len(set(keys)) != len(keys):
        raise ValueError("not an issue: variants lists a key twice")
    return tuple(found)


def variant_keys(data: object) -> tuple[str, ...]:
    """The variant keys ``data`` lists, each checked before it names a file (the artifacts
    are read, and hashed, before the rest of the file); ValueError otherwise."""
    entries = data.get("variants") if isinstance(data, dict) else None
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise ValueError("not an issue: variants must be a list")
    keys = []
    for n, entry in enumerate(entries):
        key = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(key, str) or not _VARIANT_KEY.fullmatch(key):
            raise ValueError(f"not an issue: variants[{n}].key {str(key)[:40]!r} is not a "
                             "variant key")
        keys.append(key)
    return tuple(keys)


def _read_variant(entry: _Fields, known: set[str], prs: set[int]) -> BuiltVariant:
    key, layout, areas = entry.string("key"), entry.string("layout"), entry.strings("areas")
    if not _VARIANT_KEY.fullmatch(key):
        raise ValueError(f"not an issue: {entry.where}.key {key[:40]!r} is not a variant key")
    if layout not in LAYOUTS:
        raise ValueError(f"not an issue: {entry.where}.layout {layout[:20]!r} is not a layout")
    if not areas or list(areas) != sorted(set(areas)) or not known.issuperset(areas):
        raise ValueError(f"not an issue: {entry.where}.areas must be areas of the issue's "
                         "items, sorted, each once")
    variant = Variant(layout, areas)
    if variant.key != key:
        raise ValueError(f"not an issue: {entry.where}.key {key!r} is not the key of its "
                         "layout and areas")
    brief = tuple(entry.integers("brief"))
    folded = entry.optional_integer("folded") or 0
    if not prs.issuperset(brief) or not 0 <= folded <= len(prs):
        raise ValueError(f"not an issue: {entry.where}: brief must name the issue's PRs and "
                         "folded count at most its items")
    return BuiltVariant(variant, brief, folded)


def _read_item(item: _Fields) -> Item:
    note = item.optional_object("note")
    return Item(
        pr=item.integer("pr"), url=item.string("url"), tier=item.string("tier"),
        scope_note=item.optional_string("scope_note"),
        why=Pair(*(item.object("why").string(lang) for lang in LANGS)),
        reviewed_at=item.time("reviewed_at"),
        areas=item.strings("areas"),
        reading_minutes=Pair(*(item.object("reading_minutes").integer(lang) for lang in LANGS)),
        zh=_read_text(item.optional_object("zh")),
        en=_read_text(item.optional_object("en")),
        note=Pair(*(note.optional_string(lang) for lang in LANGS)) if note else None,
        github=_read_github(item.optional_object("github")),
    )


def _read_text(text: _Fields | None) -> Text | None:
    if text is None:
        return None
    return Text(text.string("title"), text.string("body_html"), text.string("body_text"),
                text.optional_string("source") or "feed")


def _read_github(facts: _Fields | None) -> PullFacts | None:
    if facts is None:
        return None
    return PullFacts(
        title=facts.string("title"), author=facts.string("author"),
        state=facts.string("state"), merged_at=facts.optional_time("merged_at"),
        additions=facts.integer("additions"), deletions=facts.integer("deletions"),
        changed_files=facts.integer("changed_files"), labels=facts.strings("labels"),
        tags=facts.strings("tags"))


def _read_problem(problem: _Fields) -> Problem:
    severity = problem.string("severity")
    if severity not in ("blocking", "warning"):
        raise ValueError(f"not an issue: {problem.where}.severity must be blocking or warning")
    return Problem(problem.string("code"), "blocking" if severity == "blocking" else "warning",
                   problem.string("message"), problem.optional_integer("pr"),
                   problem.optional_string("layout"))


class _Fields:
    """One JSON object of an issue.json and where it sits, read key by key: a wrong value is
    named by its place, not met later."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"not an issue: {where} must be an object, found "
                             f"{_json_kind(data)}")
        self.data: dict[str, Any] = data
        self.where = where

    def _get(self, key: str, kind: type | tuple[type, ...], what: str, *,
             optional: bool = False) -> Any:
        value = self.data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, kind) or isinstance(value, bool):
            said = "nothing" if key not in self.data else _json_kind(value)
            raise ValueError(f"not an issue: {self._at(key)} must be {what}, found {said}")
        return value

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def string(self, key: str) -> str:
        return str(self._get(key, str, "a string"))

    def optional_string(self, key: str) -> str | None:
        value = self._get(key, str, "a string or null", optional=True)
        return None if value is None else str(value)

    def integer(self, key: str) -> int:
        return int(self._get(key, int, "a whole number"))

    def optional_integer(self, key: str) -> int | None:
        value = self._get(key, int, "a whole number or null", optional=True)
        return None if value is None else int(value)

    def time(self, key: str) -> datetime:
        return _utc(self.string(key), self._at(key))

    def optional_time(self, key: str) -> datetime | None:
        value = self.optional_string(key)
        return None if value is None else _utc(value, self._at(key))

    def strings(self, key: str) -> tuple[str, ...]:
        values = self._get(key, list, "a list of strings", optional=True) or []
        if not all(isinstance(value, str) for value in values):
            raise ValueError(f"not an issue: {self._at(key)} must be a list of strings")
        return tuple(values)

    def integers(self, key: str) -> tuple[int, ...]:
        values = self._get(key, list, "a list of whole numbers", optional=True) or []
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"not an issue: {self._at(key)} must be a list of whole numbers")
        return tuple(values)

    def strings_by_key(self, key: str) -> dict[str, str]:
        values = self._get(key, dict, "an object of strings")
        if not all(isinstance(value, str) for value in values.values()):
            raise ValueError(f"not an issue: {self._at(key)} must be an object of strings")
        return dict(values)

    def object(self, key: str) -> _Fields:
        return _Fields(self._get(key, dict, "an object"), self._at(key))

    def optional_object(self, key: str) -> _Fields | None:
        value = self._get(key, dict, "an object or null", optional=True)
        return None if value is None else _Fields(value, self._at(key))

    def objects(self, key: str) -> list[_Fields]:
        values = self._get(key, list, "a list", optional=True) or []
        return [_Fields(value, f"{self._at(key)}[{n}]") for n, value in enumerate(values)]


def _utc(text: str, where: str) -> datetime:
    """An issue.json time as an aware UTC datetime; one without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an issue: {where} {text[:40]!r} is not a date and time") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _json_kind(value: object) -> str:
    return {list: "an array", dict: "an object", str: "a string", bool: "true or false",
            type(None): "null"}.get(type(value), "a number")


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
