"""The SQLite store's schema, one script per version, and the migration that brings a file
up to date when it is opened."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from subscribers.errors import StoreError

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
    # 7 -------------------------------------------------------------------------------------
    # What each issue went out as (noted before its first message left), so that a sent
    # week's issue is never replaced but by an explicit correction.
    """
    CREATE TABLE sent_issues (
        issue_id      TEXT PRIMARY KEY,
        content_hash  TEXT NOT NULL,
        first_hash    TEXT NOT NULL,
        first_sent_at TEXT NOT NULL,
        corrected_on  TEXT,
        correction    TEXT
    ) WITHOUT ROWID;
    """,
)


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations the file lacks in one IMMEDIATE transaction, so two processes
    opening a fresh file at once take turns."""
    with immediate(conn):
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


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction taken up front (IMMEDIATE), so what is read inside it stays true
    until the commit; rolled back on any failure."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> Iterator[str]:
    """Split a script into statements: ``executescript`` would commit our open transaction
    first. ``complete_statement`` keeps a ``;`` inside a string or trigger together."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n\t;"):
                yield pending.strip()
            pending = ""
    if pending.strip(" \n\t;"):
        raise ValueError(f"incomplete SQL statement in a migration: {pending.strip()[:60]}")
