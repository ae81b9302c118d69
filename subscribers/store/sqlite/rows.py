"""How every role of the SQLite store reads a subscriber, so the roles read rows alike."""

from __future__ import annotations

import sqlite3

from subscribers.model import Subscriber, email_key
from subscribers.store.rules import decode_areas, decode_time, decode_time_or_none, suppression_hash

ACTIVATE = """
    UPDATE subscribers SET status = 'active', consent_at = ?, consent_source = ?,
                           confirmed_at = ?, updated_at = ?
    WHERE id = ? AND status = 'pending'"""


def row_by_email(conn: sqlite3.Connection, normal: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM subscribers WHERE email_key = ?",
                                           (email_key(normal),)).fetchone()
    return row


def row_by_id(conn: sqlite3.Connection, subscriber_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM subscribers WHERE id = ?",
                                           (subscriber_id,)).fetchone()
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
