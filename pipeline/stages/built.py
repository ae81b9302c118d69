"""A built issue as the later stages read it back: ``issue.json`` plus its artifacts.

``preview``, ``approve``, ``publish`` and ``send`` never rebuild: they read what ``build``
wrote, and refuse it when the files no longer match the ``content_hash`` inside (a file
edited by hand after the editor's proof is not what the editor approved).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Settings
from pipeline.core import issue_json
from pipeline.core.issue_json import IssueData, ProblemData
from pipeline.errors import BlockedError, IssueNotFoundError
from pipeline.model import LAYOUTS
from pipeline.week import parse_week

ISSUE_FILE = "issue.json"
APPROVAL_FILE = "approval.json"


@dataclass(frozen=True)
class BuiltIssue:
    folder: Path
    data: IssueData
    #: ``email-<layout>.html`` / ``.txt`` → text.
    artifacts: dict[str, str]

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def content_hash(self) -> str:
        return self.data["content_hash"]

    def html(self, layout: str) -> str:
        return self.artifacts[f"email-{layout}.html"]

    def text(self, layout: str) -> str:
        return self.artifacts[f"email-{layout}.txt"]

    def blocking(self, *, allow_missing_translations: bool = False) -> list[ProblemData]:
        """The blocking problems that stop a send (missing languages may be waived)."""
        return [p for p in self.data["problems"] if p["severity"] == "blocking"
                and not (allow_missing_translations and p["code"] == "missing-language")]


def artifact_names() -> list[str]:
    return [f"email-{layout}.{ext}" for layout in LAYOUTS for ext in ("html", "txt")]


def issue_folder(settings: Settings, week_id: str) -> Path:
    parse_week(week_id, settings.issue.timezone)  # a malformed --week is a usage error
    return settings.resolve(settings.paths.build_dir) / "issues" / week_id


def load_built(folder: Path) -> BuiltIssue:
    """Read a built issue and check its files against its ``content_hash``."""
    path = folder / ISSUE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IssueNotFoundError(
            f"no built issue in {folder} (run: newsletter build --week {folder.name})") from None
    except (OSError, ValueError) as exc:
        raise BlockedError(f"{path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise BlockedError(f"{path} is not an issue (not a JSON object); rebuild the issue")
    raw: dict[str, bytes] = {}
    for name in artifact_names():
        try:
            raw[name] = (folder / name).read_bytes()
        except OSError:
            raise BlockedError(f"{folder / name} is missing; rebuild the issue") from None
    if issue_json.content_hash(data, raw) != data.get("content_hash"):
        raise BlockedError(f"{folder} changed since it was built (content_hash mismatch); "
                           "rebuild and proof it again")
    try:
        issue = issue_json.checked(data)
    except ValueError as exc:
        raise BlockedError(f"{path}: {exc}; rebuild the issue") from None
    return BuiltIssue(folder, issue, {k: v.decode("utf-8") for k, v in raw.items()})
