""":class:`~subscribers.store.Feedback` on SQLite: bounces and complaints noted on the
``ledger`` rows (a complaint outranks a bounce), counted per issue.
"""

from __future__ import annotations

from datetime import datetime

from subscribers.model import FEEDBACK
from subscribers.store.sqlite.core import SqliteCore

__all__ = ["SqliteFeedback"]

#: A bounce or complaint on one ledger row; a complaint outranks a bounce.
_SET_FEEDBACK = ("UPDATE ledger SET feedback = ? WHERE issue_id = ? AND subscriber_id = ? "
                 "AND (feedback IS NULL OR ? = 'complaint')")


class SqliteFeedback(SqliteCore):
    """Feedback on the ledger rows of an issue."""

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """A bounce or complaint about the message SES called ``message_id``: noted on its
        ledger row (a complaint outranks a bounce), so ``newsletter status`` can give each
        issue's bounce and complaint rates. The issue's id, or None for an unknown id (a
        confirmation mail, a test copy)."""
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        with self._transaction() as conn:
            row = conn.execute("SELECT issue_id, subscriber_id FROM ledger "
                               "WHERE message_id = ? LIMIT 1", (message_id,)).fetchone()
            if row is None:
                return None
            conn.execute(_SET_FEEDBACK, (kind, row[0], row[1], kind))
        issue_id: str = row[0]
        return issue_id

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        """Feedback on the row of (issue, subscriber) (a complaint outranks a bounce);
        True if the row is there."""
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        with self._using() as conn:
            if conn.execute(_SET_FEEDBACK, (kind, issue_id, subscriber_id, kind)).rowcount:
                return True
            return conn.execute("SELECT 1 FROM ledger WHERE issue_id = ? AND "
                                "subscriber_id = ?", (issue_id, subscriber_id)
                                ).fetchone() is not None

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        with self._using() as conn:
            rows = conn.execute("SELECT feedback, count(*) FROM ledger WHERE issue_id = ? "
                                "AND feedback IS NOT NULL GROUP BY feedback",
                                (issue_id,)).fetchall()
        counts = dict.fromkeys(FEEDBACK, 0)
        counts.update({row[0]: row[1] for row in rows})
        return counts
