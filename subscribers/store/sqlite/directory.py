""":class:`~subscribers.store.Directory`, :class:`~subscribers.store.Imports` and
:class:`~subscribers.store.Interests` on SQLite. Uniqueness and every status change are
decided inside one write transaction (IMMEDIATE), so two writers cannot both decide from one
read; an import's batch is one transaction, whole or absent.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from subscribers.errors import UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    LAYOUTS,
    STATUSES,
    AddResult,
    NewSubscriber,
    Subscriber,
    email_key,
    normalise_email,
)
from subscribers.store.rules import (
    MAIL_EVENTS,
    MailState,
    after_mail_event,
    catalog_names,
    check_known,
    check_new_status,
    decode_areas,
    encode_areas,
    encode_time,
    plan_additions,
    status_counts,
    suppression_hash,
)
from subscribers.store.sqlite.core import SqliteCore, read_subscriber, row_by_email, row_by_id

# Written holding the write lock since the reads that decided it: a conflict is a bug.
_INSERT_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

_ACTIVATE = """
    UPDATE subscribers SET status = 'active', consent_at = ?, consent_source = ?,
                           confirmed_at = ?, updated_at = ?
    WHERE id = ? AND status = 'pending'"""


class SqliteDirectory(SqliteCore):
    """Who is on the list (one by one and a batch at a time), and the areas they follow."""

    atomic_batches = True

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """:meth:`add_many` of one entry: the same transaction decides it."""
        return self.add_many([NewSubscriber(email, layout, tuple(areas))], status=status,
                             source=source, now=now)[0]

    def get(self, subscriber_id: str) -> Subscriber | None:
        with self._using() as conn:
            row = row_by_id(conn, subscriber_id)
        return read_subscriber(row) if row else None

    def find(self, email: str) -> Subscriber | None:
        with self._using() as conn:
            row = row_by_email(conn, normalise_email(email))
        return read_subscriber(row) if row else None

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Keyset pagination (``id > last``), not one long cursor: the lock is never held
        while the caller works on a row."""
        check_known("status", STATUSES, status)
        if batch < 1:
            raise ValueError("batch must be at least 1")
        last = ""
        while True:
            if status is None:
                rows = self._rows("SELECT * FROM subscribers WHERE id > ? ORDER BY id LIMIT ?",
                                  (last, batch))
            else:
                rows = self._rows("SELECT * FROM subscribers WHERE status = ? AND id > ? "
                                  "ORDER BY id LIMIT ?", (status, last, batch))
            yield from map(read_subscriber, rows)
            if len(rows) < batch:
                return
            last = rows[-1]["id"]

    def count_by(self) -> dict[tuple[str, str], int]:
        rows = self._rows("SELECT status, layout, count(*) FROM subscribers "
                          "GROUP BY status, layout ORDER BY status, layout")
        return {(status, layout): n for status, layout, n in rows}

    def count_by_status(self) -> dict[str, int]:
        return status_counts(self.count_by())

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        check_known("status", STATUSES, status, only_from)
        with self._transaction() as conn:
            current = _known(conn, subscriber_id)
            if current.status == status or only_from not in (None, current.status):
                return current
            stamp = encode_time(now)
            if status == "active":
                conn.execute("UPDATE subscribers SET confirmed_at = ?, consent_at = ?, "
                             "consent_source = coalesce(?, consent_source), consent_ip = ?, "
                             "transient_bounces = 0 WHERE id = ?",
                             (stamp, stamp, source, client, subscriber_id))
            conn.execute("UPDATE subscribers SET status = ?, updated_at = ? WHERE id = ?",
                         (status, stamp, subscriber_id))
            return _known(conn, subscriber_id)

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        check_known("layout", LAYOUTS, layout)
        stored = None if areas is None else encode_areas(areas)
        with self._transaction() as conn:
            conn.execute("UPDATE subscribers SET layout = ?, areas = coalesce(?, areas), "
                         "updated_at = ? WHERE id = ?",
                         (layout, stored, encode_time(now), subscriber_id))
            return _known(conn, subscriber_id)

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A subscriber not ``active`` takes the layout and areas asked for; an active one
        is never changed here (the request carries no proof that it comes from them)."""
        check_new_status(layout, "pending")
        entry = NewSubscriber(normalise_email(email), layout, tuple(areas))
        with self._transaction() as conn:
            [result] = _add(conn, [(entry.email, entry)], status="pending", source=source,
                            now=now)
            if result.subscriber is None or result.created:
                return result
            conn.execute("UPDATE subscribers SET layout = :layout, areas = :areas, "
                         "updated_at = :now WHERE id = :id AND status != 'active' "
                         "AND (layout != :layout OR areas != :areas)",
                         {"layout": layout, "areas": encode_areas(entry.areas),
                          "now": encode_time(now), "id": result.subscriber.id})
            return AddResult(result.outcome, _known(conn, result.subscriber.id))

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """rules.after_mail_event, read and written in one write transaction; a delivery
        leaves ``updated_at`` as it was."""
        check_known("mail event", MAIL_EVENTS, kind)
        if transient_limit < 1:
            raise ValueError("transient_limit must be at least 1")
        at = None if occurred_at is None else encode_time(occurred_at)
        with self._transaction() as conn:
            row = row_by_id(conn, subscriber_id)
            if row is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
            before = MailState(row["status"], row["transient_bounces"], row["mail_event_at"])
            after = after_mail_event(before, kind, transient_limit=transient_limit,
                                     occurred_at=at)
            current = read_subscriber(row)
            if after == before:
                return current
            updated = current.updated_at if kind == "delivery" else now.astimezone(UTC)
            conn.execute("UPDATE subscribers SET status = ?, transient_bounces = ?, "
                         "mail_event_at = ?, updated_at = ? WHERE id = ?",
                         (after.status, after.transient_bounces, after.mail_event_at,
                          encode_time(updated), subscriber_id))
        return replace(current, status=after.status, transient_bounces=after.transient_bounces,
                       updated_at=updated)

    def remove(self, email: str, now: datetime) -> bool:
        """The ledger rows go too (a failure's ``reason`` can quote the address), and
        ``secure_delete`` plus a WAL checkpoint keep the address out of the files."""
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
        self._rows("PRAGMA wal_checkpoint(TRUNCATE)")
        return True

    def is_suppressed(self, email: str) -> bool:
        return self._row("SELECT 1 FROM suppressions WHERE email_hash = ?",
                         (suppression_hash(normalise_email(email)),)) is not None

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """One IMMEDIATE transaction, so what is read stays true until the writes."""
        for entry in entries:
            check_new_status(entry.layout, status)
        normals = [(normalise_email(entry.email), entry) for entry in entries]
        with self._transaction() as conn:
            return _add(conn, normals, status=status, source=source, now=now)

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """Stored areas are canonical text, so equal choices group in one DISTINCT."""
        rows = self._rows("SELECT DISTINCT layout, areas FROM subscribers "
                          "WHERE status = 'active' AND areas != ''")
        return sorted({(layout, areas) for layout, text in rows
                       if (areas := decode_areas(text))})

    def known_areas(self) -> tuple[str, ...]:
        return tuple(name for (name,) in self._rows("SELECT name FROM area_catalog ORDER BY name"))

    def note_areas(self, names: Iterable[str]) -> None:
        cleaned = sorted(catalog_names(names))
        with self._transaction() as conn:
            conn.executemany("INSERT INTO area_catalog (name) VALUES (?) "
                             "ON CONFLICT (name) DO NOTHING", [(name,) for name in cleaned])


def _known(conn: sqlite3.Connection, subscriber_id: str) -> Subscriber:
    row = row_by_id(conn, subscriber_id)
    if row is None:
        raise UnknownSubscriber(subscriber_id=subscriber_id)
    return read_subscriber(row)


def _add(conn: sqlite3.Connection, normals: Sequence[tuple[str, NewSubscriber]], *,
         status: str, source: str, now: datetime) -> list[AddResult]:
    """rules.plan_additions on what the store holds, written: inside a write transaction.

    A batch's keys go in as one JSON array (json_each): one parameter whatever the batch's
    size, so no bound-parameter limit is reached."""
    keys = json.dumps([email_key(normal) for normal, _ in normals])
    hashes = json.dumps([suppression_hash(normal) for normal, _ in normals])
    existing = {row["email_key"]: read_subscriber(row) for row in conn.execute(
        "SELECT * FROM subscribers WHERE email_key IN (SELECT value FROM json_each(?))", (keys,))}
    suppressed = {email_hash for (email_hash,) in conn.execute(
        "SELECT email_hash FROM suppressions WHERE email_hash IN (SELECT value FROM json_each(?))",
        (hashes,))}
    plan = plan_additions(normals, status=status, source=source, now=now, existing=existing,
                          suppressed=suppressed)
    stamp = encode_time(now)
    consent_at = stamp if status == "active" else None
    # In id order: a batch's ids are neighbours (batch_subscriber_ids), so the inserts walk
    # a few pages of the id-ordered table once.
    conn.executemany(_INSERT_SUBSCRIBER, [
        (sub.id, sub.email, email_key(sub.email), status, sub.layout, consent_at, source,
         stamp, consent_at, stamp, encode_areas(sub.areas))
        for sub in sorted(plan.created, key=lambda sub: sub.id)])
    conn.executemany(_ACTIVATE, [(stamp, source, stamp, stamp, sub.id)
                                for sub in plan.activated])
    return plan.results
