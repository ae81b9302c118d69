""":class:`~subscribers.store.Quotas` on SQLite: the ``quotas`` table, each use one upsert
so concurrent callers cannot both take the last one."""

from __future__ import annotations

from datetime import datetime, timedelta

from subscribers.store.rules import encode_time
from subscribers.store.sqlite.core import SqliteCore


class SqliteQuotas(SqliteCore):
    """Rate counters shared by every process on the file."""

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        if limit < 1 or window <= timedelta(0):
            raise ValueError("limit must be at least 1 and window positive")
        stamp, start = encode_time(now), encode_time(now - window)
        with self._using() as conn:
            return conn.execute(
                """
                INSERT INTO quotas (key, window_start, count) VALUES (:key, :now, 1)
                ON CONFLICT (key) DO UPDATE SET
                    window_start = CASE WHEN window_start <= :start THEN :now
                                        ELSE window_start END,
                    count = CASE WHEN window_start <= :start THEN 1 ELSE count + 1 END
                WHERE window_start <= :start OR count < :limit
                """,
                {"key": key, "now": stamp, "start": start, "limit": limit},
            ).rowcount == 1

    def return_quota(self, key: str) -> None:
        with self._using() as conn:
            conn.execute("UPDATE quotas SET count = count - 1 WHERE key = ? AND count > 0",
                         (key,))
