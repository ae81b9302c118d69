""":class:`~subscribers.store.OnceKeys` on DynamoDB: ``seen#`` items, each a put only if
absent, expired by TTL (``purge_seen`` still works, for shorter windows).
"""

from __future__ import annotations

from datetime import datetime

from subscribers.store.dynamo.core import DynamoCore, Refused
from subscribers.store.dynamo.items import SEEN_PREFIX, SEEN_RETENTION, epoch, expression, pk_of
from subscribers.store.dynamo.tables import TTL_ATTRIBUTE
from subscribers.store.rules import encode_time


class DynamoOnceKeys(DynamoCore):
    """Keys of messages handled once, expired by DynamoDB's TTL."""

    #: DynamoDB's TTL drops handled-message keys and rate counters: no purge scans.
    expires_by_itself = True

    def first_time(self, key: str, now: datetime) -> bool:
        item = {"pk": SEEN_PREFIX + key, "at": encode_time(now),
                TTL_ATTRIBUTE: epoch(now + SEEN_RETENTION)}
        try:
            self._put(self.subscribers_table, item, "attribute_not_exists(#pk)")
        except Refused:
            return False
        return True

    def forget(self, key: str) -> None:
        self._call(self.subscribers_table, "delete_item", TableName=self.subscribers_table,
                   Key=pk_of(SEEN_PREFIX + key))

    def purge_seen(self, before: datetime) -> int:
        """A Scan for old ``seen#`` items, each deleted if still that old. TTL removes keys
        after :data:`SEEN_RETENTION`; this matters only for shorter windows."""
        condition = "begins_with(#pk, :prefix) AND #at < :before"
        values = {"prefix": SEEN_PREFIX, "before": encode_time(before)}
        dropped = 0
        for page in self._pages(self.subscribers_table, "scan",
                                TableName=self.subscribers_table, ConsistentRead=True,
                                ProjectionExpression="#pk", FilterExpression=condition,
                                **expression("#pk", condition, **values)):
            for item in page:
                try:
                    self._call(self.subscribers_table, "delete_item",
                               TableName=self.subscribers_table, Key=pk_of(item["pk"]),
                               ConditionExpression="#at < :before",
                               **expression("#at < :before", **values))
                except Refused:
                    continue  # recorded again meanwhile
                dropped += 1
        return dropped
