"""A sent week is frozen: once its send has begun, no other issue goes out or is published
under its name, but an explicit correction.

The store (``SentIssues``) knows what went out, so a fresh CI runner knows too; build, approve,
preview, publish and send refuse another issue (exit 3). A ``--correct`` build carries its
:class:`~pipeline.model.Correction`, recorded by the publish or send that first puts it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pipeline.core.issue.sanitize import one_line
from pipeline.errors import SentWeekError, UsageError
from pipeline.model import Correction
from pipeline.stages.invocation import command

if TYPE_CHECKING:
    from pipeline.stages.built import BuiltIssue
    from subscribers.model import SentIssue
    from subscribers.store import SentIssues

__all__ = ["MAX_REASON", "check", "correction_for", "note_publish", "note_send", "refused",
           "replaces"]

#: The longest reason a correction may give (one line under the issue's title).
MAX_REASON = 200


def replaces(content_hash: str, correction: Correction | None, sent: SentIssue) -> bool:
    """Whether the issue is a new correction of what went out: it differs, and its
    correction is not the one already out."""
    return (content_hash != sent.content_hash and correction is not None
            and (correction.on, correction.reason) != (sent.corrected_on, sent.correction))


def refused(content_hash: str, correction: Correction | None, sent: SentIssue | None) -> bool:
    """Whether the issue never goes out: it differs from ``sent`` and is no new correction."""
    return (sent is not None and content_hash != sent.content_hash
            and not replaces(content_hash, correction, sent))


def check(week_id: str, content_hash: str, correction: Correction | None,
          sent: SentIssue | None, feeds: Sequence[str] = ()) -> None:
    """Refuse (exit 3) an issue that would replace what went out (:func:`refused`), saying
    how to correct it (a preview from ``feeds`` with a reason)."""
    if sent is None or not refused(content_hash, correction, sent):
        return
    went = f"{sent.first_sent_at:%Y-%m-%d}" + (
        f", corrected on {sent.corrected_on}" if sent.corrected_on else "")
    same_day = (" (a second correction needs a reason of its own)"
                if correction is not None and sent.corrected_on == correction.on else "")
    fix = command("preview", "--week", week_id,
                  *(word for feed in feeds for word in ("--feed", feed)),
                  "--correct", "REASON")
    raise SentWeekError(
        f"{week_id} went out on {went} as {sent.content_hash[:12]}, and this issue differs "
        f"({content_hash[:12]}){same_day}: a sent issue is never replaced silently; to "
        f"correct it, proof it again with a reason its page will show: {fix}", week=week_id)


def correction_for(week_id: str, sent: SentIssue | None, reason: str | None,
                   today: str) -> Correction | None:
    """The correction a build carries: a new one for ``--correct REASON``, else the one
    already out, else none."""
    if reason is None:
        if sent is not None and sent.corrected_on is not None:
            return Correction(sent.corrected_on, sent.correction or "")
        return None
    text = one_line(reason)
    if not text or len(text) > MAX_REASON:
        raise UsageError(f"--correct: give the reason in one line of 1 to {MAX_REASON} "
                         "characters (it is shown on the issue's page)")
    if sent is None:
        raise UsageError(f"--correct: {week_id} has not gone out: there is nothing to "
                         "correct (build it without --correct)")
    return Correction(today, text)


def note_publish(built: BuiltIssue, store: SentIssues) -> None:
    """Before a publish: refuse another issue than what went out; record a new correction."""
    _note(built, store, store.sent_issue(built.id))


def note_send(built: BuiltIssue, store: SentIssues, now: datetime, *,
              dry_run: bool = False) -> None:
    """Before a send's first message: note what the week goes out as, or refuse another
    issue; a new correction replaces the note. A dry run only checks."""
    if dry_run:
        check(built.id, built.content_hash, built.issue.correction, store.sent_issue(built.id))
    else:
        _note(built, store, store.record_sent(built.id, built.content_hash, now))


def _note(built: BuiltIssue, store: SentIssues, sent: SentIssue | None) -> None:
    correction = built.issue.correction
    check(built.id, built.content_hash, correction, sent)
    # Past check(), an issue that differs from what went out is a new correction.
    if sent is None or correction is None or built.content_hash == sent.content_hash:
        return
    now_out = store.record_correction(built.id, built.content_hash,
                                      replacing=sent.content_hash,
                                      corrected_on=correction.on, reason=correction.reason)
    if now_out is None or now_out.content_hash != built.content_hash:
        # Another correction won the race: compare with it, as the next command would.
        check(built.id, built.content_hash, correction, now_out)
        raise SentWeekError(f"{built.id} was corrected by another run meanwhile; run the "
                            "command again", week=built.id)
