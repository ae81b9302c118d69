""":class:`~subscribers.store.Imports` on SQLite: a batch of addresses decided by
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

__all__ = ["SqliteImports"]

# A batch's addresses and hashes go in as one JSON array (json_each): one parameter
# whatever the batch's size, so no query is built and no bound-parameter limit is reached.
_SUBSCRIBERS_BY_KEYS = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE email_key IN (SELECT value FROM json_each(?))"""
_SUPPRESSED_AMONG = """
    SELECT email_hash FROM suppressions WHERE email_hash IN (SELECT value FROM json_each(?))"""
# add_many holds the write lock from its reads to its writes: a conflict there is a bug.
_INSERT_NEW_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


class SqliteImports(SqliteCore):
    """Many addresses at once, one transaction a batch."""

    #: add_many stores a batch in one transaction.
    atomic_batches = True

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """:meth:`add` for each entry, as one write transaction: all of the batch is stored,
        or (an error, Ctrl-C, a full disk) none of it.

        Inside the transaction (IMMEDIATE: the write lock is held from the first read, so
        what is read stays true), the entries' suppression hashes and addresses are looked
        up with one query each, the outcomes decided in Python
        (:func:`~subscribers.store.rules.plan_additions`, the rules ``add`` keeps), and the
        new and activated rows written with one ``executemany`` each; one commit, one fsync.
        """
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
                for sub in sorted(plan.created, key=_by_id)])
            conn.executemany(ACTIVATE, [(stamp, source, stamp, stamp, sub.id)
                                         for sub in plan.activated])
        return plan.results



def _rows_by_key(conn: sqlite3.Connection, keys: set[str]) -> dict[str, Subscriber]:
    """The subscribers whose ``email_key`` is one of ``keys``, by key: one query."""
    rows = conn.execute(_SUBSCRIBERS_BY_KEYS, (json.dumps(sorted(keys)),)).fetchall()
    return {email_key(row["email"]): read_subscriber(row) for row in rows}


def _suppressed_among(conn: sqlite3.Connection, hashes: set[str]) -> set[str]:
    """Which of ``hashes`` the suppression list holds: one query."""
    return {row[0] for row in conn.execute(_SUPPRESSED_AMONG, (json.dumps(sorted(hashes)),))}


def _by_id(subscriber: Subscriber) -> str:
    return subscriber.id
