"""``newsletter store migrate``: the subscriber store copied between SQLite and DynamoDB.

The copy is :mod:`subscribers.store.migrate`'s: idempotent, never overwriting a record, the
SQLite side read as one read-only snapshot. A record DynamoDB refuses ends the command with
exit 3, not 4: running it again copies nothing more until a person fixes the row.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import add_group
from pipeline.errors import BlockedError, UsageError
from pipeline.wiring import open_dynamo_store, sqlite_path

if TYPE_CHECKING:
    from pipeline.config import Settings

__all__ = ["add_parser"]

_MIGRATE_HELP = """\
Copy the SQLite store (default: <data_dir>/subscribers.sqlite3) into the DynamoDB tables of
[store]: every subscriber with its id and consent record, every suppression, every ledger row
and every handled-message key. Idempotent: running it again copies only what is missing and
reports the rest as already there. A record already in DynamoDB is never overwritten; an
address stored there under another id is reported on stderr (exit 0). A record DynamoDB
refuses (over its 400 KB item limit) is named on stderr by id, the rest copied (exit 3). The
SQLite file is only read. Stop the subscription app and sends first; then set [store] backend =
"dynamodb"."""


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    actions = add_group(
        commands, "store", help="move the subscriber store to DynamoDB (or back to SQLite)",
        description="Work on the subscriber store as a whole ([store] in the configuration).")
    migrate = actions.add_parser(
        "migrate", help="copy the store between SQLite and the DynamoDB tables of [store]",
        description=_MIGRATE_HELP)
    migrate.add_argument("--to", required=True, choices=("dynamodb", "sqlite"),
                         help="the backend to copy into: dynamodb (from SQLite), or sqlite "
                         "(from the DynamoDB tables, into a new file)")
    migrate.add_argument("--to-sqlite", type=Path, metavar="PATH",
                         help="with --to sqlite: the new SQLite file "
                         "(default: <data_dir>/subscribers.sqlite3, which must not exist)")
    migrate.add_argument("--from-sqlite", type=Path, metavar="PATH",
                         help="the SQLite store to copy (default: <data_dir>/subscribers.sqlite3)")
    migrate.add_argument("--create-tables", action="store_true",
                         help="create the two tables first if they do not exist "
                         "(on-demand billing, the schema the deploy template has)")
    migrate.add_argument("--dry-run", action="store_true",
                         help="only read both sides and say what would be copied")
    migrate.set_defaults(handler=_cmd_migrate)


def _cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    # Here, not at the top: the migration reads and writes DynamoDB, so it imports boto3.
    from subscribers.store import migrate as migration

    default = sqlite_path(settings)
    if args.to == "sqlite":
        if args.from_sqlite or args.create_tables:
            raise UsageError("--from-sqlite and --create-tables go with --to dynamodb")
        path: Path = args.to_sqlite or default
        with open_dynamo_store(settings) as store:
            tally = migration.to_sqlite(store, path, dry_run=args.dry_run)
            print(migration.summary_to_sqlite(tally, store, path, dry_run=args.dry_run))
        return 0
    if args.to_sqlite:
        raise UsageError("--to-sqlite goes with --to sqlite")
    source: Path = args.from_sqlite or default
    with migration.read_only(source) as conn, open_dynamo_store(settings) as target:
        tally = migration.migrate(conn, target, source=source,
                                  create_tables=args.create_tables, dry_run=args.dry_run)
    print(migration.summary(tally, source, target, dry_run=args.dry_run))
    if left := migration.refused(tally):  # 3, not 4: a person fixes the rows, then reruns
        raise BlockedError(f"{left} record(s) not copied: DynamoDB refused each (named "
                           "above, with why); every other record is copied. Shorten or drop "
                           "them in the SQLite store, then run the same command again: it "
                           "copies only what is missing")
    return 0
