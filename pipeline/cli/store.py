"""``newsletter store …``: moving the subscriber store from SQLite to DynamoDB.

    migrate --to dynamodb [--from-sqlite PATH] [--create-tables] [--dry-run]

``migrate`` copies every subscriber (every field, the id included, so the links in mail already
sent keep working), every suppression, every ledger row and every handled-message key from a
SQLite store into the DynamoDB tables of ``[store]``. Each record is one conditional write
(a subscriber: the same transaction as ``add``), so running it again copies only what is
missing, and a record already in DynamoDB is never overwritten: an address DynamoDB holds
under another id (someone signed up there meanwhile) is reported and left alone. Rate counters
and leases are not copied: they live minutes to hours, and are started afresh.

The SQLite file is read through a connection of its own, opened read-only
(``file:…?mode=ro``) inside one read transaction, so the copy is one consistent snapshot and
the file cannot be changed by the migration; the queries name the store's columns directly
(this module, like :class:`~subscribers.store.sqlite.SqliteStore`, knows the schema of
:data:`~subscribers.store.sqlite.MIGRATIONS`). Stop the subscription app and sends while it runs:
what changes in SQLite after a record was copied is not copied again.

Handlers follow pipeline/cli/__init__.py: ``handler(args, settings) -> int``, errors raised as
:class:`~pipeline.errors.NewsletterError` subclasses (exit 2 for usage, 1 for a store that
fails).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import UsageError
from subscribers.errors import StoreError
from subscribers.store.sqlite import FILE_NAME, MIGRATIONS

if TYPE_CHECKING:
    from pipeline.config import Settings
    from subscribers.store.dynamo import Copied, DynamoStore

__all__ = ["add_parser", "migrate"]

_MIGRATE_HELP = """\
Copy the SQLite store (default: <data_dir>/subscribers.sqlite3) into the DynamoDB tables of
[store]: every subscriber with its id and consent record, every suppression, every ledger row
and every handled-message key. Idempotent: running it again copies only what is missing and
reports the rest as already there. A record already in DynamoDB is never overwritten; an
address stored there under another id is reported on stderr (exit 0). The SQLite file is
only read. Stop the subscription app and sends first; then set [store] backend = "dynamodb"."""

#: The store's columns, as the current schema (every migration applied) has them.
_SUBSCRIBERS = """
    SELECT id, email, email_key, status, layout, consent_at, consent_source, created_at,
           confirmed_at, updated_at, consent_ip, transient_bounces
    FROM subscribers ORDER BY id"""
_SUPPRESSIONS = "SELECT email_hash, created_at FROM suppressions ORDER BY email_hash"
_LEDGER = """
    SELECT issue_id, subscriber_id, status, message_id, reason, permanent, attempts,
           updated_at, feedback
    FROM ledger ORDER BY issue_id, subscriber_id"""
_SEEN = "SELECT key, at FROM seen ORDER BY key"

#: What the summary counts, in its order.
_KINDS = ("subscribers", "suppressions", "ledger rows", "handled keys")


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``store`` and its actions on the top-level sub-command set."""
    top = commands.add_parser(
        "store", help="move the subscriber store to DynamoDB",
        description="Work on the subscriber store as a whole ([store] in the configuration).")
    actions = top.add_subparsers(dest="store_command", metavar="ACTION")
    actions.required = True

    migrate_cmd = actions.add_parser(
        "migrate", help="copy the SQLite store into the DynamoDB tables of [store]",
        description=_MIGRATE_HELP)
    migrate_cmd.add_argument("--to", required=True, choices=("dynamodb",),
                             help="the backend to copy into (dynamodb)")
    migrate_cmd.add_argument("--from-sqlite", type=Path, metavar="PATH",
                             help=f"the SQLite store to copy (default: <data_dir>/{FILE_NAME})")
    migrate_cmd.add_argument("--create-tables", action="store_true",
                             help="create the two tables first if they do not exist "
                             "(on-demand billing, the schema the deploy template has)")
    migrate_cmd.add_argument("--dry-run", action="store_true",
                             help="only read both sides and say what would be copied")
    migrate_cmd.set_defaults(handler=_cmd_migrate)


def _cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.wiring import open_dynamo_store

    source: Path = args.from_sqlite or settings.resolve(settings.paths.data_dir) / FILE_NAME
    with _read_only(source) as conn, open_dynamo_store(settings) as target:
        tally = migrate(conn, target, source=source, create_tables=args.create_tables,
                        dry_run=args.dry_run)
    print(_summary(tally, source, target, dry_run=args.dry_run))
    return 0


