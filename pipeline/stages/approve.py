"""Approval: the editor's record of the ``content_hash`` they proofed.

``build`` refuses to replace an approved issue with other content unless ``--force`` (which
drops the approval); with ``[issue] require_approval`` the send refuses an issue whose hash
is not the approved one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import OutputError
from pipeline.output import write_file
from pipeline.stages import freeze
from pipeline.stages.built import APPROVAL_FILE, BuiltIssue
from pipeline.week import iso_z

if TYPE_CHECKING:
    from subscribers.model import SentIssue


@dataclass(frozen=True)
class Approval:
    week: str
    content_hash: str
    approved_at: str


def read_approval(folder: Path) -> Approval | None:
    try:
        data = json.loads((folder / APPROVAL_FILE).read_text(encoding="utf-8"))
        return Approval(data["week"], data["content_hash"], data["approved_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def approve(built: BuiltIssue, now: datetime, sent: SentIssue | None = None) -> Approval:
    """Record that ``built``, exactly as it is, may go out (refused for a frozen week)."""
    freeze.check(built.id, built.content_hash, built.issue.correction, sent)
    approval = Approval(built.id, built.content_hash, iso_z(now))
    body = json.dumps(approval.__dict__, indent=2).encode() + b"\n"
    try:
        write_file(built.folder / APPROVAL_FILE, body, prefix=".approval-")
    except OSError as exc:
        raise OutputError(f"cannot record the approval in {built.folder}: "
                          f"{exc.strerror or exc}") from exc
    return approval


def is_approved(built: BuiltIssue) -> bool:
    approval = read_approval(built.folder)
    return approval is not None and approval.content_hash == built.content_hash
