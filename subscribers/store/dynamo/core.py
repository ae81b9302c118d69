"""The DynamoDB store's requests, shared by every role: one call with its errors mapped at
this edge (a refused condition as :class:`Refused`, a conflicting transaction tried again,
anything else a :class:`~subscribers.errors.StoreError`), and the one transaction that
stores a new subscriber.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from pipeline import retry
from pipeline.resource import Resource
from subscribers.errors import StoreError
from subscribers.store.dynamo.items import (
    EMAIL_INDEX_PREFIX,
    SUBSCRIBER_PREFIX,
    SUPPRESSION_PREFIX,
    expression,
    pk_of,
    plain_item,
    serialise,
)
from subscribers.store.dynamo.tables import error_code, table_error
from subscribers.store.rules import suppression_hash

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: How often a write refused by another writer's concurrent change is tried again.
RACE_TRIES = 20
#: Transactions cancelled by a conflicting transaction (not by a condition) are retried.
_CONFLICT_TRIES = 6
_RETRYABLE_REASONS = frozenset({"TransactionConflict", "ThrottlingError",
                                "ProvisionedThroughputExceeded", "RequestLimitExceeded"})


class _Conflict(Exception):
    """A transaction cancelled by a concurrent one (the ClientError is its cause): worth
    another try."""


class Refused(Exception):
    """A condition did not hold; never leaves the store. ``item``: the item as it was (None:
    there was none); ``reasons``: a cancelled transaction's per-action codes and items."""

    def __init__(self, item: dict[str, Any] | None,
                 reasons: list[tuple[str, dict[str, Any] | None]]) -> None:
        super().__init__("condition failed")
        self.item = item
        self.reasons = reasons

    def failed(self, index: int) -> bool:
        return index < len(self.reasons) and self.reasons[index][0] == "ConditionalCheckFailed"


