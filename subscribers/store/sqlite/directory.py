""":class:`~subscribers.store.Directory` on SQLite: uniqueness and every status change are
one statement inside a write transaction, so two writers cannot both decide from one read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import datetime

from subscribers.errors import UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    FINAL_STATUSES,
    LAYOUTS,
    STATUSES,
    AddOutcome,
    AddResult,
    Subscriber,
    email_key,
    new_subscriber_id,
    normalise_email,
)
from subscribers.store.rules import (
    BOUNCEABLE,
    MAIL_EVENTS,
    check_new_status,
    encode_areas,
    encode_time,
    status_counts,
    suppression_hash,
)
from subscribers.store.sqlite.core import SqliteCore
from subscribers.store.sqlite.rows import (
    ACTIVATE,
    read_subscriber,
    row_by_email,
    row_by_id,
    suppressed,
)

_INSERT_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (email_key) DO NOTHING"""


class SqliteDirectory(SqliteCore):
    """The list's subscribers in the ``subscribers`` and ``suppressions`` tables."""

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """Uniqueness is the database's: the insert does nothing if the address exists in
        any case (a UNIQUE index), and only then is the row read, in the same transaction."""
        check_new_status(layout, status)
        normal = normalise_email(email)
        stamp = encode_time(now)
        with self._transaction() as conn:
            if suppressed(conn, normal):
                return AddResult(AddOutcome.SUPPRESSED, None)
            inserted = _insert(conn, normal, status, layout, source, stamp, areas)
            existing = self._by_email(conn, normal)
            if inserted:
                return AddResult(AddOutcome.CREATED, existing)
            if existing.status in FINAL_STATUSES:
                return AddResult(AddOutcome.REFUSED, existing)
            if existing.status == "pending" and status == "active":
                conn.execute(ACTIVATE, (stamp, source, stamp, stamp, existing.id))
                return AddResult(AddOutcome.ACTIVATED, self._by_email(conn, normal))
            return AddResult(AddOutcome.EXISTING, existing)

    def get(self, subscriber_id: str) -> Subscriber | None:
        with self._using() as conn:
            row = row_by_id(conn, subscriber_id)
        return read_subscriber(row) if row else None

    def find(self, email: str) -> Subscriber | None:
        normal = normalise_email(email)
        with self._using() as conn:
            row = row_by_email(conn, normal)
        return read_subscriber(row) if row else None

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Keyset pagination (``id > last``), not one long cursor: the lock is never held
        while the caller works on a row."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        last = ""
        while True:
            with self._using() as conn:
                if status is None:
                    rows = conn.execute("SELECT * FROM subscribers WHERE id > ? "
                                        "ORDER BY id LIMIT ?", (last, batch)).fetchall()
                else:
                    rows = conn.execute("SELECT * FROM subscribers WHERE status = ? AND id > ? "
                                        "ORDER BY id LIMIT ?", (status, last, batch)).fetchall()
            yield from map(read_subscriber, rows)
            if len(rows) < batch:
                return
            last = rows[-1]["id"]

    def count_by(self) -> dict[tuple[str, str], int]:
        with self._using() as conn:
            rows = conn.execute("SELECT status, layout, count(*) FROM subscribers "
                                "GROUP BY status, layout ORDER BY status, layout").fetchall()
        return {(status, layout): n for status, layout, n in rows}

    def count_by_status(self) -> dict[str, int]:
        return status_counts(self.count_by())

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        if status not in STATUSES or (only_from is not None and only_from not in STATUSES):
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        with self._transaction() as conn:
            # Becoming active from another status is a new consent: its time, source and
            # client recorded, the transient bounces counted from 0 again.
            conn.execute(
                """
                UPDATE subscribers SET
                    confirmed_at = CASE WHEN :status = 'active' AND status != 'active'
                                        THEN :now ELSE confirmed_at END,
                    consent_at = CASE WHEN :status = 'active' AND status != 'active'
                                      THEN :now ELSE consent_at END,
                    consent_source = CASE WHEN :status = 'active' AND status != 'active'
                                               AND :source IS NOT NULL
                                          THEN :source ELSE consent_source END,
                    consent_ip = CASE WHEN :status = 'active' AND status != 'active'
                                      THEN :client ELSE consent_ip END,
                    transient_bounces = CASE WHEN :status = 'active' AND status != 'active'
                                             THEN 0 ELSE transient_bounces END,
                    updated_at = CASE WHEN status != :status THEN :now ELSE updated_at END,
                    status = :status
                WHERE id = :id AND (:only_from IS NULL OR status = :only_from)
                """,
                {"status": status, "now": encode_time(now), "source": source,
                 "client": client, "id": subscriber_id, "only_from": only_from},
            )
            row = row_by_id(conn, subscriber_id)
        if row is None:
            raise UnknownSubscriber(subscriber_id=subscriber_id)
        return read_subscriber(row)

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        stored = None if areas is None else encode_areas(areas)
        with self._transaction() as conn:
            conn.execute("UPDATE subscribers SET layout = ?, areas = coalesce(?, areas), "
                         "updated_at = ? WHERE id = ?",
                         (layout, stored, encode_time(now), subscriber_id))
            row = row_by_id(conn, subscriber_id)
        if row is None:
            raise UnknownSubscriber(subscriber_id=subscriber_id)
        return read_subscriber(row)

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A subscriber not ``active`` takes the layout and areas asked for; an active one
        is never changed here (the request carries no proof that it comes from them)."""
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        normal = normalise_email(email)
        stamp = encode_time(now)
        with self._transaction() as conn:
            if suppressed(conn, normal):
                return AddResult(AddOutcome.SUPPRESSED, None)
            if _insert(conn, normal, "pending", layout, source, stamp, areas):
                return AddResult(AddOutcome.CREATED, self._by_email(conn, normal))
            conn.execute("UPDATE subscribers SET layout = :layout, areas = :areas, "
                         "updated_at = :now WHERE email_key = :key AND status != 'active' "
                         "AND (layout != :layout OR areas != :areas)",
                         {"layout": layout, "areas": encode_areas(areas), "now": stamp,
                          "key": email_key(normal)})
            current = self._by_email(conn, normal)
        outcome = AddOutcome.REFUSED if current.status in FINAL_STATUSES else AddOutcome.EXISTING
        return AddResult(outcome, current)

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """rules.after_mail_event in SQL, one statement per kind."""
        if kind not in MAIL_EVENTS:
            raise ValueError(f"unknown mail event {kind!r}; known: {', '.join(MAIL_EVENTS)}")
        if transient_limit < 1:
            raise ValueError("transient_limit must be at least 1")
        # rules.BOUNCEABLE comes in as one JSON parameter.
        statements = {
            "bounce-permanent": (
                "UPDATE subscribers SET status = 'bounced', updated_at = :now "
                "WHERE id = :id AND status IN (SELECT value FROM json_each(:bounceable))"),
            "bounce-transient": (
                "UPDATE subscribers SET transient_bounces = transient_bounces + 1, "
                "status = CASE WHEN transient_bounces + 1 >= :limit "
                "              AND status IN (SELECT value FROM json_each(:bounceable)) "
                "              THEN 'bounced' ELSE status END, "
                "mail_event_at = coalesce(:at, mail_event_at), updated_at = :now "
                "WHERE id = :id "
                "AND (:at IS NULL OR mail_event_at IS NULL OR mail_event_at <= :at)"),
            "complaint": (
                "UPDATE subscribers SET status = 'complained', updated_at = :now "
                "WHERE id = :id AND status != 'complained'"),
            "delivery": (
                "UPDATE subscribers SET transient_bounces = 0, "
                "mail_event_at = coalesce(:at, mail_event_at) "
                "WHERE id = :id "
                "AND (:at IS NULL OR mail_event_at IS NULL OR mail_event_at <= :at) "
                "AND (transient_bounces != 0 OR :at IS NOT NULL)"),
        }
        params = {"now": encode_time(now), "id": subscriber_id, "limit": transient_limit,
                  "at": None if occurred_at is None else encode_time(occurred_at),
                  "bounceable": json.dumps(BOUNCEABLE)}
        with self._transaction() as conn:
            conn.execute(statements[kind], params)
            row = row_by_id(conn, subscriber_id)
        if row is None:
            raise UnknownSubscriber(subscriber_id=subscriber_id)
        return read_subscriber(row)

    def remove(self, email: str, now: datetime) -> bool:
        """The ledger rows go too (a failure's ``reason`` can quote the address), and
        ``secure_delete`` plus a WAL checkpoint keep the address out of the files (as far as
        other processes' open read transactions allow: the next checkpoint finishes it)."""
        normal = normalise_email(email)
        with self._transaction() as conn:
            row = row_by_email(conn, normal)
            if row is None:
                return False
            conn.execute("DELETE FROM ledger WHERE subscriber_id = ?", (row["id"],))
            conn.execute("DELETE FROM subscribers WHERE id = ?", (row["id"],))
            conn.execute("INSERT INTO suppressions (email_hash, created_at) VALUES (?, ?) "
                         "ON CONFLICT (email_hash) DO NOTHING",
                         (suppression_hash(normal), encode_time(now)))
        with self._using() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return True

    def is_suppressed(self, email: str) -> bool:
        normal = normalise_email(email)
        with self._using() as conn:
            return suppressed(conn, normal)


def _insert(conn: sqlite3.Connection, normal: str, status: str, layout: str, source: str,
            stamp: str, areas: Iterable[str]) -> bool:
    """A new subscriber unless the address is there in any case; whether it was inserted."""
    consent_at = stamp if status == "active" else None
    return conn.execute(
        _INSERT_SUBSCRIBER,
        (new_subscriber_id(), normal, email_key(normal), status, layout, consent_at, source,
         stamp, consent_at, stamp, encode_areas(areas)),
    ).rowcount == 1
