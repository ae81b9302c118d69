""":class:`~subscribers.store.Quotas` on DynamoDB: ``quota#`` counters, a new window or one
more use each a conditional update, tried in turn (what SQLite's one upsert does).
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from subscribers.store.dynamo.core import RACE_TRIES, DynamoCore, Refused
from subscribers.store.dynamo.items import QUOTA_PREFIX, epoch, pk_of
from subscribers.store.rules import encode_time


class DynamoQuotas(DynamoCore):
    """Rate counters shared by every process and Lambda instance."""

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """Start a new window (absent, or its window over), else count one more use if fewer than
        ``limit``; each an atomic conditional update, retried if the window ended or the item
        vanished (TTL) between them."""
        if limit < 1 or window <= timedelta(0):
            raise ValueError("limit must be at least 1 and window positive")
        stamp, start = encode_time(now), encode_time(now - window)
        item_key = pk_of(QUOTA_PREFIX + key)
        for _ in range(RACE_TRIES):
            with contextlib.suppress(Refused):
                self._update(self.subscribers_table, item_key,
                             "SET #window_start = :now, #count = :one, #expires_at = :expires",
                             "attribute_not_exists(#pk) OR #window_start <= :start",
                             now=stamp, one=1, expires=epoch(now + window), start=start)
                return True
            try:
                self._update(self.subscribers_table, item_key, "SET #count = #count + :one",
                             "attribute_exists(#pk) AND #window_start > :start "
                             "AND #count < :limit", one=1, start=start, limit=limit)
                return True
            except Refused as refused:
                current = refused.item
                if current is not None and current["window_start"] > start:
                    return False  # the current window's uses are all taken
        raise self._race_error(self.subscribers_table, "take_quota")

    def return_quota(self, key: str) -> None:
        with contextlib.suppress(Refused):  # nothing to give back
            self._update(self.subscribers_table, pk_of(QUOTA_PREFIX + key),
                         "SET #count = #count - :one", "attribute_exists(#pk) AND #count > :zero",
                         one=1, zero=0)
