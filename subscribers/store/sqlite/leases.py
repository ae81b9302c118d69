""":class:`~subscribers.store.Leases` on SQLite: the ``leases`` table, taken or extended by
one upsert whose WHERE is the condition, so two takers cannot both win.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from subscribers.model import Lease
from subscribers.store.rules import decode_time, encode_time
from subscribers.store.sqlite.core import SqliteCore


class SqliteLeases(SqliteCore):
    """Named leases with an expiry."""

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """One upsert whose WHERE is the condition, so two takers cannot both win."""
        stamp, until = encode_time(now), encode_time(now + ttl)
        with self._transaction() as conn:
            conn.execute(
                """
                INSERT INTO leases (name, owner, acquired_at, expires_at)
                VALUES (:name, :owner, :now, :until)
                ON CONFLICT (name) DO UPDATE SET
                    acquired_at = CASE WHEN owner = :owner THEN acquired_at ELSE :now END,
                    owner = :owner, expires_at = :until
                WHERE owner = :owner OR expires_at <= :now
                """, {"name": name, "owner": owner, "now": stamp, "until": until})
            row = conn.execute("SELECT * FROM leases WHERE name = ?", (name,)).fetchone()
        return Lease(name, row["owner"], decode_time(row["acquired_at"]),
                     decode_time(row["expires_at"]))

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        with self._using() as conn:
            return conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ?",
                (encode_time(now + ttl), name, owner)).rowcount == 1

    def release_lease(self, name: str, owner: str) -> None:
        with self._using() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))
