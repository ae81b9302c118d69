"""``store migrate``'s engine: a SQLite store, read in one snapshot, copied record by record
into DynamoDB, and back into a new SQLite file. It knows both backends' insides, so it lives
beside them; the command line only parses and reports (pipeline/cli/store.py).
"""

from __future__ import annotations

import functools
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from subscribers.errors import StoreError
from subscribers.store.dynamo import Copied, DynamoStore, refusal
from subscribers.store.dynamo import create_tables as make_tables
from subscribers.store.dynamo.items import LEDGER_FIELDS, SENT_FIELDS, SUBSCRIBER_FIELDS
from subscribers.store.sqlite import FILE_NAME, MIGRATIONS, SqliteStore
from subscribers.store.sqlite.core import describe

__all__ = ["FILE_NAME", "migrate", "read_only", "refused", "summary", "summary_to_sqlite",
           "to_sqlite"]

#: Each kind of record (as :meth:`DynamoStore.export` names it): its SQLite table, columns
#: and key, and the summary's name for it, in the summary's order.
_TABLES = {
    "subscriber": ("subscribers", SUBSCRIBER_FIELDS, "id", "subscribers"),
    "suppression": ("suppressions", ("email_hash", "created_at"), "email_hash", "suppressions"),
    "ledger": ("ledger", LEDGER_FIELDS, "issue_id, subscriber_id", "ledger rows"),
    "seen": ("seen", ("key", "at"), "key", "handled keys"),
    "area": ("area_catalog", ("name",), "name", "catalog areas"),
    "sent": ("sent_issues", SENT_FIELDS, "issue_id", "sent issues"),
}
_KIND_NAMES = {kind: name for kind, (*_, name) in _TABLES.items()}


def _tally() -> dict[str, Counter[str]]:
    return {name: Counter() for name in _KIND_NAMES.values()}


def migrate(conn: sqlite3.Connection, target: DynamoStore, *, source: Path,
            create_tables: bool = False, dry_run: bool = False) -> dict[str, Counter[str]]:
    """Copy everything ``conn`` (a SQLite store) holds into ``target``; per kind of record,
    how many were copied, already there, or conflicting (each conflict said on stderr)."""
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
    tally = _tally()

    def each(kind: str, label: str, row: dict[str, Any], write: Callable[[], Copied]) -> None:
        """One record, counted as ``write`` says; one DynamoDB refuses is named by ``label`` (an
        id, never an address) with why, and the copy goes on."""
        if assume_empty:
            tally[kind][Copied.COPIED.value] += 1
            return
        try:
            outcome = write()
        except StoreError as exc:
            why = refusal(exc)
            if why is None:
                raise
            print(f"{source}: not copied: {label} ({_weight(row.values())} in SQLite): "
                  f"DynamoDB refused it: {why}", file=sys.stderr)
            outcome = Copied.REFUSED
        tally[kind][outcome.value] += 1

    for row in _rows(conn, source, "subscriber"):
        each("subscribers", f"subscriber {row['id']}", row,
             functools.partial(_copy_subscriber, target, row, source, dry_run))
    for row in _rows(conn, source, "suppression"):
        each("suppressions", f"suppression {row['email_hash']}", row, functools.partial(
            target.copy_suppression, row["email_hash"], row["created_at"], dry_run=dry_run))
    for row in _rows(conn, source, "ledger"):
        each("ledger rows", f"ledger row {row['issue_id']}/{row['subscriber_id']}", row,
             functools.partial(target.copy_ledger_row, row, dry_run=dry_run))
    for row in _rows(conn, source, "seen"):
        key = row["key"] if len(row["key"]) <= 80 else row["key"][:80] + "…"
        each("handled keys", f"handled key {key}", row, functools.partial(
            target.copy_seen, row["key"], row["at"], dry_run=dry_run))
    _copy_catalog(conn, target, source, tally["catalog areas"], assume_empty=assume_empty,
                  dry_run=dry_run)
    for row in _rows(conn, source, "sent"):
        each("sent issues", f"sent issue {row['issue_id']}", row,
             functools.partial(target.copy_sent_issue, row, dry_run=dry_run))
    return tally


def _copy_subscriber(target: DynamoStore, row: dict[str, Any], source: Path,
                     dry_run: bool) -> Copied:
    outcome, why = target.copy_subscriber(row, dry_run=dry_run)
    if outcome is Copied.CONFLICT:
        print(f"{source}: not copied: {row['email']} (id {row['id']}): {why}", file=sys.stderr)
    return outcome


def _weight(values: Iterable[Any]) -> str:
    """About what a record weighs: what DynamoDB's 400 KB item limit is measured against."""
    return f"{sum(len(str(v).encode('utf-8')) for v in values if v is not None) / 1000:.1f} KB"


def refused(tally: dict[str, Counter[str]]) -> int:
    """How many records DynamoDB refused (each named on stderr as it was)."""
    return sum(c[Copied.REFUSED.value] for c in tally.values())