def migrate(conn: sqlite3.Connection, target: DynamoStore, *, source: Path,
            create_tables: bool = False, dry_run: bool = False) -> dict[str, Counter[str]]:
    """Copy everything ``conn`` (a SQLite store) holds into ``target``; per kind of record,
    how many were copied, already there, or conflicting (each conflict said on stderr)."""
    from subscribers.store.dynamo import Copied
    from subscribers.store.dynamo import create_tables as make_tables

    assume_empty = False
    if create_tables:
        if dry_run:
            missing = target.missing_tables()
            for table in missing:
                print(f"would create table {table}")
            assume_empty = bool(missing)
        else:
            for table in make_tables(target.client, target.subscribers_table,
                                     target.ledger_table):
                print(f"created table {table}")
    tally: dict[str, Counter[str]] = {kind: Counter() for kind in _KINDS}

    def count(kind: str, outcome: Copied) -> None:
        tally[kind][outcome.value] += 1

    for row in _rows(conn, source, _SUBSCRIBERS):
        if assume_empty:
            count("subscribers", Copied.COPIED)
            continue
        outcome, why = target.copy_subscriber(row, dry_run=dry_run)
        count("subscribers", outcome)
        if outcome is Copied.CONFLICT:
            print(f"{source}: not copied: {row['email']} (id {row['id']}): {why}",
                  file=sys.stderr)
    for row in _rows(conn, source, _SUPPRESSIONS):
        count("suppressions", Copied.COPIED if assume_empty else target.copy_suppression(
            row["email_hash"], row["created_at"], dry_run=dry_run))
    for row in _rows(conn, source, _LEDGER):
        count("ledger rows", Copied.COPIED if assume_empty else target.copy_ledger_row(
            row, dry_run=dry_run))
    for row in _rows(conn, source, _SEEN):
        count("handled keys", Copied.COPIED if assume_empty else target.copy_seen(
            row["key"], row["at"], dry_run=dry_run))
    return tally


def _summary(tally: dict[str, Counter[str]], source: Path, target: DynamoStore, *,
             dry_run: bool) -> str:
    copied = sum(c["copied"] for c in tally.values())
    present = sum(c["present"] for c in tally.values())
    conflicts = sum(c["conflict"] for c in tally.values())
    detail = ", ".join(f"{kind} {c['copied']}/{c['present']}/{c['conflict']}"
                       for kind, c in tally.items())
    where = f"{source} → DynamoDB ({target.subscribers_table}, {target.ledger_table})"
    if dry_run:
        return (f"dry run, nothing written: {where}: would copy {copied}, {present} already "
                f"there, {conflicts} conflicting ({detail}: copied/there/conflicting)")
    return (f"migrated {where}: {copied} copied, {present} already there, {conflicts} "
            f"conflicting, not overwritten ({detail}: copied/there/conflicting)")


# -- the SQLite side -------------------------------------------------------------------------

@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store at ``path`` inside one read transaction (a
    consistent snapshot of every table), after checking it has the current schema."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file (nothing to migrate; --from-sqlite PATH names "
                         "another store)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               isolation_level=None, timeout=10.0)
    except sqlite3.Error as exc:
        raise StoreError(path, _describe(exc)) from exc
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")
        version = _version(conn, path)
        if version != len(MIGRATIONS):
            newer = version > len(MIGRATIONS)
            raise StoreError(path, f"schema version {version}, this program knows "
                             f"{len(MIGRATIONS)}: " + (
                                 "upgrade vllm-pr-weekly" if newer else
                                 "open it once with this version to upgrade it (for example "
                                 "`newsletter subscribers list`), then migrate"))
        yield conn
    except sqlite3.Error as exc:
        raise StoreError(path, _describe(exc)) from exc
    finally:
        conn.close()


def _version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        return conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise StoreError(path, "not a subscriber store (no schema_version table)") from exc
        raise


def _rows(conn: sqlite3.Connection, path: Path, query: str) -> Iterator[dict[str, Any]]:
    """The rows of ``query`` one at a time (a cursor, not a list: memory stays flat)."""
    try:
        for row in conn.execute(query):
            yield dict(row)
    except sqlite3.Error as exc:
        raise StoreError(path, _describe(exc)) from exc


def _describe(exc: sqlite3.Error) -> str:
    text = " ".join(str(exc).split())
    if "file is not a database" in text:
        return "not a SQLite database (is the path right?)"
    if "database is locked" in text:
        return "locked by another process; try again when it has finished"
    return text