class DynamoCore(Resource):
    """The client and the requests every role uses. Nothing is requested yet: a missing table
    is reported by the first call that needs it."""

    def __init__(self, client: DynamoDBClient, subscribers_table: str, ledger_table: str, *,
                 owns_client: bool = False) -> None:
        self.client = client
        self.subscribers_table = subscribers_table
        self.ledger_table = ledger_table
        self._owns_client = owns_client

    def close(self) -> None:
        """Nothing to flush: DynamoDB acknowledges a write once it is stored."""
        if self._owns_client:
            self.client.close()

    def __repr__(self) -> str:
        return f"DynamoStore({self.subscribers_table!r}, {self.ledger_table!r})"

    def _insert(self, record: dict[str, Any]) -> tuple[str, str | None]:
        """Put a subscriber and its address in one transaction, if the address is new, the id
        unused and the address not suppressed. ``("created", None)``, ``("suppressed",
        None)``, ``("id-taken", None)`` or ``("exists", id of the address's subscriber)``."""
        absent = "attribute_not_exists(#pk)"
        if_absent = {"ConditionExpression": absent, **expression(absent)}
        email_item = {"pk": EMAIL_INDEX_PREFIX + record["email_key"],
                      "subscriber_id": record["id"]}
        suppression = pk_of(SUPPRESSION_PREFIX + suppression_hash(record["email"]))
        actions = [
            {"ConditionCheck": {"TableName": self.subscribers_table, "Key": suppression,
                                **if_absent}},
            {"Put": {"TableName": self.subscribers_table,
                     "Item": serialise({"pk": SUBSCRIBER_PREFIX + record["id"], **record}),
                     **if_absent}},
            {"Put": {"TableName": self.subscribers_table, "Item": serialise(email_item),
                     **if_absent, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        ]
        try:
            self._call(self.subscribers_table, "transact_write_items", TransactItems=actions)
        except Refused as refused:
            if refused.failed(0):
                return "suppressed", None
            if refused.failed(2):
                old = refused.reasons[2][1]
                return "exists", old["subscriber_id"] if old else self._id_of(record["email_key"])
            return "id-taken", None
        return "created", None

    def _id_of(self, key: str) -> str | None:
        item = self._get(self.subscribers_table, pk_of(EMAIL_INDEX_PREFIX + key))
        return item["subscriber_id"] if item else None

    def _get_subscriber_item(self, subscriber_id: str) -> dict[str, Any] | None:
        return self._get(self.subscribers_table, pk_of(SUBSCRIBER_PREFIX + subscriber_id))

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self._call(table, "get_item", TableName=table, Key=key, ConsistentRead=True)
        item = response.get("Item")
        return plain_item(item) if item else None

    def _put(self, table: str, item: dict[str, Any], condition: str, **values: Any) -> None:
        self._call(table, "put_item", TableName=table, Item=serialise(item),
                   ConditionExpression=condition,
                   ReturnValuesOnConditionCheckFailure="ALL_OLD",
                   **expression(condition, **values))

    def _update(self, table: str, key: dict[str, Any], update: str, condition: str | None,
                **values: Any) -> dict[str, Any]:
        """One UpdateItem; the item as it now is, or Refused with the item as it was."""
        params: dict[str, Any] = {"TableName": table, "Key": key, "UpdateExpression": update,
                                  "ReturnValues": "ALL_NEW"}
        if condition:
            params["ConditionExpression"] = condition
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        params.update(expression(update, condition, **values))
        return plain_item(self._call(table, "update_item", **params).get("Attributes") or {})

    def _delete(self, table: str, key: dict[str, Any], condition: str | None = None,
                **values: Any) -> bool:
        """One DeleteItem; False if ``condition`` did not hold."""
        params = expression(condition, **values)
        if condition:
            params["ConditionExpression"] = condition
        try:
            self._call(table, "delete_item", TableName=table, Key=key, **params)
        except Refused:
            return False
        return True

    def _paged(self, table: str, operation: str, **params: Any) -> Iterator[dict[str, Any]]:
        """The items of a Query or Scan, each page requested when the previous one is used up."""
        while True:
            response = self._call(table, operation, **params)
            yield from map(plain_item, response.get("Items", ()))
            if not (last := response.get("LastEvaluatedKey")):
                return
            params["ExclusiveStartKey"] = last

    def _items(self, table: str, key_condition: str | None = None, *, index: str | None = None,
               projection: str | None = None, row_filter: str | None = None,
               **values: Any) -> Iterator[dict[str, Any]]:
        """What a Query (given ``key_condition``) or else a Scan finds; strongly consistent
        unless through an index, where DynamoDB offers no such read."""
        optional = {"KeyConditionExpression": key_condition, "IndexName": index,
                    "ConsistentRead": not index, "ProjectionExpression": projection,
                    "FilterExpression": row_filter}
        params = {name: value for name, value in optional.items() if value}
        return self._paged(table, "query" if key_condition else "scan", TableName=table,
                           **params, **expression(key_condition, projection, row_filter,
                                                  **values))

    def _call(self, table: str, operation: str, **params: Any) -> dict[str, Any]:
        """One request; a refused condition as Refused, any other failure as StoreError. A
        transaction cancelled by a concurrent one is tried again."""
        try:
            return retry.call(lambda: self._once(table, operation, params), retry_on=_Conflict,
                              attempts=_CONFLICT_TRIES,
                              wait=lambda n, _: retry.backoff(n, base=0.02, cap=math.inf,
                                                              jitter="full"))
        except retry.GaveUp as gave_up:
            failure = cast(ClientError, gave_up.last.__cause__)
            raise self._error(failure, table) from failure

    def _once(self, table: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = getattr(self.client, operation)(**params)
        except ClientError as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                item = exc.response.get("Item")
                raise Refused(plain_item(item) if isinstance(item, Mapping) and item else None,
                              []) from None
            if code == "TransactionCanceledException":
                reasons = [(str(r.get("Code", "None")),
                            plain_item(r["Item"]) if r.get("Item") else None)
                           for r in exc.response.get("CancellationReasons") or ()]
                codes = {reason for reason, _ in reasons}
                if "ConditionalCheckFailed" in codes:
                    raise Refused(None, reasons) from None
                if codes & _RETRYABLE_REASONS:
                    raise _Conflict from exc
            elif code == "TransactionConflictException":
                raise _Conflict from exc
            raise self._error(exc, table) from exc
        except BotoCoreError as exc:
            raise self._error(exc, table) from exc
        return answer

    def _error(self, exc: Exception, table: str) -> StoreError:
        return table_error(self.client, exc, table)

    def _race_error(self, table: str, doing: str) -> StoreError:
        return StoreError(f"dynamodb:{table}", f"{doing}: the item kept changing under "
                          f"concurrent writers ({RACE_TRIES} tries); try again")

    def _activate(self, subscriber_id: str, stamp: str, source: str) -> dict[str, Any]:
        """``pending`` → ``active`` with the consent of now; Refused if it is not pending."""
        return self._update(self.subscribers_table, pk_of(SUBSCRIBER_PREFIX + subscriber_id),
                            "SET #status = :active, #consent_at = :now, "
                            "#consent_source = :source, #confirmed_at = :now, "
                            "#updated_at = :now", "#status = :pending",
                            active="active", now=stamp, source=source, pending="pending")
