"""A built issue as the later stages read it: the :class:`Issue` records and the artifacts.

``preview``, ``approve``, ``publish`` and ``send`` never rebuild: ``stages/built.py`` reads
the folder, checks it against its ``content_hash`` and hands them this record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.issue.interests import issue_areas, variant_for
from pipeline.core.issue.issue_json import BuiltVariant, IssueData
from pipeline.model import LAYOUTS, Issue, Problem


@dataclass(frozen=True)
class BuiltIssue:
    #: The folder it was read from (``build/issues/<week>/``).
    folder: Path
    #: ``issue.json`` read back into the records.
    issue: Issue
    #: What the artifacts were checked against, and what an approval pins.
    content_hash: str
    #: ``email-<layout>.html`` / ``.txt`` (and ``email-<variant key>.*``) → text.
    artifacts: dict[str, str]
    #: ``issue.json`` byte for byte as it was read: what ``publish`` copies to the archive,
    #: so the archived file is the one its ``content_hash`` was computed over.
    source: bytes
    #: The interest variants the build rendered (``issue.json``'s ``variants``), checked.
    variants: tuple[BuiltVariant, ...] = ()

    @property
    def id(self) -> str:
        return self.issue.id

    @property
    def data(self) -> IssueData:
        """``issue.json``'s content as a dict (stages read ``issue``, the records)."""
        data: IssueData = json.loads(self.source)
        return data

    def html(self, key: str) -> str:
        """The HTML part of a layout or of a variant (by its key)."""
        return self.artifacts[f"email-{key}.html"]

    def text(self, key: str) -> str:
        """The text part of a layout or of a variant (by its key)."""
        return self.artifacts[f"email-{key}.txt"]

    @property
    def keys(self) -> tuple[str, ...]:
        """Every rendering sent from this folder: the layouts, then the variants."""
        return (*LAYOUTS, *(v.key for v in self.variants))

    def choose(self, layout: str, areas: Iterable[str]) -> tuple[str, bool]:
        """The rendering a reader of ``layout`` following ``areas`` gets, and whether it is
        the plain layout in place of their variant (their interests changed after the build):
        what was proofed is what is sent."""
        if layout not in LAYOUTS:  # Messages says so, as for any unknown layout
            return layout, False
        wanted = variant_for(layout, areas, issue_areas(self.issue.items))
        if any(variant.key == wanted.key for variant in self.variants):
            return wanted.key, False
        return layout, bool(wanted.areas)  # no areas: the plain layout is theirs

    def blocking(self, *, allow_missing_translations: bool = False) -> list[Problem]:
        """The blocking problems that stop a send (missing languages may be waived)."""
        return [p for p in self.issue.problems if p.severity == "blocking"
                and not (allow_missing_translations and p.code == "missing-language")]


def artifact_names(variant_keys: Sequence[str] = ()) -> list[str]:
    """The artifact files of a built issue: each layout's, then each variant's (by key)."""
    return [f"email-{key}.{ext}" for key in (*LAYOUTS, *variant_keys) for ext in ("html", "txt")]
