""":class:`~subscribers.store.Quotas` on SQLite: fixed-window counters in the ``quotas``
table, each use one upsert so concurrent callers cannot both take the last one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from subscribers.store.rules import encode_time
from subscribers.store.sqlite.core import SqliteCore

__all__ = ["SqliteQuotas"]

class SqliteQuotas(SqliteCore):
    """Rate counters shared by every process on the file."""

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """One use of ``key`` in a fixed window of ``window``; False (nothing counted) once
        ``limit`` uses fall in it. One upsert, so concurrent callers cannot both take the
        last use. ``key`` should be a hash: it is stored."""
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
        """Give back one use of ``key``: the confirmation mail it paid for was not sent, and
        the person's retry must not find the day's allowance spent on our failures."""
        with self._using() as conn:
            conn.execute("UPDATE quotas SET count = count - 1 WHERE key = ? AND count > 0",
                         (key,))
