""":class:`~subscribers.store.Leases`, :class:`~subscribers.store.OnceKeys` and
:class:`~subscribers.store.Quotas` on SQLite: what lets several runs and app processes work side
by side. Each take is one upsert or insert whose condition is in the statement, so two
takers cannot both win.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from subscribers.model import Lease
from subscribers.store.rules import decode_time, encode_time
from subscribers.store.sqlite.core import SqliteCore


class SqliteCoordination(SqliteCore):
    """Leases, handled-message keys and rate counters."""

    expires_by_itself = False

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """The upsert's WHERE is the condition; the row read back says who won."""
        with self._transaction() as conn:
            conn.execute(
                """
                INSERT INTO leases (name, owner, acquired_at, expires_at)
                VALUES (:name, :owner, :now, :until)
                ON CONFLICT (name) DO UPDATE SET
                    acquired_at = CASE WHEN owner = :owner THEN acquired_at ELSE :now END,
                    owner = :owner, expires_at = :until
                WHERE owner = :owner OR expires_at <= :now
                """, {"name": name, "owner": owner, "now": encode_time(now),
                      "until": encode_time(now + ttl)})
            row = conn.execute("SELECT * FROM leases WHERE name = ?", (name,)).fetchone()
        return Lease(name, row["owner"], decode_time(row["acquired_at"]),
                     decode_time(row["expires_at"]))

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        return self._run("UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ?",
                         (encode_time(now + ttl), name, owner)) == 1

    def release_lease(self, name: str, owner: str) -> None:
        self._run("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))

    def first_time(self, key: str, now: datetime) -> bool:
        return self._run("INSERT INTO seen (key, at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                         (key, encode_time(now))) == 1

    def forget(self, key: str) -> None:
        self._run("DELETE FROM seen WHERE key = ?", (key,))

    def purge_seen(self, before: datetime) -> int:
        return self._run("DELETE FROM seen WHERE at < ?", (encode_time(before),))

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        if limit < 1 or window <= timedelta(0):
            raise ValueError("limit must be at least 1 and window positive")
        return self._run(
            """
            INSERT INTO quotas (key, window_start, count) VALUES (:key, :now, 1)
            ON CONFLICT (key) DO UPDATE SET
                window_start = CASE WHEN window_start <= :start THEN :now ELSE window_start END,
                count = CASE WHEN window_start <= :start THEN 1 ELSE count + 1 END
            WHERE window_start <= :start OR count < :limit
            """,
            {"key": key, "now": encode_time(now), "start": encode_time(now - window),
             "limit": limit}) == 1

    def return_quota(self, key: str) -> None:
        self._run("UPDATE quotas SET count = count - 1 WHERE key = ? AND count > 0", (key,))
