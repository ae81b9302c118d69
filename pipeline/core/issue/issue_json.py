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
from dataclasses import MISSING, dataclass, fields, is_dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal, get_args, get_origin, get_type_hints

from pipeline.core.issue.interests import Variant, issue_areas
from pipeline.model import (
    LANGS,
    LAYOUTS,
    Issue,
    Item,
    Pair,
    Problem,
    PullFacts,
    Text,
    Week,
)
from pipeline.week import iso_z

SCHEMA_VERSION = 1

#: ``issue.json``'s content as ``json.loads`` gives it (docs/architecture.md lays it out).
IssueData = dict[str, Any]

#: The keys a record is written with, in order, where they are not all its fields in their
#: order: what ``build`` keeps only while it works (an item's ``original_lang``, ``scopes``,
#: ``reading`` and ``reason``, a PR's ``files``) stays out, and comes back as the default.
_KEYS: dict[type, tuple[str, ...]] = {
    Item: ("pr", "url", "tier", "scope_note", "why", "reviewed_at", "areas", "reading_minutes",
           "note", "zh", "en", "github"),
    PullFacts: ("title", "author", "state", "merged_at", "additions", "deletions",
                "changed_files", "labels", "tags"),
    Problem: ("code", "severity", "pr", "layout", "message"),
    Week: ("start", "end", "tz"),  # its id is the issue's
}


def _keys(cls: type) -> tuple[str, ...]:
    return _KEYS.get(cls) or tuple(field.name for field in fields(cls))


def _plain(value: Any) -> Any:
    """A record, or a value in one, as JSON values: records are objects, tuples are lists
    and times are UTC strings with ``Z``."""
    if isinstance(value, datetime):
        return iso_z(value)
    if isinstance(value, tuple):
        return [_plain(each) for each in value]
    if isinstance(value, dict):
        return dict(value)
    if not is_dataclass(value):
        return value
    data = {key: _plain(getattr(value, key)) for key in _keys(type(value))}
    if isinstance(value, Problem):  # pr and layout only when it is about one PR or layout
        data = {key: each for key, each in data.items() if each is not None}
    if isinstance(value, Item) and value.en is None and value.github and value.github.title:
        # The PR's title is the English headline, marked ``github-title``: a headline, not a
        # translation (``missing-language`` stays).
        data["en"] = _plain(Text(value.github.title, "", "", "github-title"))
    return data


def to_dict(issue: Issue, artifacts: Mapping[str, bytes],
            variants: Sequence[Mapping[str, Any]] = ()) -> IssueData:
    """The issue as docs/architecture.md lays it out, ``content_hash`` included."""
    body = _body(issue, variants)
    return {**body, "content_hash": content_hash(body, artifacts)}


def with_hash(issue: Issue, known_hash: str,
              variants: Sequence[Mapping[str, Any]] = ()) -> IssueData:
    """:func:`to_dict` with a hash already known: an issue read back, its artifacts checked."""
    return {**_body(issue, variants), "content_hash": known_hash}


def variant_data(variant: Variant, brief: Sequence[int] = (), folded: int = 0
                 ) -> dict[str, Any]:
    """How ``issue.json`` lists one rendered interest variant (:class:`BuiltVariant` reads
    it back)."""
    return {"key": variant.key, "layout": variant.layout, "areas": list(variant.areas),
            "brief": list(brief), "folded": folded}


#: The keys ``build`` always writes, in order (a file written before ``number`` reads as 0).
_ISSUE_KEYS = ("id", "week", "repo", "archive_url", "number", "subject", "preheader", "items",
               "skipped", "problems")


def _body(issue: Issue, variants: Sequence[Mapping[str, Any]] = ()) -> IssueData:
    """``issue.json`` without its ``content_hash`` (what the hash covers). ``variants``,
    ``hidden`` and ``correction`` are written only when there are any: an issue without
    them keeps the bytes (and the hash) it had before they existed."""
    body = {"schema_version": SCHEMA_VERSION,
            **{key: _plain(getattr(issue, key)) for key in _ISSUE_KEYS}}
    if variants:
        body["variants"] = list(variants)
    if issue.hidden:
        body["hidden"] = list(issue.hidden)
    if issue.correction is not None:
        body["correction"] = _plain(issue.correction)
    return body