def _copy_catalog(conn: sqlite3.Connection, target: DynamoStore, source: Path,
                  count: Counter[str], *, assume_empty: bool, dry_run: bool) -> None:
    """The area catalog, added to DynamoDB's one item (adding never conflicts)."""
    names = [row["name"] for row in _rows(conn, source, "area")]
    known = set() if assume_empty or not names else set(target.known_areas())
    new = sum(1 for name in names if name not in known)
    count[Copied.PRESENT.value] += len(names) - new
    if names and not dry_run:
        try:
            target.note_areas(names)
        except StoreError as exc:
            why = refusal(exc)
            if why is None:
                raise
            print(f"{source}: not copied: the area catalog's {new} new name(s) "
                  f"({_weight(names)} in SQLite): DynamoDB refused them: {why}",
                  file=sys.stderr)
            count[Copied.REFUSED.value] += new
            return
    count[Copied.COPIED.value] += new


def to_sqlite(source: DynamoStore, path: Path, *, dry_run: bool = False
              ) -> dict[str, Counter[str]]:
    """Copy the DynamoDB tables into a new SQLite store at ``path``, renamed into place: a
    failure half-way leaves no file, and nothing is merged into a store in use."""
    if path.exists():
        raise UsageError(f"{path}: already exists; --to-sqlite names a new file (nothing is "
                         "merged into a store that may be in use)")
    tally = _tally()
    if dry_run:
        for kind, _ in source.export():
            tally[_KIND_NAMES[kind]]["copied"] += 1
        return tally
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.migrating")
    partial.unlink(missing_ok=True)
    try:
        SqliteStore.open(partial).close()  # the schema, every migration applied
        # One transaction: ``with conn`` commits it at the end.
        with closing(sqlite3.connect(partial)) as conn, conn:
            for kind, row in source.export():
                table, columns, _, _ = _TABLES[kind]
                conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608
                             f"VALUES ({', '.join('?' * len(columns))})",
                             [row[name] for name in columns])
                tally[_KIND_NAMES[kind]]["copied"] += 1
        partial.replace(path)
    except BaseException as exc:
        partial.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.Error):
            raise StoreError(path, describe(exc)) from exc
        raise
    return tally


def summary_to_sqlite(tally: dict[str, Counter[str]], source: DynamoStore, path: Path, *,
                      dry_run: bool) -> str:
    """The one line ``store migrate --to sqlite`` prints at the end."""
    counts = ", ".join(f"{kind} {c['copied']}" for kind, c in tally.items())
    total = sum(c["copied"] for c in tally.values())
    where = f"DynamoDB ({source.subscribers_table}, {source.ledger_table}) → {path}"
    if dry_run:
        return f"dry run, nothing written: {where}: would copy {total} ({counts})"
    return f"migrated {where}: {total} copied ({counts})"


def summary(tally: dict[str, Counter[str]], source: Path, target: DynamoStore, *,
             dry_run: bool) -> str:
    """The one line the command prints at the end."""
    total = sum(tally.values(), Counter())
    detail = ", ".join(f"{kind} {c['copied']}/{c['present']}/{c['conflict']}"
                       for kind, c in tally.items())
    where = f"{source} → DynamoDB ({target.subscribers_table}, {target.ledger_table})"
    if dry_run:
        return (f"dry run, nothing written: {where}: would copy {total['copied']}, "
                f"{total['present']} already there, {total['conflict']} conflicting "
                f"({detail}: copied/there/conflicting)")
    left = total[Copied.REFUSED.value]
    return (f"migrated {where}: {total['copied']} copied, {total['present']} already there, "
            f"{total['conflict']} conflicting, not overwritten"
            + (f", {left} refused by DynamoDB, not copied" if left else "")
            + f" ({detail}: copied/there/conflicting)")


# -- the SQLite side -------------------------------------------------------------------------

@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection inside one read transaction (a consistent snapshot), after
    checking the file has the current schema."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file (nothing to migrate; --from-sqlite PATH names "
                         "another store)")
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                     isolation_level=None, timeout=10.0)) as conn:
            conn.row_factory = sqlite3.Row
            conn.execute("BEGIN")
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                "AND name = 'schema_version'").fetchone():
                raise StoreError(path, "not a subscriber store (no schema_version table)")
            version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
            if version != len(MIGRATIONS):
                advice = ("upgrade vllm-pr-weekly" if version > len(MIGRATIONS) else
                          "open it once with this version to upgrade it (for example "
                          "`newsletter subscribers list`), then migrate")
                raise StoreError(path, f"schema version {version}, this program knows "
                                 f"{len(MIGRATIONS)}: {advice}")
            yield conn
    except sqlite3.Error as exc:
        raise StoreError(path, describe(exc)) from exc


def _rows(conn: sqlite3.Connection, path: Path, kind: str) -> Iterator[dict[str, Any]]:
    """Every row of a kind's table in key order, one at a time: memory stays flat."""
    table, columns, key, _ = _TABLES[kind]
    try:
        for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table} "  # noqa: S608
                                f"ORDER BY {key}"):
            yield dict(row)
    except sqlite3.Error as exc:
        raise StoreError(path, describe(exc)) from exc
