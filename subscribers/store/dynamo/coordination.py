""":class:`~subscribers.store.Leases`, :class:`~subscribers.store.OnceKeys` and
:class:`~subscribers.store.Quotas` on DynamoDB: ``lease#``, ``seen#`` and ``quota#`` items, each
take a conditional write; the keys and counters expire by TTL.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from subscribers.model import Lease
from subscribers.store.dynamo.core import RACE_TRIES, DynamoCore, Refused
from subscribers.store.dynamo.items import (
    LEASE_PREFIX,
    QUOTA_PREFIX,
    SEEN_PREFIX,
    SEEN_RETENTION,
    epoch,
    pk_of,
    read_lease,
)
from subscribers.store.dynamo.tables import TTL_ATTRIBUTE
from subscribers.store.rules import encode_time


class DynamoCoordination(DynamoCore):
    """Leases, handled-message keys and rate counters."""

    #: DynamoDB's TTL drops handled-message keys and rate counters: no purge scans.
    expires_by_itself = True

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """An update conditional on ``owner`` holding it, else a put conditional on the lease
        being absent or expired; a refused put returns the holder's lease."""
        stamp, until = encode_time(now), encode_time(now + ttl)
        key = pk_of(LEASE_PREFIX + name)
        for _ in range(RACE_TRIES):
            with contextlib.suppress(Refused):
                item = self._update(self.subscribers_table, key,
                                    "SET #expires_at_iso = :until", "#owner = :owner",
                                    until=until, owner=owner)
                return read_lease(name, item)
            item = {"pk": LEASE_PREFIX + name, "owner": owner, "acquired_at": stamp,
                    "expires_at_iso": until}
            try:
                self._put(self.subscribers_table, item,
                          "attribute_not_exists(#pk) OR "
                          "(#expires_at_iso <= :now AND #owner <> :owner)",
                          now=stamp, owner=owner)
                return read_lease(name, item)
            except Refused as refused:
                if refused.item is not None and refused.item["owner"] != owner:
                    return read_lease(name, refused.item)
        raise self._race_error(self.subscribers_table, "acquire_lease")

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        try:
            self._update(self.subscribers_table, pk_of(LEASE_PREFIX + name),
                         "SET #expires_at_iso = :until", "#owner = :owner",
                         until=encode_time(now + ttl), owner=owner)
        except Refused:
            return False
        return True

    def release_lease(self, name: str, owner: str) -> None:
        self._delete(self.subscribers_table, pk_of(LEASE_PREFIX + name), "#owner = :owner",
                     owner=owner)

    def first_time(self, key: str, now: datetime) -> bool:
        item = {"pk": SEEN_PREFIX + key, "at": encode_time(now),
                TTL_ATTRIBUTE: epoch(now + SEEN_RETENTION)}
        try:
            self._put(self.subscribers_table, item, "attribute_not_exists(#pk)")
        except Refused:
            return False
        return True

    def forget(self, key: str) -> None:
        self._delete(self.subscribers_table, pk_of(SEEN_PREFIX + key))

    def purge_seen(self, before: datetime) -> int:
        """A Scan for old ``seen#`` items, each deleted if still that old. TTL removes keys
        after :data:`SEEN_RETENTION`; this matters only for shorter windows."""
        condition = "begins_with(#pk, :prefix) AND #at < :before"
        values = {"prefix": SEEN_PREFIX, "before": encode_time(before)}
        old = self._items(self.subscribers_table, projection="#pk", row_filter=condition,
                          **values)
        # An item recorded again meanwhile is not deleted, nor counted.
        return sum(self._delete(self.subscribers_table, pk_of(item["pk"]), "#at < :before",
                                **values) for item in old)

    def take_quota(self, key: str, now: datetime, *, limit: int, window: timedelta) -> bool:
        """Start a new window, else count one more use if fewer than ``limit``; each an atomic
        conditional update, retried if the window ended or the item expired in between."""
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
                if refused.item and refused.item["window_start"] > start:
                    return False  # the current window's uses are all taken
        raise self._race_error(self.subscribers_table, "take_quota")

    def return_quota(self, key: str) -> None:
        with contextlib.suppress(Refused):  # nothing to give back
            self._update(self.subscribers_table, pk_of(QUOTA_PREFIX + key),
                         "SET #count = #count - :one", "attribute_exists(#pk) AND #count > :zero",
                         one=1, zero=0)