def checked(data: object) -> IssueData:
    """``data`` (as ``json.loads`` gives it) once its top level has every key and the week
    its times; ValueError says what is missing or what it is instead."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {_json_kind(data)}")
    if missing := [key for key in ("schema_version", *_ISSUE_KEYS, "content_hash")
                   if key not in data and key != "number"]:
        raise ValueError(f"not an issue: no {', '.join(missing)}")
    week = data["week"]
    if not isinstance(week, dict) or not all(
            isinstance(week.get(key), str) for key in _KEYS[Week]):
        raise ValueError("not an issue: week needs start, end and tz as strings")
    for key in ("start", "end"):
        try:
            datetime.fromisoformat(week[key])
        except ValueError:
            raise ValueError(f"not an issue: week {key} {week[key][:40]!r} is not a date and "
                             "time") from None
    if not (isinstance(data["id"], str) and isinstance(data["items"], list)
            and isinstance(data["problems"], list)):
        raise ValueError("not an issue: id must be a string, items and problems lists")
    return data


def from_dict(data: object) -> Issue:
    """``data`` (as ``json.loads`` gives it) as the :class:`Issue` it was written from;
    ValueError, in one line, for another schema version or a key missing or of the wrong type,
    saying where (``items[2].why.en``)."""
    if isinstance(data, dict) and data.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"not an issue this version reads: schema_version "
                         f"{str(data['schema_version'])[:20]}, expected {SCHEMA_VERSION}")
    top = checked(data)
    week = _record(Week, top["week"], "week", id=top["id"])
    issue: Issue = _record(Issue, top, "", week=week)
    return issue


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


def read_variants(data: object, issue: Issue) -> tuple[BuiltVariant, ...]:
    """The interest variants ``data`` lists for ``issue``. A key becomes a file name, so it
    is taken only when :class:`Variant` would write it for its layout and areas (no ``../x``),
    the areas are the issue's own, sorted and distinct, and no key repeats; else ValueError."""
    if not isinstance(data, dict) or data.get("variants") is None:
        return ()
    known = set(issue_areas(issue.items))
    prs = {item.pr for item in issue.items}
    found = [_read_variant(entry, f"variants[{n}]", known, prs)
             for n, entry in enumerate(_check(data["variants"], list, "variants", "a list"))]
    if len({v.key for v in found}) != len(found):
        raise ValueError("not an issue: variants lists a key twice")
    return tuple(found)


def variant_keys(data: object) -> tuple[str, ...]:
    """The variant keys ``data`` lists, each checked before it names a file (the artifacts
    are read, and hashed, before the rest of the file); ValueError otherwise."""
    entries = data.get("variants") if isinstance(data, dict) else None
    if entries is None:
        return ()
    for n, entry in enumerate(_check(entries, list, "variants", "a list")):
        key = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(key, str) or not _VARIANT_KEY.fullmatch(key):
            raise ValueError(f"not an issue: variants[{n}].key {str(key)[:40]!r} is not a "
                             "variant key")
    return tuple(entry["key"] for entry in entries)


def _read_variant(entry: object, where: str, known: set[str], prs: set[int]) -> BuiltVariant:
    data = _check(entry, dict, where, "an object")
    key, layout = _get(data, "key", str, where), _get(data, "layout", str, where)
    areas = _get(data, "areas", tuple[str, ...], where)
    if layout not in LAYOUTS:
        raise ValueError(f"not an issue: {where}.layout {layout[:20]!r} is not a layout")
    if not areas or list(areas) != sorted(set(areas)) or not known.issuperset(areas):
        raise ValueError(f"not an issue: {where}.areas must be areas of the issue's "
                         "items, sorted, each once")
    variant = Variant(layout, areas)
    if variant.key != key:
        raise ValueError(f"not an issue: {where}.key {key!r} is not the key of its "
                         "layout and areas")
    brief = _get(data, "brief", tuple[int, ...], where)
    folded = _get(data, "folded", int | None, where) or 0
    if not prs.issuperset(brief) or not 0 <= folded <= len(prs):
        raise ValueError(f"not an issue: {where}: brief must name the issue's PRs and "
                         "folded count at most its items")
    return BuiltVariant(variant, brief, folded)


