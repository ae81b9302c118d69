""":class:`~subscribers.store.Ledger`, :class:`~subscribers.store.Feedback` and
:class:`~subscribers.store.SentIssues` on SQLite. A claim is one statement (an insert that does
nothing if the row exists, or a compare-and-set update), committed before the method returns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from subscribers.model import FEEDBACK, LEDGER_STATUSES, LedgerEntry, SentIssue
from subscribers.store.rules import (
    IN_FLIGHT_REASON,
    check_known,
    encode_time,
    read_entry,
    read_sent,
)
from subscribers.store.sqlite.core import SqliteCore

if TYPE_CHECKING:
    from subscribers.shards import Shard


_CLAIM = """
    INSERT INTO ledger (issue_id, subscriber_id, status, permanent, attempts, updated_at,
                        handed_over)
    VALUES (?, ?, 'sending', 0, 1, ?, 0)
    ON CONFLICT (issue_id, subscriber_id) DO NOTHING"""

# A temporary failure is taken over on any retry, an unconfirmed row only with ``retry``.
_TAKE_OVER = """
    UPDATE ledger SET status = 'sending', message_id = NULL, reason = NULL, permanent = 0,
                      attempts = attempts + 1, updated_at = :now, handed_over = 0
    WHERE issue_id = :issue AND subscriber_id = :sid
      AND ((status = 'failed' AND permanent = 0) OR (:retry AND status = 'unconfirmed'))"""

# An outcome is recorded even without a claim row (the transport's answer is the truth)...
_RECORD_SENT = """
    INSERT INTO ledger (issue_id, subscriber_id, status, message_id, reason, permanent,
                        attempts, updated_at)
    VALUES (?, ?, 'sent', ?, NULL, 0, 1, ?)
    ON CONFLICT (issue_id, subscriber_id) DO UPDATE SET
        status = 'sent', message_id = excluded.message_id, reason = NULL, permanent = 0,
        updated_at = excluded.updated_at"""

# ...but a failure never overwrites a delivery.
_RECORD_NOT_SENT = """
    INSERT INTO ledger (issue_id, subscriber_id, status, message_id, reason, permanent,
                        attempts, updated_at)
    VALUES (?, ?, ?, NULL, ?, ?, 1, ?)
    ON CONFLICT (issue_id, subscriber_id) DO UPDATE SET
        status = excluded.status, message_id = NULL, reason = excluded.reason,
        permanent = excluded.permanent, updated_at = excluded.updated_at
    WHERE ledger.status != 'sent'"""

#: A bounce or complaint on one ledger row; a complaint outranks a bounce.
_SET_FEEDBACK = ("UPDATE ledger SET feedback = ? WHERE issue_id = ? AND subscriber_id = ? "
                 "AND (feedback IS NULL OR ? = 'complaint')")

_SENT_ISSUE = "SELECT * FROM sent_issues WHERE issue_id = ?"


class SqliteLedger(SqliteCore):
    """What became of each (issue, subscriber), and what each issue went out as."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        stamp = encode_time(now)
        with self._using() as conn, _unsynced(conn):
            if conn.execute(_CLAIM, (issue_id, subscriber_id, stamp)).rowcount == 1:
                return True
            if not (retry or retry_temporary):
                return False
            return conn.execute(_TAKE_OVER, {"now": stamp, "issue": issue_id,
                                             "sid": subscriber_id, "retry": retry}
                                ).rowcount == 1

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        with self._using() as conn, _unsynced(conn):
            conn.execute(_RECORD_SENT, (issue_id, subscriber_id, message_id, encode_time(now)))

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with self._using() as conn, _unsynced(conn):
            conn.execute(_RECORD_NOT_SENT, (issue_id, subscriber_id, status, reason,
                                            int(permanent), encode_time(now)))

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        return self._run("DELETE FROM ledger WHERE issue_id = ? AND subscriber_id = ? "
                         "AND status = 'sending'", (issue_id, subscriber_id)) == 1

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """Synced (``synchronous=FULL``): written right before the transport call, it takes
        the claim and every earlier write to the disk with it."""
        self._run("UPDATE ledger SET handed_over = ? WHERE issue_id = ? AND subscriber_id = ? "
                  "AND status = 'sending'", (int(handed), issue_id, subscriber_id))

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        stamp = encode_time(now)
        with self._transaction() as conn:
            sending = conn.execute("SELECT subscriber_id FROM ledger "
                                   "WHERE issue_id = ? AND status = 'sending'", (issue_id,))
            claims = [{"issue": issue_id, "sid": sid, "reason": IN_FLIGHT_REASON, "now": stamp}
                      for (sid,) in sending if shard is None or sid in shard]
            # Released if never handed over; those left were, and turn unconfirmed.
            conn.executemany("DELETE FROM ledger WHERE issue_id = :issue AND "
                             "subscriber_id = :sid AND status = 'sending' AND handed_over = 0",
                             claims)
            return conn.executemany(
                "UPDATE ledger SET status = 'unconfirmed', reason = :reason, updated_at = :now "
                "WHERE issue_id = :issue AND subscriber_id = :sid AND status = 'sending'",
                claims).rowcount

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        check_known("ledger status", LEDGER_STATUSES, status)
        rows = self._rows("SELECT * FROM ledger WHERE issue_id = :issue AND "
                          "(:status IS NULL OR status = :status) ORDER BY subscriber_id",
                          {"issue": issue_id, "status": status})
        return {row["subscriber_id"]: read_entry(dict(row)) for row in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        row = self._row("SELECT * FROM ledger WHERE issue_id = ? AND subscriber_id = ?",
                        (issue_id, subscriber_id))
        return read_entry(dict(row)) if row else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        rows = self._rows("SELECT status, count(*) FROM ledger WHERE issue_id = ? "
                          "GROUP BY status", (issue_id,))
        return dict.fromkeys(LEDGER_STATUSES, 0) | {status: n for status, n in rows}

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        check_known("feedback", FEEDBACK, kind)
        with self._transaction() as conn:
            row = conn.execute("SELECT issue_id, subscriber_id FROM ledger "
                               "WHERE message_id = ? LIMIT 1", (message_id,)).fetchone()
            if row is None:
                return None
            conn.execute(_SET_FEEDBACK, (kind, row[0], row[1], kind))
        return str(row[0])

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        check_known("feedback", FEEDBACK, kind)
        if self._run(_SET_FEEDBACK, (kind, issue_id, subscriber_id, kind)):
            return True
        return self._row("SELECT 1 FROM ledger WHERE issue_id = ? AND subscriber_id = ?",
                         (issue_id, subscriber_id)) is not None

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        rows = self._rows("SELECT feedback, count(*) FROM ledger WHERE issue_id = ? "
                          "AND feedback IS NOT NULL GROUP BY feedback", (issue_id,))
        return dict.fromkeys(FEEDBACK, 0) | {kind: n for kind, n in rows}

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        row = self._row(_SENT_ISSUE, (issue_id,))
        return read_sent(dict(row)) if row else None

    def record_sent(self, issue_id: str, content_hash: str, now: datetime) -> SentIssue:
        with self._transaction() as conn:
            conn.execute("INSERT INTO sent_issues (issue_id, content_hash, first_hash, "
                         "first_sent_at) VALUES (?, ?, ?, ?) ON CONFLICT (issue_id) DO NOTHING",
                         (issue_id, content_hash, content_hash, encode_time(now)))
            return read_sent(dict(conn.execute(_SENT_ISSUE, (issue_id,)).fetchone()))

    def record_correction(self, issue_id: str, content_hash: str, *, replacing: str,
                          corrected_on: str, reason: str) -> SentIssue | None:
        with self._transaction() as conn:
            conn.execute("UPDATE sent_issues SET content_hash = ?, corrected_on = ?, "
                         "correction = ? WHERE issue_id = ? AND content_hash = ?",
                         (content_hash, corrected_on, reason, issue_id, replacing))
            row = conn.execute(_SENT_ISSUE, (issue_id,)).fetchone()
        return read_sent(dict(row)) if row else None


@contextmanager
def _unsynced(conn: sqlite3.Connection) -> Iterator[None]:
    """A write committed without waiting for the disk; other connections see it at once.

    Only the hand-over waits for the disk, carrying every earlier write with it, so a power cut
    loses only what cannot cause a second delivery."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        yield
    finally:
        conn.execute("PRAGMA synchronous = FULL")
