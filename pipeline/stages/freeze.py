"""A sent week is frozen: once a send of a week has begun, no other issue goes out or is
published under its name, but an explicit correction.

Where "has gone out" is known: the subscriber store (its ``SentIssues`` role), the one
place every runner shares; a fresh CI runner has an empty ``build/`` but the same store.
The send notes the ``content_hash`` it sends before its first message is handed over
(:func:`note_send`). ``build``, ``approve`` and ``preview`` compare the issue at hand with
that note (:func:`check`) and refuse another (exit 3); ``publish`` and ``send`` refuse it
too. An issue built with ``--correct REASON`` is the one exception: it carries its
:class:`~pipeline.model.Correction` (the day and the reason, shown on its page), and the
publish or send that first puts it out records it in the store (:func:`note_publish`,
:func:`note_send`), so ``status`` and every later build know the week is corrected. A
rebuild of a corrected week carries that correction again (:func:`correction_for`), so an
unchanged rebuild is the very issue that went out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pipeline.core.issue.sanitize import one_line
from pipeline.errors import BlockedError, SentWeekError, UsageError
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
    """Whether an issue of ``content_hash`` carrying ``correction`` is a new correction of
    what went out: it differs, and its correction is not the one already out (a rebuild
    that carried the old one along while something else changed is no correction)."""
    return (content_hash != sent.content_hash and correction is not None
            and (correction.on, correction.reason) != (sent.corrected_on, sent.correction))


def refused(content_hash: str, correction: Correction | None, sent: SentIssue | None) -> bool:
    """Whether an issue of ``content_hash`` carrying ``correction`` never goes out: the week
    went out as ``sent``, and this issue differs without being a new correction of it."""
    return (sent is not None and content_hash != sent.content_hash
            and not replaces(content_hash, correction, sent))


def check(week_id: str, content_hash: str, correction: Correction | None,
          sent: SentIssue | None, feeds: Sequence[str] = ()) -> None:
    """Refuse (exit 3) an issue of ``week_id`` that would replace what went out without
    being a correction of it (:func:`refused`). The one line says why, and how to correct
    it: the preview that rebuilds the week with a reason, from ``feeds`` (those this
    command was given)."""
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
    """The correction a build of ``week_id`` carries: a new one for ``--correct REASON``
    (made ``today``), else the one already out, else none. ``--correct`` on a week that has
    not gone out is a usage error (exit 2): there is nothing to correct."""
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
    """Before ``built`` is published: refuse it if it would replace what went out, and
    record it when it is a new correction (the archive is about to show it)."""
    sent = store.sent_issue(built.id)
    check(built.id, built.content_hash, built.issue.correction, sent)
    if sent is not None and built.content_hash != sent.content_hash:
        _record_correction(built, store, sent)


def note_send(built: BuiltIssue, store: SentIssues, now: datetime, *,
              dry_run: bool = False) -> None:
    """Before the first message of a send is handed over: note what the week goes out as,
    or refuse ``built`` if another issue went out under its name; a new correction replaces
    the note. A dry run only checks."""
    if dry_run:
        check(built.id, built.content_hash, built.issue.correction, store.sent_issue(built.id))
        return
    sent = store.record_sent(built.id, built.content_hash, now)
    check(built.id, built.content_hash, built.issue.correction, sent)
    if built.content_hash != sent.content_hash:
        _record_correction(built, store, sent)


def _record_correction(built: BuiltIssue, store: SentIssues, sent: SentIssue) -> None:
    """Record ``built``, a correction :func:`check` let through, as what the week is now."""
    correction = built.issue.correction
    if correction is None:  # check() lets no other issue differ
        raise BlockedError(f"{built.id}: only a correction may replace a sent issue")
    now_out = store.record_correction(built.id, built.content_hash,
                                      replacing=sent.content_hash,
                                      corrected_on=correction.on, reason=correction.reason)
    if now_out is None or now_out.content_hash != built.content_hash:
        # Another correction won the race: compare with it, as the next command would.
        check(built.id, built.content_hash, correction, now_out)
        raise SentWeekError(f"{built.id} was corrected by another run meanwhile; run the "
                            "command again", week=built.id)
