""":class:`~subscribers.store.Ledger` on DynamoDB: the ledger table, keyed (issue,
subscriber) and read one issue at a time. A claim is a put only if absent, or one update
conditional on the status it takes over; DynamoDB acknowledges a write once it is stored.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import TYPE_CHECKING

from subscribers.model import LEDGER_STATUSES, LedgerEntry
from subscribers.store.dynamo.core import DynamoCore, Refused
from subscribers.store.dynamo.items import expression, ledger_key, read_entry
from subscribers.store.rules import IN_FLIGHT_REASON, encode_time

if TYPE_CHECKING:

    from subscribers.shards import Shard


class DynamoLedger(DynamoCore):
    """What became of each (issue, subscriber)."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        stamp = encode_time(now)
        row = {"issue_id": issue_id, "subscriber_id": subscriber_id, "status": "sending",
               "permanent": False, "attempts": 1, "updated_at": stamp, "handed_over": False}
        with contextlib.suppress(Refused):
            self._put(self.ledger_table, row, "attribute_not_exists(#subscriber_id)")
            return True
        if retry:
            condition = ("#status = :unconfirmed OR "
                         "(#status = :failed AND #permanent = :false)")
        elif retry_temporary:
            condition = "#status = :failed AND #permanent = :false"
        else:
            return False
        update = ("SET #status = :sending, #permanent = :false, #attempts = #attempts + :one, "
                  "#updated_at = :now, #handed_over = :false REMOVE #message_id, #reason")
        try:
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id), update,
                         condition, sending="sending", false=False, one=1, now=stamp,
                         unconfirmed="unconfirmed", failed="failed")
        except Refused:
            return False
        return True

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                     "SET #status = :sent, #message_id = :message_id, #permanent = :false, "
                     "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                     "REMOVE #reason", None, sent="sent", message_id=message_id, false=False,
                     now=encode_time(now), one=1)

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with contextlib.suppress(Refused):  # delivered: stays so
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #status = :status, #reason = :reason, #permanent = :permanent, "
                         "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                         "REMOVE #message_id",
                         "attribute_not_exists(#subscriber_id) OR #status <> :sent",
                         status=status, reason=reason, permanent=bool(permanent),
                         now=encode_time(now), one=1, sent="sent")

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        try:
            self._call(self.ledger_table, "delete_item", TableName=self.ledger_table,
                       Key=ledger_key(issue_id, subscriber_id),
                       ConditionExpression="#status = :sending",
                       **expression("#status = :sending", sending="sending"))
        except Refused:
            return False
        return True

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        with contextlib.suppress(Refused):  # resolved meanwhile: nothing to note
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #handed_over = :handed", "#status = :sending",
                         handed=bool(handed), sending="sending")

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """A Query of the issue's ``sending`` rows, then per row a delete (never handed over) or
        an update to ``unconfirmed``, each conditional on the row being as read."""
        stamp = encode_time(now)
        condition = "#issue_id = :issue"
        status_filter = "#status = :sending"
        changed = 0
        for page in self._pages(self.ledger_table, "query", TableName=self.ledger_table,
                                ConsistentRead=True, KeyConditionExpression=condition,
                                FilterExpression=status_filter,
                                ProjectionExpression="#subscriber_id, #handed_over",
                                **expression(condition, status_filter, "#subscriber_id",
                                              "#handed_over", issue=issue_id,
                                              sending="sending")):
            for item in page:
                subscriber_id = item["subscriber_id"]
                if shard is not None and subscriber_id not in shard:
                    continue
                key = ledger_key(issue_id, subscriber_id)
                if item.get("handed_over") is False:
                    unhanded = "#status = :sending AND #handed_over = :false"
                    with contextlib.suppress(Refused):  # handed over or resolved meanwhile
                        self._call(self.ledger_table, "delete_item",
                                   TableName=self.ledger_table, Key=key,
                                   ConditionExpression=unhanded,
                                   **expression(unhanded, sending="sending", false=False))
                    continue
                try:
                    self._update(self.ledger_table, key,
                                 "SET #status = :unconfirmed, #reason = :reason, "
                                 "#updated_at = :now", "#status = :sending",
                                 unconfirmed="unconfirmed", reason=IN_FLIGHT_REASON,
                                 now=stamp, sending="sending")
                except Refused:
                    continue  # its outcome arrived meanwhile
                changed += 1
        return changed

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        if status is not None and status not in LEDGER_STATUSES:
            raise ValueError(f"unknown ledger status {status!r}")
        rows = self._issue_rows(issue_id, None,
                                "#status = :status" if status else None, status=status)
        return {item["subscriber_id"]: read_entry(item) for item in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        item = self._get(self.ledger_table, ledger_key(issue_id, subscriber_id))
        return read_entry(item) if item else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        counts = dict.fromkeys(LEDGER_STATUSES, 0)
        for item in self._issue_rows(issue_id, "#status", None):
            counts[item["status"]] += 1
        return counts
