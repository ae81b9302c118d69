""":class:`~subscribers.store.Imports` on SQLite: a batch decided by
:func:`~subscribers.store.rules.plan_additions` and written in one transaction, so an
import is whole or absent batch by batch.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from subscribers.model import AddResult, NewSubscriber, Subscriber, email_key, normalise_email
from subscribers.store.rules import (
    check_new_status,
    encode_areas,
    encode_time,
    plan_additions,
    suppression_hash,
)
from subscribers.store.sqlite.core import SqliteCore
from subscribers.store.sqlite.rows import ACTIVATE, read_subscriber

# add_many holds the write lock from its reads to its writes: a conflict here is a bug.
_INSERT_NEW_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


class SqliteImports(SqliteCore):
    """Many addresses at once, one transaction a batch."""

    atomic_batches = True

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """One IMMEDIATE transaction (what is read stays true until the writes): one query
        for the suppressed among the batch, one for those present, the outcomes decided in
        Python, then one ``executemany`` each for the new and the activated rows."""
        for entry in entries:
            check_new_status(entry.layout, status)
        normals = [(normalise_email(entry.email), entry) for entry in entries]
        if not normals:
            return []
        with self._transaction() as conn:
            plan = plan_additions(
                normals, status=status, source=source, now=now,
                existing=_rows_by_key(conn, {email_key(normal) for normal, _ in normals}),
                suppressed=_suppressed_among(conn, {suppression_hash(n) for n, _ in normals}))
            stamp = encode_time(now)
            consent_at = stamp if status == "active" else None
            # In id order: a batch's ids are neighbours (batch_subscriber_ids), so the
            # inserts walk a few pages of the id-ordered table once.
            conn.executemany(_INSERT_NEW_SUBSCRIBER, [
                (sub.id, sub.email, email_key(sub.email), status, sub.layout, consent_at,
                 source, stamp, consent_at, stamp, encode_areas(sub.areas))
                for sub in sorted(plan.created, key=lambda sub: sub.id)])
            conn.executemany(ACTIVATE, [(stamp, source, stamp, stamp, sub.id)
                                         for sub in plan.activated])
        return plan.results


# A batch's keys go in as one JSON array (json_each): one parameter whatever the batch's
# size, so no bound-parameter limit is reached.
def _rows_by_key(conn: sqlite3.Connection, keys: set[str]) -> dict[str, Subscriber]:
    rows = conn.execute("SELECT * FROM subscribers WHERE email_key IN "
                        "(SELECT value FROM json_each(?))", (json.dumps(sorted(keys)),))
    return {row["email_key"]: read_subscriber(row) for row in rows}


def _suppressed_among(conn: sqlite3.Connection, hashes: set[str]) -> set[str]:
    return {row[0] for row in conn.execute(
        "SELECT email_hash FROM suppressions WHERE email_hash IN "
        "(SELECT value FROM json_each(?))", (json.dumps(sorted(hashes)),))}
