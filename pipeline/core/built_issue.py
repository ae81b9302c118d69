"""A built issue as the later stages read it: the :class:`Issue` records and the artifacts.

``preview``, ``approve``, ``publish`` and ``send`` never rebuild and never index
``issue.json``: ``stages/built.py`` reads the folder, checks it against its ``content_hash``
and hands them this record, whose ``issue`` is what :func:`issue_json.from_dict` read back.
It lives in ``core`` because the pure parts (proof, messages, the site) take it as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.issue_json import IssueData
from pipeline.model import LAYOUTS, Issue, Problem


@dataclass(frozen=True)
class BuiltIssue:
    #: The folder it was read from (``build/issues/<week>/``).
    folder: Path
    #: ``issue.json`` read back into the records.
    issue: Issue
    #: What the artifacts were checked against, and what an approval pins.
    content_hash: str
    #: ``email-<layout>.html`` / ``.txt`` → text.
    artifacts: dict[str, str]
    #: ``issue.json`` byte for byte as it was read: what ``publish`` copies to the archive,
    #: so the archived file is the one its ``content_hash`` was computed over.
    source: bytes

    @property
    def id(self) -> str:
        return self.issue.id

    @property
    def data(self) -> IssueData:
        """``issue.json``'s content as a dict (stages read ``issue``, the records)."""
        data: IssueData = json.loads(self.source)
        return data

    def html(self, layout: str) -> str:
        return self.artifacts[f"email-{layout}.html"]

    def text(self, layout: str) -> str:
        return self.artifacts[f"email-{layout}.txt"]

    def blocking(self, *, allow_missing_translations: bool = False) -> list[Problem]:
        """The blocking problems that stop a send (missing languages may be waived)."""
        return [p for p in self.issue.problems if p.severity == "blocking"
                and not (allow_missing_translations and p.code == "missing-language")]


def artifact_names() -> list[str]:
    return [f"email-{layout}.{ext}" for layout in LAYOUTS for ext in ("html", "txt")]
