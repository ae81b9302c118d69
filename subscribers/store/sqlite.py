"""The subscriber store in one SQLite file: :class:`SqliteStore`, for one machine.

It keeps every role of :class:`~subscribers.store.SubscriberStore` (the rules are there) in
``<[paths] data_dir>/subscribers.sqlite3``, WAL mode, the schema versioned by
:data:`MIGRATIONS` and brought up to date on open. Every ledger write is committed at once
and fsynced (``synchronous=FULL``), so a claim survives SIGKILL and a power cut; a claim is
one statement (an insert that does nothing if the row exists, or a compare-and-set update),
never a read followed by a write.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.resource import Resource
from subscribers.errors import StoreError, UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    FEEDBACK,
    FINAL_STATUSES,
    LAYOUTS,
    LEDGER_STATUSES,
    STATUSES,
    AddOutcome,
    AddResult,
    Lease,
    LedgerEntry,
    NewSubscriber,
    Subscriber,
    email_key,
    new_subscriber_id,
    normalise_email,
)
from subscribers.store.rules import (
    IN_FLIGHT_REASON,
    MAIL_EVENTS,
    catalog_names,
    check_new_status,
    decode_areas,
    decode_time,
    decode_time_or_none,
    encode_areas,
    encode_time,
    plan_additions,
    status_counts,
    suppression_hash,
)

if TYPE_CHECKING:
    from subscribers.shards import Shard

__all__ = [
    "FILE_NAME",
    "MIGRATIONS",
    "SqliteStore",
]

#: The store's file name inside ``[paths] data_dir``.
FILE_NAME = "subscribers.sqlite3"


#: The schema, one SQL script per version, applied in order on open. Version 1 is the whole
#: schema; a change appends a script (never edits one already released).
MIGRATIONS: tuple[str, ...] = (
    # 1 -------------------------------------------------------------------------------------
    """
    CREATE TABLE subscribers (
        id             TEXT PRIMARY KEY,
        email          TEXT NOT NULL,
        -- lower(email) computed in Python: SQLite's lower() folds ASCII only, and
        -- email-validator accepts internationalised local parts.
        email_key      TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN
                           ('pending', 'active', 'unsubscribed', 'bounced', 'complained')),
        layout         TEXT NOT NULL CHECK (layout IN ('zh-en', 'en-zh', 'zh', 'en')),
        consent_at     TEXT,
        consent_source TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        confirmed_at   TEXT,
        updated_at     TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX subscribers_email_key ON subscribers (email_key);
    CREATE INDEX subscribers_status ON subscribers (status, id);

    -- A removed address: only sha256 of its lower-cased normal form, so it can be refused
    -- later without being kept.
    CREATE TABLE suppressions (
        email_hash TEXT PRIMARY KEY,
        created_at TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE ledger (
        issue_id      TEXT NOT NULL,
        subscriber_id TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN
                          ('sending', 'sent', 'failed', 'unconfirmed')),
        message_id    TEXT,
        reason        TEXT,
        permanent     INTEGER NOT NULL DEFAULT 0,
        attempts      INTEGER NOT NULL DEFAULT 1,
        updated_at    TEXT NOT NULL,
        PRIMARY KEY (issue_id, subscriber_id)
    ) WITHOUT ROWID;
    CREATE INDEX ledger_subscriber ON ledger (subscriber_id);
    """,
    # 2 -------------------------------------------------------------------------------------
    # The subscription app: where consent came from, transient bounces in a row, messages
    # already handled (SNS deliveries, inbound mails), and the rate limits of /subscribe.
    """
    ALTER TABLE subscribers ADD COLUMN consent_ip TEXT;
    ALTER TABLE subscribers ADD COLUMN transient_bounces INTEGER NOT NULL DEFAULT 0;

    -- A key per message handled once (``sns:<MessageId>``, ``mail:<object key>``).
    CREATE TABLE seen (
        key TEXT PRIMARY KEY,
        at  TEXT NOT NULL
    ) WITHOUT ROWID;

    -- Fixed-window counters: ``key`` is a hash (an address or a client is never stored here).
    CREATE TABLE quotas (
        key          TEXT PRIMARY KEY,
        window_start TEXT NOT NULL,
        count        INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    # 3 -------------------------------------------------------------------------------------
    # Production: bounces and complaints per issue (found by SES's message id) and the
    # leases that keep two runs of one issue (or shard) from sending side by side.
    """
    ALTER TABLE ledger ADD COLUMN feedback TEXT CHECK (feedback IN ('bounce', 'complaint'));
    CREATE INDEX ledger_message_id ON ledger (message_id) WHERE message_id IS NOT NULL;

    CREATE TABLE leases (
        name        TEXT PRIMARY KEY,
        owner       TEXT NOT NULL,
        acquired_at TEXT NOT NULL,
        expires_at  TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # 4 -------------------------------------------------------------------------------------
    # When the latest transient bounce or delivery counted for an address happened (SES's
    # own time), so an older event that arrives late (SNS does not keep order, and
    # redelivers) cannot undo a newer one.
    """
    ALTER TABLE subscribers ADD COLUMN mail_event_at TEXT;
    """,
    # 5 -------------------------------------------------------------------------------------
    # Whether a ``sending`` claim's message reached the transport: a claim a crash left
    # before that is released, not withheld as unconfirmed. Rows of older files count as
    # handed over (their fate is unknown).
    """
    ALTER TABLE ledger ADD COLUMN handed_over INTEGER NOT NULL DEFAULT 1;
    """,
    # 6 -------------------------------------------------------------------------------------
    # Interests: the areas a subscriber follows (rules.encode_areas: '' for none, else a
    # JSON array), and the catalog of areas published issues held (what a reader may pick).
    """
    ALTER TABLE subscribers ADD COLUMN areas TEXT NOT NULL DEFAULT '';
    CREATE INDEX subscribers_choices ON subscribers (status, layout, areas) WHERE areas != '';

    CREATE TABLE area_catalog (
        name TEXT PRIMARY KEY
    ) WITHOUT ROWID;
    """,
)

# Queries are written out whole (no string building), so each one can be read, and
# grepped, as SQLite runs it.
_SUBSCRIBER_BY_ID = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE id = ?"""
# A batch's addresses and hashes go in as one JSON array (json_each): one parameter
# whatever the batch's size, so no query is built and no bound-parameter limit is reached.
_SUBSCRIBERS_BY_KEYS = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE email_key IN (SELECT value FROM json_each(?))"""
_SUPPRESSED_AMONG = """
    SELECT email_hash FROM suppressions WHERE email_hash IN (SELECT value FROM json_each(?))"""
_SUBSCRIBER_BY_KEY = """
    SELECT id, email, status, layout, consent_at, consent_source, created_at, confirmed_at,
           updated_at, consent_ip, transient_bounces, areas
    FROM subscribers WHERE email_key = ?"""
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
# add_many holds the write lock from its reads to its writes: a conflict there is a bug.
_INSERT_NEW_SUBSCRIBER = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at, areas)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_ACTIVATE = """
    UPDATE subscribers SET status = 'active', consent_at = ?, consent_source = ?,
                           confirmed_at = ?, updated_at = ?
    WHERE id = ? AND status = 'pending'"""
_CLAIM = """
    INSERT INTO ledger (issue_id, subscriber_id, status, permanent, attempts, updated_at,
                        handed_over)
    VALUES (?, ?, 'sending', 0, 1, ?, 0)
    ON CONFLICT (issue_id, subscriber_id) DO NOTHING"""
_TAKE_OVER_UNCONFIRMED_OR_TEMPORARY = """
    UPDATE ledger SET status = 'sending', message_id = NULL, reason = NULL, permanent = 0,
                      attempts = attempts + 1, updated_at = ?, handed_over = 0
    WHERE issue_id = ? AND subscriber_id = ?
      AND (status = 'unconfirmed' OR (status = 'failed' AND permanent = 0))"""
_TAKE_OVER_TEMPORARY = """
    UPDATE ledger SET status = 'sending', message_id = NULL, reason = NULL, permanent = 0,
                      attempts = attempts + 1, updated_at = ?, handed_over = 0
    WHERE issue_id = ? AND subscriber_id = ? AND status = 'failed' AND permanent = 0"""
# An outcome is recorded even without a claim row (the transport's answer is the truth)...
_RECORD_SENT = """
    INSERT INTO ledger (issue_id, subscriber_id, status, message_id, reason, permanent,
                        attempts, updated_at)
    VALUES (?, ?, 'sent', ?, NULL, 0, 1, ?)
    ON CONFLICT (issue_id, subscriber_id) DO UPDATE SET
        status = 'sent', message_id = excluded.message_id, reason = NULL, permanent = 0,
        updated_at = excluded.updated_at"""
# ...but a failure never overwrites a delivery.
_RECORD_NOT_SENT = """
    INSERT INTO ledger (issue_id, subscriber_id, status, message_id, reason, permanent,
                        attempts, updated_at)
    VALUES (?, ?, ?, NULL, ?, ?, 1, ?)
    ON CONFLICT (issue_id, subscriber_id) DO UPDATE SET
        status = excluded.status, message_id = NULL, reason = excluded.reason,
        permanent = excluded.permanent, updated_at = excluded.updated_at
    WHERE ledger.status != 'sent'"""
#: A bounce or complaint on one ledger row; a complaint outranks a bounce.
_SET_FEEDBACK = ("UPDATE ledger SET feedback = ? WHERE issue_id = ? AND subscriber_id = ? "
                 "AND (feedback IS NULL OR ? = 'complaint')")
_LEDGER = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? ORDER BY subscriber_id"""
_LEDGER_ENTRY = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? AND subscriber_id = ?"""
_LEDGER_WITH_STATUS = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at
    FROM ledger WHERE issue_id = ? AND status = ? ORDER BY subscriber_id"""



class SqliteStore(Resource):
    """:class:`~subscribers.store.SubscriberStore` on one SQLite file (WAL mode).

    One connection, guarded by a lock: SQLite serialises writers anyway, each call holds
    the lock for well under a millisecond of work, and a single connection can be closed
    from whichever thread owns the store (per-thread connections cannot). Other processes
    use their own connections; ``busy_timeout`` makes them wait for each other's
    transactions instead of failing.
    """

    #: Handled-message keys stay until :meth:`purge_seen` drops them (DynamoDB's TTL
    #: expires its own).
    expires_by_itself = False
    #: add_many stores a batch in one transaction.
    atomic_batches = True

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        """Use :meth:`open`; this only wraps a connection that is already migrated."""
        self.path = path
        self._conn = connection
        self._lock = threading.Lock()

    # -- opening and closing -------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, timeout: float = 10.0) -> SqliteStore:
        """Open (creating folder and file if needed) and bring the schema up to date.

        ``timeout`` is how long (seconds) to wait for another process's transaction.
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(path, f"cannot create its folder: {exc.strerror or exc}") from exc
        try:
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(path, _describe(exc, timeout)) from exc
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a committed claim survives a power cut too, or a resend could follow.
            conn.execute("PRAGMA synchronous = FULL")
            # Deleted rows are overwritten with zeros: ``remove`` really erases the address.
            conn.execute("PRAGMA secure_delete = ON")
            _migrate(conn, path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not _is_storage_error(exc):
                raise
            raise StoreError(path, _describe(exc, timeout)) from exc
        except BaseException:
            conn.close()
            raise
        return cls(path, conn)

    def close(self) -> None:
        """Close the connection (idempotent). Committed work is already on disk."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, with storage failures turned into StoreError."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.DatabaseError as exc:
                if not _is_storage_error(exc):
                    raise
                raise StoreError(self.path, _describe(exc)) from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, taken up front (IMMEDIATE) so reads inside it stay true."""
        with self._using() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _by_email(self, conn: sqlite3.Connection, normal: str) -> Subscriber:
        """The subscriber just inserted or found under ``normal`` in this write transaction.
        None there is a database changed behind our back (a trigger, a hand edit): said as a
        store error, not an AttributeError."""
        row = _row_by_email(conn, normal)
        if row is None:
            raise StoreError(self.path, "a subscriber written in this transaction is gone")
        return _subscriber(row)

    # -- subscribers ---------------------------------------------------------------------

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
            if _suppressed(conn, normal):
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
                conn.execute(_ACTIVATE, (stamp, source, stamp, stamp, existing.id))
                return AddResult(AddOutcome.ACTIVATED, self._by_email(conn, normal))
            return AddResult(AddOutcome.EXISTING, existing)

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
            conn.executemany(_ACTIVATE, [(stamp, source, stamp, stamp, sub.id)
                                         for sub in plan.activated])
        return plan.results

    def get(self, subscriber_id: str) -> Subscriber | None:
        with self._using() as conn:
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
        return _subscriber(row) if row else None

    def find(self, email: str) -> Subscriber | None:
        """The subscriber with this address in any case; InvalidAddress for non-addresses."""
        normal = normalise_email(email)
        with self._using() as conn:
            row = _row_by_email(conn, normal)
        return _subscriber(row) if row else None

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
                yield _subscriber(row)
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
                   source: str | None = None, client: str | None = None) -> Subscriber:
        """Change a subscriber's status; UnknownSubscriber if there is none with this id.

        Becoming ``active`` from any other status is a confirmation: ``confirmed_at`` and
        ``consent_at`` are set to ``now`` and ``consent_source`` to ``source`` (if given).
        ``consent_ip`` to ``client`` (the address the confirmation came from, if known),
        and the count of transient bounces starts again from 0.
        Confirming an active subscriber again changes nothing (link scanners click first).
        This is the one way out of ``unsubscribed``/``bounced``/``complained``: call it only
        on the subscriber's own new confirmation, never from an import.
        """
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        stamp = encode_time(now)
        with self._transaction() as conn:
            changed = conn.execute(
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
                WHERE id = :id
                """,
                {"status": status, "now": stamp, "source": source, "client": client,
                 "id": subscriber_id},
            ).rowcount
            if not changed:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
        return _subscriber(row)

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
        return _subscriber(row)

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
            if _suppressed(conn, normal):
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
        statements = {
            "bounce-permanent": (
                "UPDATE subscribers SET status = 'bounced', updated_at = :now "
                "WHERE id = :id AND status IN ('pending', 'active')"),
            "bounce-transient": (
                "UPDATE subscribers SET transient_bounces = transient_bounces + 1, "
                "status = CASE WHEN transient_bounces + 1 >= :limit "
                "              AND status IN ('pending', 'active') "
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
                  "at": None if occurred_at is None else encode_time(occurred_at)}
        with self._transaction() as conn:
            conn.execute(statements[kind], params)
            row = conn.execute(_SUBSCRIBER_BY_ID, (subscriber_id,)).fetchone()
            if row is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
        return _subscriber(row)

    # -- interests -----------------------------------------------------------------------

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct (layout, areas) of active subscribers who follow any area, sorted:
        one ``SELECT DISTINCT`` (stored areas are canonical text, so equal choices group)."""
        with self._using() as conn:
            rows = conn.execute("SELECT DISTINCT layout, areas FROM subscribers "
                                "WHERE status = 'active' AND areas != ''").fetchall()
        return sorted({(row[0], areas) for row in rows if (areas := decode_areas(row[1]))})

    def known_areas(self) -> tuple[str, ...]:
        """Every area in the catalog, sorted."""
        with self._using() as conn:
            rows = conn.execute("SELECT name FROM area_catalog ORDER BY name").fetchall()
        return tuple(row[0] for row in rows)

    def note_areas(self, names: Iterable[str]) -> None:
        """Add the names to the catalog (an insert that does nothing for a known one)."""
        cleaned = sorted(catalog_names(names))
        if not cleaned:
            return
        with self._transaction() as conn:
            conn.executemany("INSERT INTO area_catalog (name) VALUES (?) "
                             "ON CONFLICT (name) DO NOTHING", [(name,) for name in cleaned])

    # -- handled keys ----------------------------------------------------------------------

    def first_time(self, key: str, now: datetime) -> bool:
        """Record ``key`` as handled; True for exactly one caller (an insert that does
        nothing if the key exists). SNS delivers at least once, and an inbound mail can be
        picked up again after a crash: this makes handling them idempotent."""
        with self._using() as conn:
            return conn.execute("INSERT INTO seen (key, at) VALUES (?, ?) "
                                "ON CONFLICT (key) DO NOTHING",
                                (key, encode_time(now))).rowcount == 1

    def forget(self, key: str) -> None:
        """Undo :meth:`first_time` after the handling failed, so a redelivery is taken."""
        with self._using() as conn:
            conn.execute("DELETE FROM seen WHERE key = ?", (key,))

    def purge_seen(self, before: datetime) -> int:
        """Drop keys recorded before ``before``; how many. The webhook refuses messages
        older than that window, so a purged key cannot be replayed."""
        with self._using() as conn:
            return conn.execute("DELETE FROM seen WHERE at < ?", (encode_time(before),)).rowcount

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """One use of ``key`` in a fixed window of ``window``; False (nothing counted) once
        ``limit`` uses fall in it. One upsert, so concurrent callers cannot both take the
        last use. ``key`` should be a hash: it is stored."""
        if limit < 1 or window <= timedelta(0):
            raise ValueError("limit must be at least 1 and window positive")
        stamp, start = encode_time(now), encode_time(now - window)
        with self._using() as conn:
            return conn.execute(
                """
                INSERT INTO quotas (key, window_start, count) VALUES (:key, :now, 1)
                ON CONFLICT (key) DO UPDATE SET
                    window_start = CASE WHEN window_start <= :start THEN :now
                                        ELSE window_start END,
                    count = CASE WHEN window_start <= :start THEN 1 ELSE count + 1 END
                WHERE window_start <= :start OR count < :limit
                """,
                {"key": key, "now": stamp, "start": start, "limit": limit},
            ).rowcount == 1

    def return_quota(self, key: str) -> None:
        """Give back one use of ``key``: the confirmation mail it paid for was not sent, and
        the person's retry must not find the day's allowance spent on our failures."""
        with self._using() as conn:
            conn.execute("UPDATE quotas SET count = count - 1 WHERE key = ? AND count > 0",
                         (key,))

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
            row = _row_by_email(conn, normal)
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
            return _suppressed(conn, normal)

    # -- ledger ----------------------------------------------------------------------------

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        """Take (issue, subscriber) for sending, before the transport is called.

        True for exactly one caller, across threads and processes: the row is created as
        ``sending`` by an insert that does nothing if it exists. With ``retry`` (the send
        loop's ``--resend-unconfirmed``) an ``unconfirmed`` row or a temporary failure is
        taken over instead; with ``retry_temporary`` only a temporary failure is. Taking
        over is one compare-and-set update that adds one to ``attempts``. ``sent``,
        ``sending`` and permanent failures are never taken.
        """
        stamp = encode_time(now)
        with self._using() as conn:
            if conn.execute(_CLAIM, (issue_id, subscriber_id, stamp)).rowcount == 1:
                return True
            if retry:
                take_over = _TAKE_OVER_UNCONFIRMED_OR_TEMPORARY
            elif retry_temporary:
                take_over = _TAKE_OVER_TEMPORARY
            else:
                return False
            return conn.execute(take_over, (stamp, issue_id, subscriber_id)).rowcount == 1

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        """The transport took the message and called it ``message_id``.

        Recorded whatever the row said before (even a row another run had expired to
        ``unconfirmed``): the transport's answer is the truth, and ``sent`` is final.
        """
        with self._using() as conn:
            conn.execute(_RECORD_SENT, (issue_id, subscriber_id, message_id, encode_time(now)))

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        """The transport refused the message; ``permanent`` if this recipient never will
        take it. A ``sent`` row is never downgraded."""
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        """The transport may have taken it (a timeout): never re-sent without ``retry``.
        A ``sent`` row is never downgraded."""
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with self._using() as conn:
            conn.execute(_RECORD_NOT_SENT, (issue_id, subscriber_id, status, reason,
                                            int(permanent), encode_time(now)))

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        """Drop a ``sending`` claim whose message never reached the transport (the run
        stopped first), so the next run sends it normally. True if a claim was dropped."""
        with self._using() as conn:
            return conn.execute(
                "DELETE FROM ledger WHERE issue_id = ? AND subscriber_id = ? "
                "AND status = 'sending'", (issue_id, subscriber_id),
            ).rowcount == 1

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """The claim's message goes to the transport now (``handed``), or came back
        untaken (a temporary failure, before the sender waits to retry it).

        Written right before the transport call, so that a crash before it leaves a claim
        :meth:`expire_in_flight` can release: only a message that may have left is ever
        withheld as ``unconfirmed``.
        """
        with self._using() as conn:
            conn.execute("UPDATE ledger SET handed_over = ? WHERE issue_id = ? AND "
                         "subscriber_id = ? AND status = 'sending'",
                         (int(handed), issue_id, subscriber_id))

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """Settle every ``sending`` row of ``issue_id``; how many became ``unconfirmed``.

        Call it at the start of a run, while holding the run's lease: a row still
        ``sending`` then belongs to an earlier run that crashed. If its message was never
        handed over, nothing left: the claim is dropped and this run sends it. If it was,
        the transport may have taken it, so it becomes ``unconfirmed`` and is not sent
        again without asking. With ``shard``, only that shard's rows: the other shards'
        runs may be sending right now.
        """
        stamp = encode_time(now)
        with self._transaction() as conn:
            rows = [(row[0], bool(row[1])) for row in conn.execute(
                "SELECT subscriber_id, handed_over FROM ledger "
                "WHERE issue_id = ? AND status = 'sending'", (issue_id,))
                if shard is None or row[0] in shard]
            conn.executemany(
                "DELETE FROM ledger WHERE issue_id = ? AND subscriber_id = ? "
                "AND status = 'sending' AND handed_over = 0",
                [(issue_id, sid) for sid, handed in rows if not handed])
            handed_over = [sid for sid, handed in rows if handed]
            conn.executemany(
                "UPDATE ledger SET status = 'unconfirmed', reason = ?, updated_at = ? "
                "WHERE issue_id = ? AND subscriber_id = ? AND status = 'sending'",
                [(IN_FLIGHT_REASON, stamp, issue_id, sid) for sid in handed_over])
            return len(handed_over)

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

    # -- leases ----------------------------------------------------------------------------

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """Take the lease unless another owner holds it unexpired; extend it if ``owner``
        holds it. One upsert whose WHERE is the condition, so two takers cannot both win,
        and an expired lease (its holder died without releasing it) is taken over."""
        stamp, until = encode_time(now), encode_time(now + ttl)
        with self._transaction() as conn:
            conn.execute(
                """
                INSERT INTO leases (name, owner, acquired_at, expires_at)
                VALUES (:name, :owner, :now, :until)
                ON CONFLICT (name) DO UPDATE SET
                    acquired_at = CASE WHEN owner = :owner THEN acquired_at ELSE :now END,
                    owner = :owner, expires_at = :until
                WHERE owner = :owner OR expires_at <= :now
                """, {"name": name, "owner": owner, "now": stamp, "until": until})
            row = conn.execute("SELECT name, owner, acquired_at, expires_at FROM leases "
                               "WHERE name = ?", (name,)).fetchone()
        return Lease(row[0], row[1], decode_time(row[2]), decode_time(row[3]))

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        with self._using() as conn:
            return conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ?",
                (encode_time(now + ttl), name, owner)).rowcount == 1

    def release_lease(self, name: str, owner: str) -> None:
        with self._using() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        """The ledger of one issue (rows with ``status`` only, if given), by subscriber id."""
        if status is not None and status not in LEDGER_STATUSES:
            raise ValueError(f"unknown ledger status {status!r}")
        with self._using() as conn:
            if status is None:
                rows = conn.execute(_LEDGER, (issue_id,)).fetchall()
            else:
                rows = conn.execute(_LEDGER_WITH_STATUS, (issue_id, status)).fetchall()
        return {row["subscriber_id"]: _entry(row) for row in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        """One (issue, subscriber) row, or None if it was never claimed. For reports only:
        deciding whether to send is :meth:`claim`'s job, never a read of this."""
        with self._using() as conn:
            row = conn.execute(_LEDGER_ENTRY, (issue_id, subscriber_id)).fetchone()
        return _entry(row) if row else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        """Rows per ledger status for one issue; every status is present (0 if none)."""
        with self._using() as conn:
            rows = conn.execute("SELECT status, count(*) FROM ledger WHERE issue_id = ? "
                                "GROUP BY status", (issue_id,)).fetchall()
        counts = dict.fromkeys(LEDGER_STATUSES, 0)
        counts.update({row[0]: row[1] for row in rows})
        return counts


# -- schema ----------------------------------------------------------------------------------

def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations the file lacks, all in one write transaction.

    BEGIN IMMEDIATE makes two processes opening a fresh file at once take turns: the second
    finds the version the first wrote and has nothing to do.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
        if current > len(MIGRATIONS):
            raise StoreError(path, f"schema version {current} is newer than this program "
                             f"knows ({len(MIGRATIONS)}): upgrade vllm-pr-weekly")
        for script in MIGRATIONS[current:]:
            for statement in _statements(script):
                conn.execute(statement)
        if current < len(MIGRATIONS):
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (len(MIGRATIONS),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> Iterator[str]:
    """Split a script into statements. ``executescript`` would commit the open transaction
    first, so each statement is run on its own inside ours; ``complete_statement`` keeps a
    ``;`` inside a string or a trigger body from splitting it."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n\t;"):
                yield pending.strip()
            pending = ""
    if pending.strip(" \n\t;"):
        raise ValueError(f"incomplete SQL statement in a migration: {pending.strip()[:60]}")


# -- rows ------------------------------------------------------------------------------------

def _row_by_email(conn: sqlite3.Connection, normal: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(_SUBSCRIBER_BY_KEY, (email_key(normal),)).fetchone()
    return row


def _rows_by_key(conn: sqlite3.Connection, keys: set[str]) -> dict[str, Subscriber]:
    """The subscribers whose ``email_key`` is one of ``keys``, by key: one query."""
    rows = conn.execute(_SUBSCRIBERS_BY_KEYS, (json.dumps(sorted(keys)),)).fetchall()
    return {email_key(row["email"]): _subscriber(row) for row in rows}


def _suppressed_among(conn: sqlite3.Connection, hashes: set[str]) -> set[str]:
    """Which of ``hashes`` the suppression list holds: one query."""
    return {row[0] for row in conn.execute(_SUPPRESSED_AMONG, (json.dumps(sorted(hashes)),))}


def _by_id(subscriber: Subscriber) -> str:
    return subscriber.id


def _suppressed(conn: sqlite3.Connection, normal: str) -> bool:
    return conn.execute("SELECT 1 FROM suppressions WHERE email_hash = ?",
                        (suppression_hash(normal),)).fetchone() is not None


def _subscriber(row: sqlite3.Row) -> Subscriber:
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


def _entry(row: sqlite3.Row) -> LedgerEntry:
    return LedgerEntry(
        issue_id=row["issue_id"],
        subscriber_id=row["subscriber_id"],
        status=row["status"],
        message_id=row["message_id"],
        reason=row["reason"],
        permanent=bool(row["permanent"]),
        attempts=row["attempts"],
        updated_at=decode_time(row["updated_at"]),
    )


# -- errors ----------------------------------------------------------------------------------

def _is_storage_error(exc: sqlite3.DatabaseError) -> bool:
    """Failures of the file or the machine (not a database, locked, I/O, disk full), as
    opposed to a bug in our SQL or a violated constraint, which propagate unchanged."""
    return type(exc) in (sqlite3.DatabaseError, sqlite3.OperationalError)


def _describe(exc: sqlite3.Error, timeout: float | None = None) -> str:
    text = str(exc)
    if "file is not a database" in text:
        return "not a SQLite database (is the path right?)"
    if "database is locked" in text:
        wait = f" for more than {timeout:g}s" if timeout else ""
        return f"locked by another process{wait}; try again when it has finished"
    if "unable to open database file" in text:
        return "cannot open the file (missing folder, or no permission)"
    return text
