"""The subscriber store in one SQLite file: :class:`SqliteStore`, for one machine.

It keeps every role of :class:`~subscribers.store.SubscriberStore` (the rules are there) in
``<[paths] data_dir>/subscribers.sqlite3``, WAL mode, the schema versioned by
:data:`MIGRATIONS` and brought up to date on open. Every ledger write is committed at once,
so it survives SIGKILL; the hand-over before each transport call is fsynced
(``synchronous=FULL``) and takes the message's claim to the disk with it, so a power cut
never leads to a second delivery (``ledger._unsynced`` says why the other writes need not
wait). A claim is one statement (an insert that does nothing if the row exists, or a
compare-and-set update), never a read followed by a write.

One module per role (``directory``, ``imports``, ``interests``, ``ledger``, ``sent_issues``,
``feedback``, ``leases``, ``once_keys``, ``quotas``), each a class on
:class:`~.core.SqliteCore` (the one connection, its lock and transactions); ``schema`` holds
the migrations and ``rows`` what the roles share to read a subscriber. :class:`SqliteStore`
is all of them.
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
    """:class:`~subscribers.store.SubscriberStore` on one SQLite file (WAL mode): every role,
    on the one connection of :class:`~subscribers.store.sqlite.core.SqliteCore`. Nothing of
    its own: what a role needs is in the role's module, what they share in ``core``."""
