""":class:`~subscribers.store.Imports` on DynamoDB: a batch read in bulk (BatchGetItem),
decided by :func:`~subscribers.store.rules.plan_additions`, and written entry by entry as
:meth:`~subscribers.store.Directory.add` writes (BatchWriteItem takes no condition), so it
builds on the directory and falls back to ``add`` for an entry someone changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pipeline import retry
from subscribers.errors import StoreError
from subscribers.model import (
    AddOutcome,
    AddResult,
    NewSubscriber,
    Subscriber,
    email_key,
    normalise_email,
)
from subscribers.store.dynamo.core import Refused
from subscribers.store.dynamo.directory import DynamoDirectory
from subscribers.store.dynamo.items import (
    EMAIL_INDEX_PREFIX,
    SUBSCRIBER_FIELDS,
    SUBSCRIBER_PREFIX,
    SUPPRESSION_PREFIX,
    pk_of,
    plain_item,
    read_subscriber,
    stored_time,
)
from subscribers.store.rules import (
    check_new_status,
    encode_areas,
    encode_time,
    plan_additions,
    suppression_hash,
)

#: Keys per BatchGetItem (DynamoDB's limit), and how often its unprocessed keys are asked again.
_BATCH_GET = 100
_BATCH_GET_TRIES = 8


class _Unprocessed(Exception):
    """A batch read came back with keys DynamoDB left for later (throttling)."""


class DynamoImports(DynamoDirectory):
    """Many addresses at once, each durable on its own."""

    #: add_many writes each entry on its own (conditional writes do not batch).
    atomic_batches = False

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """The entries' items are read with BatchGetItem and decided as SQLite decides them;
        what must change is written as :meth:`add` writes it (BatchWriteItem takes no condition).
        A write refused because someone changed the address since the read is decided again by
        :meth:`add`, and so is every later entry for that address."""
        for entry in entries:
            check_new_status(entry.layout, status)
        normals = [(normalise_email(entry.email), entry) for entry in entries]
        if not normals:
            return []
        plan = plan_additions(normals, status=status, source=source, now=now,
                              existing=self._existing(normal for normal, _ in normals),
                              suppressed=self._suppressed_among(n for n, _ in normals))
        results = list(plan.results)
        redo: set[str] = set()
        for index, ((normal, entry), result) in enumerate(zip(normals, results, strict=True)):
            key = email_key(normal)
            if key in redo or not self._apply(result, source, now):
                redo.add(key)
                results[index] = self.add(entry.email, entry.layout, status=status,
                                          source=source, now=now, areas=entry.areas)
        return results

    def _apply(self, planned: AddResult, source: str, now: datetime) -> bool:
        """Write what ``planned`` needs (nothing unless it was created or activated); False
        if a concurrent writer got there first and the entry must be decided again."""
        sub = planned.subscriber
        if sub is None or planned.outcome not in (AddOutcome.CREATED, AddOutcome.ACTIVATED):
            return True
        stamp = encode_time(now)
        if planned.outcome is AddOutcome.CREATED:
            # A new subscriber has had no mail event yet: no mail_event_at attribute.
            record = {field: getattr(sub, field) for field in SUBSCRIBER_FIELDS
                      if field not in ("email_key", "mail_event_at")}
            record.update(email_key=email_key(sub.email), consent_at=stored_time(sub.consent_at),
                          created_at=stamp, confirmed_at=stored_time(sub.confirmed_at),
                          updated_at=stamp, areas=encode_areas(sub.areas) or None)
            outcome, existing_id = self._insert(record)
            return outcome == "created" or existing_id == sub.id
        try:
            self._activate(sub.id, stamp, source)
        except Refused:
            return False
        return True

    def _existing(self, normals: Iterable[str]) -> dict[str, Subscriber]:
        """The subscribers of these addresses, by email key (one gone meanwhile is left out)."""
        keys = {email_key(normal) for normal in normals}
        index = self._batch_get(EMAIL_INDEX_PREFIX + key for key in keys)
        ids = {item["subscriber_id"] for item in index.values()}
        subscribers = self._batch_get(SUBSCRIBER_PREFIX + sid for sid in ids)
        return {item["email_key"]: read_subscriber(item) for item in subscribers.values()}

    def _suppressed_among(self, normals: Iterable[str]) -> set[str]:
        """Which of these addresses' suppression hashes have a ``supp#`` item."""
        found = self._batch_get(SUPPRESSION_PREFIX + suppression_hash(n) for n in normals)
        return {pk.removeprefix(SUPPRESSION_PREFIX) for pk in found}

    def _batch_get(self, pks: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Items of the subscribers table by ``pk`` (those that exist), strongly consistent;
        keys DynamoDB leaves unprocessed (throttling) are asked again with a backoff."""
        wanted = sorted(set(pks))
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), _BATCH_GET):
            keys: list[dict[str, Any]] = [pk_of(pk) for pk in wanted[start:start + _BATCH_GET]]

            def read_batch() -> None:
                nonlocal keys
                response = self._call(self.subscribers_table, "batch_get_item", RequestItems={
                    self.subscribers_table: {"Keys": keys, "ConsistentRead": True}})
                for item in response.get("Responses", {}).get(self.subscribers_table, ()):
                    plain = plain_item(item)
                    found[plain["pk"]] = plain
                keys = (response.get("UnprocessedKeys", {}).get(self.subscribers_table, {})
                        .get("Keys", []))
                if keys:
                    raise _Unprocessed

            try:
                retry.call(read_batch, retry_on=_Unprocessed, attempts=_BATCH_GET_TRIES,
                           wait=lambda n, _: retry.backoff(n, base=0.05, cap=2.0))
            except retry.GaveUp:
                raise StoreError(f"dynamodb:{self.subscribers_table}", "DynamoDB kept "
                                 "keys of a batch read unprocessed (throttled); try again"
                                 ) from None
        return found
