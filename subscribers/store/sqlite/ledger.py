""":class:`~subscribers.store.Ledger` on SQLite: the per-issue ``ledger`` table. A claim is
one statement (an insert that does nothing if the row exists, or a compare-and-set
update), and every write is committed and fsynced before the method returns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from subscribers.model import LEDGER_STATUSES, LedgerEntry
from subscribers.store.rules import IN_FLIGHT_REASON, decode_time, encode_time
from subscribers.store.sqlite.core import SqliteCore

if TYPE_CHECKING:
    from subscribers.shards import Shard

__all__ = ["SqliteLedger"]

_CLAIM = """
    INSERT INTO ledger (issue_id, subscriber_id, status, permanent, attempts, updated_at,
                        handed_over)
    VALUES (?, ?, 'sending', 0, 1, ?, 0)
    ON CONFLICT (issue_id, subscriber_id) DO NOTHING"""
_TAKE_OVER_UNCONFIRMED_OR_TEMPORARY = """
    UPDATE ledger SET status = 'sending', message_id = NULL, reason = NULL, permanent = 0,
                      attempts = attempts + 1, updated_at = ?, handed_over = 0
    WHERE issue_id = ? AND subscriber_id = ?
      AND (status = 'unconfirmed' OR (status = 'failed' AND permanent = 0))"""
_TAKE_OVER_TEMPORARY = """
    UPDATE ledger SET status = 'sending', message_id = NULL, reason = NULL, permanent = 0,
                      attempts = attempts + 1, updated_at = ?, handed_over = 0
    WHERE issue_id = ? AND subscriber_id = ? AND status = 'failed' AND permanent = 0"""
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
_LEDGER = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? ORDER BY subscriber_id"""
_LEDGER_ENTRY = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? AND subscriber_id = ?"""
_LEDGER_WITH_STATUS = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? AND status = ? ORDER BY subscriber_id"""


