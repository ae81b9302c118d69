""":class:`~subscribers.store.OnceKeys` on SQLite: the ``seen`` table, one insert that does
nothing for a known key, so at-least-once deliveries are handled once.
"""

from __future__ import annotations

from datetime import datetime

from subscribers.store.rules import encode_time
from subscribers.store.sqlite.core import SqliteCore

__all__ = ["SqliteOnceKeys"]

class SqliteOnceKeys(SqliteCore):
    """Keys of messages handled once, purged by the caller."""

    #: Handled-message keys stay until :meth:`purge_seen` drops them (DynamoDB's TTL
    #: expires its own).
    expires_by_itself = False

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
