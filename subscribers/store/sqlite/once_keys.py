""":class:`~subscribers.store.OnceKeys` on SQLite: the ``seen`` table."""

from __future__ import annotations

from datetime import datetime

from subscribers.store.rules import encode_time
from subscribers.store.sqlite.core import SqliteCore


class SqliteOnceKeys(SqliteCore):
    """Keys of messages handled once, purged by the caller."""

    expires_by_itself = False

    def first_time(self, key: str, now: datetime) -> bool:
        with self._using() as conn:
            return conn.execute("INSERT INTO seen (key, at) VALUES (?, ?) "
                                "ON CONFLICT (key) DO NOTHING",
                                (key, encode_time(now))).rowcount == 1

    def forget(self, key: str) -> None:
        with self._using() as conn:
            conn.execute("DELETE FROM seen WHERE key = ?", (key,))

    def purge_seen(self, before: datetime) -> int:
        with self._using() as conn:
            return conn.execute("DELETE FROM seen WHERE at < ?", (encode_time(before),)).rowcount
