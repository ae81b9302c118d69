""":class:`~subscribers.store.Leases` on DynamoDB: ``lease#`` items, extended by an update
conditional on the owner, else taken by a put conditional on being absent or expired.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from subscribers.model import Lease
from subscribers.store.dynamo.core import RACE_TRIES, DynamoCore, Refused
from subscribers.store.dynamo.items import LEASE_PREFIX, expression, pk_of, read_lease
from subscribers.store.rules import encode_time


class DynamoLeases(DynamoCore):
    """Named leases with an expiry."""

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
        with contextlib.suppress(Refused):
            self._call(self.subscribers_table, "delete_item", TableName=self.subscribers_table,
                       Key=pk_of(LEASE_PREFIX + name), ConditionExpression="#owner = :owner",
                       **expression("#owner = :owner", owner=owner))
