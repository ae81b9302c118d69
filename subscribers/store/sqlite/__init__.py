"""The subscriber store in one SQLite file (WAL mode), for one machine; the schema is
brought up to date on open.

Every ledger write is committed at once, so it survives SIGKILL; the hand-over before each
transport call is fsynced and takes the message's claim to the disk with it, so a power cut
never leads to a second delivery. The roles are grouped by subject (``directory``,
``ledger``, ``coordination``) on :class:`~.core.SqliteCore`.
"""

from __future__ import annotations

from subscribers.store.sqlite.coordination import SqliteCoordination
from subscribers.store.sqlite.core import FILE_NAME
from subscribers.store.sqlite.directory import SqliteDirectory
from subscribers.store.sqlite.ledger import SqliteLedger
from subscribers.store.sqlite.schema import MIGRATIONS

__all__ = ["FILE_NAME", "MIGRATIONS", "SqliteStore"]


class SqliteStore(SqliteDirectory, SqliteLedger, SqliteCoordination):
    """:class:`~subscribers.store.SubscriberStore` on one SQLite file: every role."""
