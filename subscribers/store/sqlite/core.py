"""The SQLite store's one connection, shared by every role: opening (pragmas, migrations),
the lock, the write transaction, and storage failures said as
:class:`~subscribers.errors.StoreError`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from pipeline.resource import Resource
from subscribers.errors import StoreError
from subscribers.model import Subscriber, email_key
from subscribers.store import rules
from subscribers.store.sqlite.schema import immediate, migrate

#: The store's file name inside ``[paths] data_dir``.
FILE_NAME = "subscribers.sqlite3"

_Params = Sequence[object] | Mapping[str, object]


class SqliteCore(Resource):
    """One connection under a lock: SQLite serialises writers anyway, and one connection can be
    closed from whichever thread owns the store. Other processes wait (``busy_timeout``).
    """

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        """Use :meth:`open`."""
        self.path = path
        self._conn = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, *, timeout: float = 10.0) -> Self:
        """Open (creating folder and file if needed) and bring the schema up to date;
        ``timeout``: seconds to wait for another process's transaction."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(path, f"cannot create its folder: {exc.strerror or exc}") from exc
        with _storage_errors(path, timeout):
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                # FULL: a committed claim survives a power cut too, or a resend could follow.
                conn.execute("PRAGMA synchronous = FULL")
                # Deleted rows are overwritten with zeros: ``remove`` really erases the address.
                conn.execute("PRAGMA secure_delete = ON")
                migrate(conn, path)
            except BaseException:
                conn.close()
                raise
        return cls(path, conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, with storage failures turned into StoreError."""
        with self._lock, _storage_errors(self.path):
            yield self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._using() as conn, immediate(conn):
            yield conn

    def _run(self, sql: str, params: _Params = ()) -> int:
        """One statement, committed at once: how many rows it changed."""
        with self._using() as conn:
            return conn.execute(sql, params).rowcount

    def _rows(self, sql: str, params: _Params = ()) -> list[sqlite3.Row]:
        with self._using() as conn:
            return conn.execute(sql, params).fetchall()

    def _row(self, sql: str, params: _Params = ()) -> sqlite3.Row | None:
        with self._using() as conn:
            row: sqlite3.Row | None = conn.execute(sql, params).fetchone()
        return row


# -- what every role reads a subscriber with ------------------------------------------------

def row_by_email(conn: sqlite3.Connection, normal: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM subscribers WHERE email_key = ?",
                                           (email_key(normal),)).fetchone()
    return row


def row_by_id(conn: sqlite3.Connection, subscriber_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM subscribers WHERE id = ?",
                                           (subscriber_id,)).fetchone()
    return row


def read_subscriber(row: sqlite3.Row) -> Subscriber:
    return rules.read_subscriber(dict(row))


# -- errors ----------------------------------------------------------------------------------

@contextmanager
def _storage_errors(path: Path, timeout: float | None = None) -> Iterator[None]:
    """A failure of the file or the machine (locked, I/O, disk full) as StoreError; a bug in
    our SQL or a violated constraint (a subclass) propagates unchanged."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if type(exc) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
            raise
        raise StoreError(path, describe(exc, timeout)) from exc


def describe(exc: sqlite3.Error, timeout: float | None = None) -> str:
    """A SQLite failure in words that say what to do."""
    text = str(exc)
    if "file is not a database" in text:
        return "not a SQLite database (is the path right?)"
    if "database is locked" in text:
        wait = f" for more than {timeout:g}s" if timeout else ""
        return f"locked by another process{wait}; try again when it has finished"
    if "unable to open database file" in text:
        return "cannot open the file (missing folder, or no permission)"
    return text
