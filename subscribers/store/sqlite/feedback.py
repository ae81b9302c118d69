""":class:`~subscribers.store.Feedback` on SQLite: bounces and complaints noted on the
``ledger`` rows (a complaint outranks a bounce), counted per issue.
"""

from __future__ import annotations

from datetime import datetime

from subscribers.model import FEEDBACK
from subscribers.store.sqlite.core import SqliteCore

#: A bounce or complaint on one ledger row; a complaint outranks a bounce.
_SET_FEEDBACK = ("UPDATE ledger SET feedback = ? WHERE issue_id = ? AND subscriber_id = ? "
                 "AND (feedback IS NULL OR ? = 'complaint')")


class SqliteFeedback(SqliteCore):
    """Feedback on the ledger rows of an issue."""

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        with self._transaction() as conn:
            row = conn.execute("SELECT issue_id, subscriber_id FROM ledger "
                               "WHERE message_id = ? LIMIT 1", (message_id,)).fetchone()
            if row is None:
                return None
            conn.execute(_SET_FEEDBACK, (kind, row[0], row[1], kind))
        return str(row[0])

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
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
        return dict.fromkeys(FEEDBACK, 0) | {kind: n for kind, n in rows}
