""":class:`~subscribers.store.Directory` on SQLite: who is on the list, their consent and
status, and the removed addresses. Uniqueness and every status change are one statement
inside a write transaction, so two writers cannot both decide from the same read.
"""

from __future__ import annotations

import json
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
from subscribers.store.sqlite.rows import ACTIVATE, read_subscriber, row_by_email, suppressed

__all__ = ["SqliteDirectory"]

# Queries are written out whole (no string building), so each one can be read, and
# grepped, as SQLite runs it.
_SUBSCRIBER_BY_ID = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE id = ?"""
_SUBSCRIBERS_AFTER = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE id > ? ORDER BY id LIMIT ?"""
_SUBSCRIBERS_WITH_STATUS_AFTER = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE status = ? AND id > ? ORDER BY id LIMIT ?"""
_INSERT_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (email_key) DO NOTHING"""


class SqliteDirectory(SqliteCore):
    """The list's subscribers in the ``subscribers`` and ``suppressions`` tables."""

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """Store ``email`` as a new subscriber, or say why not (see :class:`AddOutcome`).

        Uniqueness is the database's job (a UNIQUE index on the lower-cased address): the
        insert does nothing if the address exists, whatever its case, and only then is the
        existing row read, inside the same write transaction. ``status`` is ``pending``
        (a confirmation is still due) or ``active`` (consent already given: ``consent_at``
        is set to ``now``).
        """
        check_new_status(layout, status)
        normal = normalise_email(email)
        stamp = encode_time(now)
        consent_at = stamp if status == "active" else None
        with self._transaction() as conn:
            if suppressed(conn, normal):
                return AddResult(AddOutcome.SUPPRESSED, None)
            inserted = conn.execute(
                _INSERT_SUBSCRIBER,
                (new_subscriber_id(), normal, email_key(normal), status, layout, consent_at,
                 source, stamp, consent_at, stamp, encode_areas(areas)),
            ).rowcount
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
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
        return read_subscriber(row) if row else None

    def find(self, email: str) -> Subscriber | None:
        """The subscriber with this address in any case; InvalidAddress for non-addresses."""
        normal = normalise_email(email)
        with self._using() as conn:
            row = row_by_email(conn, normal)
        return read_subscriber(row) if row else None

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Every subscriber (with ``status``, if given) in id order, ``batch`` rows at a time.

        Keyset pagination (``id > last``) instead of one long cursor: memory stays flat
        whatever the list's size, the lock is never held while the caller works on a row,
        and rows changed meanwhile are read as they are when their batch is fetched.
        """
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        last = ""
        while True:
            with self._using() as conn:
                if status is None:
                    cursor = conn.execute(_SUBSCRIBERS_AFTER, (last, batch))
                else:
                    cursor = conn.execute(_SUBSCRIBERS_WITH_STATUS_AFTER, (status, last, batch))
                rows = cursor.fetchall()  # at most `batch` rows
            for row in rows:
                yield read_subscriber(row)
            if len(rows) < batch:
                return
            last = rows[-1]["id"]

    def count_by(self) -> dict[tuple[str, str], int]:
        """Subscribers per (status, layout), e.g. ``{("active", "zh-en"): 120, ...}``."""
        with self._using() as conn:
            rows = conn.execute("SELECT status, layout, count(*) FROM subscribers "
                                "GROUP BY status, layout ORDER BY status, layout").fetchall()
        return {(row[0], row[1]): row[2] for row in rows}

    def count_by_status(self) -> dict[str, int]:
        """Subscribers per status, every status present (0 if none): what a progress bar
        or a status line needs without adding up layouts."""
        return status_counts(self.count_by())

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        """Change a subscriber's status; UnknownSubscriber if there is none with this id.

        Becoming ``active`` from any other status is a confirmation: ``confirmed_at`` and
        ``consent_at`` are set to ``now`` and ``consent_source`` to ``source`` (if given).
        ``consent_ip`` to ``client`` (the address the confirmation came from, if known),
        and the count of transient bounces starts again from 0.
        Confirming an active subscriber again changes nothing (link scanners click first).
        This is the one way out of ``unsubscribed``/``bounced``/``complained``: call it only
        on the subscriber's own new consent, never from an import. With ``only_from`` the
        row changes only while its status is that one (the ``WHERE`` of the one statement);
        any other is returned as it is.
        """
        if status not in STATUSES or (only_from is not None and only_from not in STATUSES):
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        stamp = encode_time(now)
        with self._transaction() as conn:
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
                {"status": status, "now": stamp, "source": source, "client": client,
                 "id": subscriber_id, "only_from": only_from},
            )
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
        if row is None:
            raise UnknownSubscriber(subscriber_id=subscriber_id)
        return read_subscriber(row)

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        """Change the layout a subscriber reads, and the areas they follow unless ``areas``
        is None; UnknownSubscriber if there is none."""
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        stamp = encode_time(now)
        stored = None if areas is None else encode_areas(areas)
        with self._transaction() as conn:
            changed = conn.execute(
                "UPDATE subscribers SET layout = ?, areas = coalesce(?, areas), updated_at = ? "
                "WHERE id = ?",
                (layout, stored, stamp, subscriber_id),
            ).rowcount
            if not changed:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
        return read_subscriber(row)

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A sign-up someone asked for, before any consent (see
        :meth:`~subscribers.store.Directory.request_subscription`).

        Outcomes: ``CREATED`` (a new ``pending`` row), ``EXISTING`` (``pending`` or
        ``active``; a pending one takes the new layout), ``REFUSED`` (``unsubscribed``,
        ``bounced`` or ``complained``: still so, with the new layout, until the person
        confirms) and ``SUPPRESSED`` (removed: nothing stored). A subscriber who is not
        ``active`` takes the areas asked for with the layout. An ``active`` subscriber's
        layout and areas are never changed here: the request carries no proof that it comes
        from them.
        """
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        normal = normalise_email(email)
        stamp = encode_time(now)
        stored = encode_areas(areas)
        with self._transaction() as conn:
            if suppressed(conn, normal):
                return AddResult(AddOutcome.SUPPRESSED, None)
            inserted = conn.execute(
                _INSERT_SUBSCRIBER,
                (new_subscriber_id(), normal, email_key(normal), "pending", layout, None,
                 source, stamp, None, stamp, stored),
            ).rowcount
            if inserted:
                return AddResult(AddOutcome.CREATED, self._by_email(conn, normal))
            conn.execute("UPDATE subscribers SET layout = :layout, areas = :areas, "
                         "updated_at = :now WHERE email_key = :key AND status != 'active' "
                         "AND (layout != :layout OR areas != :areas)",
                         {"layout": layout, "areas": stored, "now": stamp,
                          "key": email_key(normal)})
            current = self._by_email(conn, normal)
        outcome = AddOutcome.REFUSED if current.status in FINAL_STATUSES else AddOutcome.EXISTING
        return AddResult(outcome, current)

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """Apply one SES event to a subscriber, atomically (see
        :data:`~subscribers.store.rules.MAIL_EVENTS`).

        ``complained`` is never overridden (the person said "spam": nothing we learn later
        about their mailbox makes mailing them right). A bounce never turns an
        ``unsubscribed`` address into ``bounced`` either: both stop mail, and the person's
        own choice is the better record. UnknownSubscriber if there is no such id.

        The count of transient bounces in a row depends on order, and SNS keeps none (it
        also redelivers an old message): a transient bounce or a delivery that happened
        (``occurred_at``) before the latest one applied to the address is ignored, so a
        replayed old delivery cannot wipe the count. Permanent bounces and complaints only
        ever stop mail, so they apply whenever they come.
        """
        if kind not in MAIL_EVENTS:
            raise ValueError(f"unknown mail event {kind!r}; known: {', '.join(MAIL_EVENTS)}")
        if transient_limit < 1:
            raise ValueError("transient_limit must be at least 1")
        # rules.after_mail_event in SQL; rules.BOUNCEABLE comes in as one JSON parameter.
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
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
            if row is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
        return read_subscriber(row)


    def remove(self, email: str, now: datetime) -> bool:
        """Erase a subscriber; True if there was one. The address stays refused for good.

        Deleted: the subscriber's row and **all its ledger rows** (a failure ``reason`` can
        quote the address; with the subscriber gone no later run could send to that id
        anyway, and each issue's ``send-report.json`` keeps the counts). Kept: one
        suppression entry, sha256 of the lower-cased address, so an import cannot bring
        it back. ``secure_delete`` zeroes the freed bytes and the write-ahead log is
        checkpointed and truncated, so the address is not left in the files either (as far
        as other processes' open read transactions allow: the next checkpoint finishes it).
        An address that is not stored is left alone (False), not suppressed.
        """
        normal = normalise_email(email)
        stamp = encode_time(now)
        with self._transaction() as conn:
            row = row_by_email(conn, normal)
            if row is None:
                return False
            conn.execute("DELETE FROM ledger WHERE subscriber_id = ?", (row["id"],))
            conn.execute("DELETE FROM subscribers WHERE id = ?", (row["id"],))
            conn.execute("INSERT INTO suppressions (email_hash, created_at) VALUES (?, ?) "
                         "ON CONFLICT (email_hash) DO NOTHING",
                         (suppression_hash(normal), stamp))
        with self._using() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return True

    def is_suppressed(self, email: str) -> bool:
        """Whether this address was removed (compared by hash; any case)."""
        normal = normalise_email(email)
        with self._using() as conn:
            return suppressed(conn, normal)
