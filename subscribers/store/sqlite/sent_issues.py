""":class:`~subscribers.store.SentIssues` on SQLite: the ``sent_issues`` table. The first
send is an insert that does nothing if the row exists; a correction an update conditional on
the hash it replaces."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from subscribers.model import SentIssue
from subscribers.store.rules import decode_time, encode_time
from subscribers.store.sqlite.core import SqliteCore

_SENT_ISSUE = "SELECT * FROM sent_issues WHERE issue_id = ?"


class SqliteSentIssues(SqliteCore):
    """What each issue went out as."""

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        with self._using() as conn:
            row = conn.execute(_SENT_ISSUE, (issue_id,)).fetchone()
        return _sent(row) if row else None

    def record_sent(self, issue_id: str, content_hash: str, now: datetime) -> SentIssue:
        with self._transaction() as conn:
            conn.execute("INSERT INTO sent_issues (issue_id, content_hash, first_hash, "
                         "first_sent_at) VALUES (?, ?, ?, ?) ON CONFLICT (issue_id) DO NOTHING",
                         (issue_id, content_hash, content_hash, encode_time(now)))
            return _sent(conn.execute(_SENT_ISSUE, (issue_id,)).fetchone())

    def record_correction(self, issue_id: str, content_hash: str, *, replacing: str,
                          corrected_on: str, reason: str) -> SentIssue | None:
        with self._transaction() as conn:
            conn.execute("UPDATE sent_issues SET content_hash = ?, corrected_on = ?, "
                         "correction = ? WHERE issue_id = ? AND content_hash = ?",
                         (content_hash, corrected_on, reason, issue_id, replacing))
            row = conn.execute(_SENT_ISSUE, (issue_id,)).fetchone()
        return _sent(row) if row else None


def _sent(row: sqlite3.Row) -> SentIssue:
    return SentIssue(issue_id=row["issue_id"], content_hash=row["content_hash"],
                     first_hash=row["first_hash"],
                     first_sent_at=decode_time(row["first_sent_at"]),
                     corrected_on=row["corrected_on"], correction=row["correction"])