class SqliteLedger(SqliteCore):
    """What became of each (issue, subscriber)."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        """Take (issue, subscriber) for sending, before the transport is called.

        True for exactly one caller, across threads and processes: the row is created as
        ``sending`` by an insert that does nothing if it exists. With ``retry`` (the send
        loop's ``--resend-unconfirmed``) an ``unconfirmed`` row or a temporary failure is
        taken over instead; with ``retry_temporary`` only a temporary failure is. Taking
        over is one compare-and-set update that adds one to ``attempts``. ``sent``,
        ``sending`` and permanent failures are never taken.
        """
        stamp = encode_time(now)
        with self._using() as conn, _unsynced(conn):
            if conn.execute(_CLAIM, (issue_id, subscriber_id, stamp)).rowcount == 1:
                return True
            if retry:
                take_over = _TAKE_OVER_UNCONFIRMED_OR_TEMPORARY
            elif retry_temporary:
                take_over = _TAKE_OVER_TEMPORARY
            else:
                return False
            return conn.execute(take_over, (stamp, issue_id, subscriber_id)).rowcount == 1

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        """The transport took the message and called it ``message_id``.

        Recorded whatever the row said before (even a row another run had expired to
        ``unconfirmed``): the transport's answer is the truth, and ``sent`` is final.
        """
        with self._using() as conn, _unsynced(conn):
            conn.execute(_RECORD_SENT, (issue_id, subscriber_id, message_id, encode_time(now)))

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        """The transport refused the message; ``permanent`` if this recipient never will
        take it. A ``sent`` row is never downgraded."""
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        """The transport may have taken it (a timeout): never re-sent without ``retry``.
        A ``sent`` row is never downgraded."""
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with self._using() as conn, _unsynced(conn):
            conn.execute(_RECORD_NOT_SENT, (issue_id, subscriber_id, status, reason,
                                            int(permanent), encode_time(now)))

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        """Drop a ``sending`` claim whose message never reached the transport (the run
        stopped first), so the next run sends it normally. True if a claim was dropped."""
        with self._using() as conn:
            return conn.execute(
                "DELETE FROM ledger WHERE issue_id = ? AND subscriber_id = ? "
                "AND status = 'sending'", (issue_id, subscriber_id),
            ).rowcount == 1

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """The claim's message goes to the transport now (``handed``), or came back
        untaken (a temporary failure, before the sender waits to retry it).

        Written right before the transport call, so that a crash before it leaves a claim
        :meth:`expire_in_flight` can release: only a message that may have left is ever
        withheld as ``unconfirmed``.
        """
        with self._using() as conn:
            conn.execute("UPDATE ledger SET handed_over = ? WHERE issue_id = ? AND "
                         "subscriber_id = ? AND status = 'sending'",
                         (int(handed), issue_id, subscriber_id))

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """Resolve every ``sending`` row of ``issue_id``; how many became ``unconfirmed``.

        Call it at the start of a run, while holding the run's lease: a row still
        ``sending`` then belongs to an earlier run that crashed. If its message was never
        handed over, nothing left: the claim is dropped and this run sends it. If it was,
        the transport may have taken it, so it becomes ``unconfirmed`` and is not sent
        again without asking. With ``shard``, only that shard's rows: the other shards'
        runs may be sending right now.
        """
        stamp = encode_time(now)
        with self._transaction() as conn:
            rows = [(row[0], bool(row[1])) for row in conn.execute(
                "SELECT subscriber_id, handed_over FROM ledger "
                "WHERE issue_id = ? AND status = 'sending'", (issue_id,))
                if shard is None or row[0] in shard]
            conn.executemany(
                "DELETE FROM ledger WHERE issue_id = ? AND subscriber_id = ? "
                "AND status = 'sending' AND handed_over = 0",
                [(issue_id, sid) for sid, handed in rows if not handed])
            handed_over = [sid for sid, handed in rows if handed]
            conn.executemany(
                "UPDATE ledger SET status = 'unconfirmed', reason = ?, updated_at = ? "
                "WHERE issue_id = ? AND subscriber_id = ? AND status = 'sending'",
                [(IN_FLIGHT_REASON, stamp, issue_id, sid) for sid in handed_over])
            return len(handed_over)


    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        """The ledger of one issue (rows with ``status`` only, if given), by subscriber id."""
        if status is not None and status not in LEDGER_STATUSES:
            raise ValueError(f"unknown ledger status {status!r}")
        with self._using() as conn:
            if status is None:
                rows = conn.execute(_LEDGER, (issue_id,)).fetchall()
            else:
                rows = conn.execute(_LEDGER_WITH_STATUS, (issue_id, status)).fetchall()
        return {row["subscriber_id"]: _entry(row) for row in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        """One (issue, subscriber) row, or None if it was never claimed. For reports only:
        deciding whether to send is :meth:`claim`'s job, never a read of this."""
        with self._using() as conn:
            row = conn.execute(_LEDGER_ENTRY, (issue_id, subscriber_id)).fetchone()
        return _entry(row) if row else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        """Rows per ledger status for one issue; every status is present (0 if none)."""
        with self._using() as conn:
            rows = conn.execute("SELECT status, count(*) FROM ledger WHERE issue_id = ? "
                                "GROUP BY status", (issue_id,)).fetchall()
        counts = dict.fromkeys(LEDGER_STATUSES, 0)
        counts.update({row[0]: row[1] for row in rows})
        return counts




@contextmanager
def _unsynced(conn: sqlite3.Connection) -> Iterator[None]:
    """A write committed without waiting for the disk (WAL, ``synchronous=NORMAL``): other
    connections see it at once (so a claim excludes every other sender at once), and it is
    on the disk with the next synced commit or when the store closes.

    The one write that waits for the disk is the hand-over (:meth:`mark_handed_over`,
    right before the transport call): it carries every earlier write of the log with it, the
    message's own claim included. So a power cut can lose only what cannot cause a second
    delivery: a claim whose message had not left (the next run sends it), or an outcome
    after the message left (the row stays handed over: withheld as ``unconfirmed``). One
    fsync a message instead of three: the relay, not the disk, sets the pace."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        yield
    finally:
        conn.execute("PRAGMA synchronous = FULL")


def _entry(row: sqlite3.Row) -> LedgerEntry:
    return LedgerEntry(
        issue_id=row["issue_id"],
        subscriber_id=row["subscriber_id"],
        status=row["status"],
        message_id=row["message_id"],
        reason=row["reason"],
        permanent=bool(row["permanent"]),
        attempts=row["attempts"],
        updated_at=decode_time(row["updated_at"]),
    )