# -- reading a record back: one walk over its fields' types ----------------------------------


def _record(cls: type, data: dict[str, Any], where: str, **known: Any) -> Any:
    """The record of type ``cls`` that the JSON object ``data`` holds, fields ``known``
    aside; a field with a default may be absent or null (a file written before it existed)."""
    hints, defaulted = _fields_of(cls)
    found = {key: _get(data, key, hints[key], where, " or null" if key in defaulted else "")
             for key in _keys(cls)
             if key not in known and not (key in defaulted and data.get(key) is None)}
    return cls(**found, **known)


def _get(data: dict[str, Any], key: str, hint: Any, where: str, null: str = "") -> Any:
    return _read(hint, data.get(key, MISSING), f"{where}.{key}" if where else key, null)


def _read(hint: Any, value: object, where: str, null: str = "") -> Any:
    """``value`` as the type ``hint`` says (``MISSING`` when the key is absent), or a
    ValueError naming ``where``."""
    args = get_args(hint)
    if type(None) in args:  # ``X | None``: absent or null is None
        if value is None or value is MISSING:
            return None
        (inner,) = (arg for arg in args if arg is not type(None))
        return _read(inner, value, where, " or null")
    origin = get_origin(hint) or hint
    if origin is tuple:  # ``tuple[X, ...]``: a list, absent or null when empty
        values = [] if value is None or value is MISSING else _check(value, list, where,
                                                                    _list_of(args[0]))
        if is_dataclass(args[0]):
            return tuple(_read(args[0], each, f"{where}[{n}]") for n, each in enumerate(values))
        if not all(isinstance(each, args[0]) and not isinstance(each, bool) for each in values):
            raise ValueError(f"not an issue: {where} must be {_list_of(args[0])}")
        return tuple(values)
    if origin is dict:  # subject and preheader: text by layout
        strings = _check(value, dict, where, "an object of strings")
        if not all(isinstance(each, str) for each in strings.values()):
            raise ValueError(f"not an issue: {where} must be an object of strings")
        return dict(strings)
    if origin is Literal:
        if value not in args:
            raise ValueError(f"not an issue: {where} must be {' or '.join(args)}")
        return value
    if origin is datetime:
        return _utc(_check(value, str, where, f"a string{null}"), where)
    if isinstance(origin, type) and is_dataclass(origin):
        data = _check(value, dict, where, f"an object{null}")
        if origin is Pair:  # its fields' type is the pair's argument
            return Pair(*(_get(data, lang, args[0], where) for lang in LANGS))
        return _record(origin, data, where)
    kind = {str: "a string", int: "a whole number"}[origin]
    return _check(value, origin, where, f"{kind}{null}")


@cache  # get_type_hints is slow, and publish reads back every archived issue
def _fields_of(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A record's field types, and the fields that have a default."""
    return get_type_hints(cls), frozenset(
        field.name for field in fields(cls)
        if field.default is not MISSING or field.default_factory is not MISSING)


def _list_of(hint: Any) -> str:
    return {str: "a list of strings", int: "a list of whole numbers"}.get(hint, "a list")


def _check(value: object, kind: type, where: str, what: str) -> Any:
    """``value`` when it is a ``kind`` (true and false are no numbers), else ValueError."""
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    raise ValueError(f"not an issue: {where} must be {what}, found {_json_kind(value)}")


def _utc(text: str, where: str) -> datetime:
    """An issue.json time as an aware UTC datetime; one without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text)
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, OverflowError):  # in UTC, 0001-01-01T00:00+05:00 is before year 1
        raise ValueError(f"not an issue: {where} {text[:40]!r} is not a date and time") from None


def _json_kind(value: object) -> str:
    return {list: "an array", dict: "an object", str: "a string", bool: "true or false",
            type(None): "null", type(MISSING): "nothing"}.get(type(value), "a number")


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
