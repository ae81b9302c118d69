"""A built issue read back from its folder: ``issue.json`` plus its artifacts.

``preview``, ``approve``, ``publish`` and ``send`` never rebuild: they read what ``build``
wrote, and refuse it when the files no longer match its ``content_hash`` (a file edited
after the proof is not what the editor approved).
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.config import Settings
from pipeline.core.issue import issue_json
from pipeline.core.issue.built_issue import BuiltIssue, artifact_names
from pipeline.errors import BlockedError, IssueNotFoundError, NewsletterError
from pipeline.model import Week
from pipeline.stages.invocation import command
from pipeline.week import last_complete_week, parse_week

__all__ = ["APPROVAL_FILE", "ISSUE_FILE", "PREVIEW_DIR", "BuiltIssue", "artifact_names",
           "choose_week", "issue_folder", "load_built", "readable_built"]

ISSUE_FILE = "issue.json"
APPROVAL_FILE = "approval.json"
#: The issue's last preview (``stages/preview.py``), beside what it previews.
PREVIEW_DIR = "preview"


def choose_week(settings: Settings, week_id: str | None) -> Week:
    """``--week`` when given, else the last complete week in the issue's timezone."""
    tz = settings.issue.timezone
    return parse_week(week_id, tz) if week_id else last_complete_week(tz)


def issue_folder(settings: Settings, week_id: str) -> Path:
    parse_week(week_id, settings.issue.timezone)  # a malformed --week is a usage error
    return settings.resolve(settings.paths.build_dir) / "issues" / week_id


def load_built(folder: Path, week_id: str | None = None) -> BuiltIssue:
    """Read a built issue and check its files against its ``content_hash``; with
    ``week_id``, refuse (exit 2) another week's issue (``build --out`` or a copy put it there)."""
    path = folder / ISSUE_FILE
    try:
        source = path.read_bytes()
        data = json.loads(source)
    except FileNotFoundError:
        raise IssueNotFoundError(
            f"no built issue in {folder} (run: {command('build', '--week', folder.name)})"
        ) from None
    except (OSError, ValueError) as exc:
        raise BlockedError(f"{path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise BlockedError(f"{path} is not an issue (not a JSON object); rebuild the issue")
    try:
        keys = issue_json.variant_keys(data)  # checked before any becomes a file name
    except ValueError as exc:
        raise BlockedError(f"{path}: {exc}; rebuild the issue") from None
    raw: dict[str, bytes] = {}
    for name in artifact_names(keys):
        try:
            raw[name] = (folder / name).read_bytes()
        except OSError:
            raise BlockedError(f"{folder / name} is missing; rebuild the issue") from None
    known = issue_json.content_hash(data, raw)
    if known != data.get("content_hash"):
        raise BlockedError(f"{folder} changed since it was built (content_hash mismatch); "
                           "rebuild and proof it again")
    try:
        issue = issue_json.from_dict(data)
        variants = issue_json.read_variants(data, issue)
    except ValueError as exc:
        raise BlockedError(f"{path}: {exc}; rebuild the issue") from None
    if week_id is not None and issue.id != week_id:
        raise IssueNotFoundError(f"{path} holds the issue of {issue.id}, not {week_id}: "
                                 f"nothing of it goes out as {week_id}; build {week_id} "
                                 f"({command('build', '--week', week_id)}), or name {issue.id}")
    return BuiltIssue(folder, issue, known, {k: v.decode("utf-8") for k, v in raw.items()},
                      source, variants)


def readable_built(folder: Path, week_id: str) -> BuiltIssue | None:
    """The issue of ``week_id`` in ``folder``; None when there is none or it cannot be read
    (a report then says so, and a run rebuilds it)."""
    try:
        return load_built(folder, week_id)
    except NewsletterError:
        return None
