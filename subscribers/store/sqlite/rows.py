"""What every role of the SQLite store reads a subscriber with: the query by address, the
activation of a pending one, the suppression check, and a row turned into a
:class:`~subscribers.model.Subscriber`. Written once so the roles read rows alike.
"""

from __future__ import annotations

import sqlite3

from subscribers.model import Subscriber, email_key
from subscribers.store.rules import decode_areas, decode_time, decode_time_or_none, suppression_hash

__all__ = ["ACTIVATE", "SUBSCRIBER_BY_KEY", "read_subscriber", "row_by_email", "suppressed"]

# Queries are written out whole (no string building), so each one can be read, and
# grepped, as SQLite runs it.
SUBSCRIBER_BY_KEY = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE email_key = ?"""
ACTIVATE = """
    UPDATE subscribers SET status = 'active', consent_at = ?, consent_source = ?,
                           confirmed_at = ?, updated_at = ?
    WHERE id = ? AND status = 'pending'"""


def row_by_email(conn: sqlite3.Connection, normal: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(SUBSCRIBER_BY_KEY, (email_key(normal),)).fetchone()
    return row



def suppressed(conn: sqlite3.Connection, normal: str) -> bool:
    return conn.execute("SELECT 1 FROM suppressions WHERE email_hash = ?",
                        (suppression_hash(normal),)).fetchone() is not None


def read_subscriber(row: sqlite3.Row) -> Subscriber:
    return Subscriber(
        id=row["id"],
        email=row["email"],
        status=row["status"],
        layout=row["layout"],
        consent_at=decode_time_or_none(row["consent_at"]),
        consent_source=row["consent_source"],
        created_at=decode_time(row["created_at"]),
        confirmed_at=decode_time_or_none(row["confirmed_at"]),
        updated_at=decode_time(row["updated_at"]),
        consent_ip=row["consent_ip"],
        transient_bounces=row["transient_bounces"],
        areas=decode_areas(row["areas"]),
    )
