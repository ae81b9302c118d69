"""The weekly job, ``newsletter run``: build (or reuse the approved issue), every check of
the send, publish, send; in that order and no other.

The issue's lease is held from the start, so two schedulers never both publish and send; an
approved issue is sent as proofed, never rebuilt; and every check of the send passes before
anything is published. What reaches outside comes in as :class:`Steps`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from pipeline import log
from pipeline.errors import BlockedError
from pipeline.model import Week
from pipeline.stages import freeze
from pipeline.stages.approve import is_approved
from pipeline.stages.built import APPROVAL_FILE, BuiltIssue, load_built, readable_built
from pipeline.stages.deliver import SendRequest
from pipeline.stages.invocation import command
from pipeline.stages.lock import hold
from pipeline.stages.preflight import check_week

if TYPE_CHECKING:
    from pathlib import Path

    from pipeline.core.assemble import Choice
    from pipeline.stages.preflight import Delivery
    from subscribers.model import SentIssue
    from subscribers.store import SubscriberStore

__all__ = ["RunRequest", "Steps", "approved_issue", "run_week"]

_log = logging.getLogger("newsletter.run")


@dataclass(frozen=True)
class RunRequest:
    """What ``newsletter run`` is asked to do."""

    week: Week
    #: ``--feed``: read instead of ``[feed] urls``.
    feeds: tuple[str, ...] = ()
    send: SendRequest = field(default_factory=SendRequest)


class Steps(Protocol):
    """The steps of the job that reach outside (the job closes what they open)."""

    def open_store(self) -> SubscriberStore: ...

    def reuse(self, built: BuiltIssue, sent: bool) -> None:
        """``built`` is sent as it is: the issue that went out (``sent``), or the approved one."""

    def build(self, week: Week, feeds: Sequence[str], choices: Sequence[Choice],
              sent: SentIssue | None) -> BuiltIssue: ...

    def open_delivery(self, built: BuiltIssue, request: SendRequest) -> Delivery:
        """Every check of the send, the transport opened and probed."""

    def publish(self, built: BuiltIssue, store: SubscriberStore) -> None: ...

    def send(self, built: BuiltIssue, delivery: Delivery, store: SubscriberStore,
             request: SendRequest) -> int:
        """Send to the list; the exit code."""


def run_week(request: RunRequest, steps: Steps, *, at: datetime,
             issue_folder: Path) -> int:
    """The weekly job for ``request.week``; the send's exit code. What fails raises."""
    week = request.week
    check_week(week, at, allow_partial_week=request.send.allow_partial_week)
    with steps.open_store() as store, hold(store, f"send:{week.id}", f"run {week.id}"):
        sent = store.sent_issue(week.id)
        # Unreadable here: rebuilt, and the build compared with what went out.
        here = readable_built(issue_folder, week.id) if sent is not None else None
        if here is not None and sent is not None and here.content_hash == sent.content_hash:
            built = here
            steps.reuse(built, True)
        elif (approved := approved_issue(issue_folder, week.id)) is not None:
            built = approved
            steps.reuse(built, False)
        else:
            if (here is not None and sent is not None
                    and freeze.replaces(here.content_hash, here.issue.correction, sent)):
                raise BlockedError(f"{here.id}: the correction built in {here.folder} "
                                   f"({here.content_hash[:12]}) is not approved; proof it, "
                                   f"then run: {command('approve', '--week', here.id)}")
            built = steps.build(week, request.feeds, store.variant_choices(), sent)
        # An approved issue is no exception: what went out is never replaced silently.
        freeze.check(week.id, built.content_hash, built.issue.correction, sent, request.feeds)
        with log.timed(_log, "checks before publishing"):
            delivery = steps.open_delivery(built, request.send)
        with delivery:
            if not request.send.options.dry_run:
                with log.timed(_log, "publish"):
                    steps.publish(built, store)
            return steps.send(built, delivery, store, request.send)


def approved_issue(folder: Path, week_id: str) -> BuiltIssue | None:
    """The issue in ``folder`` when it is approved as it stands, else None."""
    if not (folder / APPROVAL_FILE).exists():
        return None
    candidate = load_built(folder, week_id)
    return candidate if is_approved(candidate) else None
