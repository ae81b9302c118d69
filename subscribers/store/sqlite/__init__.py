"""The subscriber store in one SQLite file (``<[paths] data_dir>/subscribers.sqlite3``, WAL
mode), for one machine; the schema is brought up to date on open.

Every ledger write is committed at once, so it survives SIGKILL; the hand-over before each
transport call is fsynced and takes the message's claim to the disk with it, so a power cut
never leads to a second delivery. One module per role, each a class on
:class:`~.core.SqliteCore` (the one connection); :class:`SqliteStore` is all of them.
"""

from __future__ import annotations

from subscribers.store.sqlite.core import FILE_NAME
from subscribers.store.sqlite.directory import SqliteDirectory
from subscribers.store.sqlite.feedback import SqliteFeedback
from subscribers.store.sqlite.imports import SqliteImports
from subscribers.store.sqlite.interests import SqliteInterests
from subscribers.store.sqlite.leases import SqliteLeases
from subscribers.store.sqlite.ledger import SqliteLedger
from subscribers.store.sqlite.once_keys import SqliteOnceKeys
from subscribers.store.sqlite.quotas import SqliteQuotas
from subscribers.store.sqlite.schema import MIGRATIONS
from subscribers.store.sqlite.sent_issues import SqliteSentIssues

__all__ = [
    "FILE_NAME",
    "MIGRATIONS",
    "SqliteStore",
]


class SqliteStore(SqliteDirectory, SqliteImports, SqliteInterests, SqliteLedger,
                  SqliteSentIssues, SqliteFeedback, SqliteLeases, SqliteOnceKeys, SqliteQuotas):
    """:class:`~subscribers.store.SubscriberStore` on one SQLite file: every role."""
