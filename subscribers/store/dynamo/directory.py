""":class:`~subscribers.store.Directory`, :class:`~subscribers.store.Imports` and
:class:`~subscribers.store.Interests` on DynamoDB: ``sub#``, ``email#`` and ``supp#`` items and the
``catalog#areas`` item. Uniqueness is one transaction, every status change one conditional
update (a mail event's on the subscriber as read, so the rule is rules.after_mail_event). An
import's batch is read in bulk and written entry by entry as ``add`` writes (BatchWriteItem
takes no condition).
"""

from __future__ import annotations

import contextlib
import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from itertools import groupby
from operator import attrgetter
from typing import Any

from pipeline import retry
from subscribers.errors import StoreError, UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    LAYOUTS,
    STATUSES,
    AddOutcome,
    AddResult,
    NewSubscriber,
    Subscriber,
    email_key,
    normalise_email,
)
from subscribers.store.dynamo.core import RACE_TRIES, DynamoCore, Refused
from subscribers.store.dynamo.items import (
    CATALOG_KEY,
    EMAIL_INDEX_PREFIX,
    SUBSCRIBER_PREFIX,
    SUPPRESSION_PREFIX,
    expression,
    ledger_key,
    new_record,
    pk_of,
    plain_item,
)
from subscribers.store.dynamo.tables import STATUS_INDEX
from subscribers.store.rules import (
    MAIL_EVENTS,
    MailState,
    after_mail_event,
    catalog_names,
    check_known,
    check_new_status,
    encode_areas,
    encode_time,
    existing_outcome,
    plan_additions,
    read_subscriber,
    status_counts,
    suppression_hash,
)

#: Keys per BatchGetItem (DynamoDB's limit), and how often its unprocessed keys are asked again.
_BATCH_GET = 100
_BATCH_GET_TRIES = 8
#: The order subscribers are listed in (the sort key of the ``by_status`` index).
_BY_ID = attrgetter("id")


class _Unprocessed(Exception):
    """A batch read came back with keys DynamoDB left for later (throttling)."""


class DynamoDirectory(DynamoCore):
    """Who is on the list (one by one and a batch at a time), and the areas they follow."""

    atomic_batches = False

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """One transaction puts ``sub#`` and ``email#`` (each only if absent) and checks that
        ``supp#`` is absent; only a refused one reads the existing subscriber."""
        check_new_status(layout, status)
        normal = normalise_email(email)
        stamp, stored = encode_time(now), encode_areas(areas)
        for _ in range(RACE_TRIES):
            found = self._create(normal, status, layout, source, stamp, stored)
            if isinstance(found, AddResult):
                return found
            item = self._get_subscriber_item(found) if found else None
            if item is None:
                continue  # removed between the two requests: look again
            existing = read_subscriber(item)
            outcome = existing_outcome(existing, status)
            if outcome is AddOutcome.ACTIVATED:
                try:
                    existing = read_subscriber(self._activate(existing.id, stamp, source))
                except Refused:
                    continue  # its status changed meanwhile: decide again
            return AddResult(outcome, existing)
        raise self._race_error(self.subscribers_table, "add")

    def _create(self, normal: str, status: str, layout: str, source: str, stamp: str,
                areas: str, subscriber_id: str | None = None) -> AddResult | str | None:
        """A new subscriber (``CREATED``, under ``subscriber_id`` if given) or a removed address
        (``SUPPRESSED``); else the id of the subscriber holding the address, or None: look again."""
        record = new_record(normal, status, layout, source, stamp,
                            stamp if status == "active" else None, areas, subscriber_id)
        outcome, existing_id = self._insert(record)
        if outcome == "created" or existing_id == record["id"]:
            # (the address under the id just drawn: our own write, answered twice because
            # botocore retried a transaction that had succeeded)
            return AddResult(AddOutcome.CREATED, read_subscriber(record))
        if outcome == "suppressed":
            return AddResult(AddOutcome.SUPPRESSED, None)
        return existing_id  # None when 96 random bits collided: draw another id

    def get(self, subscriber_id: str) -> Subscriber | None:
        item = self._get_subscriber_item(subscriber_id)
        return read_subscriber(item) if item else None

    def find(self, email: str) -> Subscriber | None:
        subscriber_id = self._id_of(email_key(normalise_email(email)))
        return self.get(subscriber_id) if subscriber_id else None

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Paginated Queries of ``by_status`` (sorted by id), merged by id, so a subscriber whose
        status changes meanwhile is never listed twice."""
        check_known("status", STATUSES, status)
        if batch < 1:
            raise ValueError("batch must be at least 1")
        statuses = STATUSES if status is None else (status,)
        streams = [self._iter_status(each, batch) for each in statuses]
        for _, same in groupby(heapq.merge(*streams, key=_BY_ID), key=_BY_ID):
            yield next(same)

    def _iter_status(self, status: str, batch: int) -> Iterator[Subscriber]:
        condition = "#status = :status"
        return map(read_subscriber, self._paged(
            self.subscribers_table, "query", TableName=self.subscribers_table,
            IndexName=STATUS_INDEX, KeyConditionExpression=condition, Limit=batch,
            **expression(condition, status=status)))

    def count_by(self) -> dict[tuple[str, str], int]:
        """A strongly consistent Scan of the table's status and layout: fine for reports."""
        counts = Counter((item["status"], item["layout"]) for item in self._items(
            self.subscribers_table, projection="#status, #layout",
            row_filter="begins_with(#pk, :prefix)", prefix=SUBSCRIBER_PREFIX))
        return dict(sorted(counts.items()))

    def count_by_status(self) -> dict[str, int]:
        return status_counts(self.count_by())

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        """One update conditional on the status being different (and ``only_from``); a refusal
        is nothing to change, or no such subscriber."""
        check_known("status", STATUSES, status, only_from)
        update = "SET #status = :status, #updated_at = :now"
        if status == "active":
            update += ", #confirmed_at = :now, #consent_at = :now, #transient_bounces = :zero"
            if source is not None:
                update += ", #consent_source = :source"
            update += " REMOVE #consent_ip" if client is None else ", #consent_ip = :client"
        condition = "attribute_exists(#pk) AND #status <> :status"
        if only_from is not None:
            condition += " AND #status = :only_from"
        try:
            item = self._update(self.subscribers_table, pk_of(SUBSCRIBER_PREFIX + subscriber_id),
                                update, condition, status=status, now=encode_time(now),
                                zero=0, source=source, client=client, only_from=only_from)
        except Refused as refused:
            if refused.item is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id) from None
            item = refused.item
        return read_subscriber(item)

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        check_known("layout", LAYOUTS, layout)
        update = "SET #layout = :layout, #updated_at = :now"
        stored = None if areas is None else encode_areas(areas)
        if stored:
            update += ", #areas = :areas"
        elif stored is not None:
            update += " REMOVE #areas"
        try:
            item = self._update(self.subscribers_table, pk_of(SUBSCRIBER_PREFIX + subscriber_id),
                                update, "attribute_exists(#pk)", layout=layout,
                                now=encode_time(now), areas=stored)
        except Refused:
            raise UnknownSubscriber(subscriber_id=subscriber_id) from None
        return read_subscriber(item)

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """The layout and areas are changed by one update conditional on the subscriber not
        being ``active``."""
        check_known("layout", LAYOUTS, layout)
        normal = normalise_email(email)
        stamp = encode_time(now)
        stored = encode_areas(areas)
        if stored:
            update = "SET #layout = :layout, #areas = :areas, #updated_at = :now"
            differs = "(#layout <> :layout OR attribute_not_exists(#areas) OR #areas <> :areas)"
        else:
            update = "SET #layout = :layout, #updated_at = :now REMOVE #areas"
            differs = "(#layout <> :layout OR attribute_exists(#areas))"
        condition = f"attribute_exists(#pk) AND #status <> :active AND {differs}"
        for _ in range(RACE_TRIES):
            found = self._create(normal, "pending", layout, source, stamp, stored)
            if isinstance(found, AddResult):
                return found
            if found is None:
                continue
            try:
                item = self._update(self.subscribers_table, pk_of(SUBSCRIBER_PREFIX + found),
                                    update, condition, active="active", layout=layout,
                                    now=stamp, areas=stored)
            except Refused as refused:
                if refused.item is None:
                    continue  # removed meanwhile: look again (it is suppressed now)
                item = refused.item
            current = read_subscriber(item)
            return AddResult(existing_outcome(current, "pending"), current)
        raise self._race_error(self.subscribers_table, "request_subscription")

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """rules.after_mail_event on the item as read, written by one update conditional on the
        item being as read: an event applied in between means reading again."""
        check_known("mail event", MAIL_EVENTS, kind)
        if transient_limit < 1:
            raise ValueError("transient_limit must be at least 1")
        at = None if occurred_at is None else encode_time(occurred_at)
        key = pk_of(SUBSCRIBER_PREFIX + subscriber_id)
        for _ in range(RACE_TRIES):
            item = self._get(self.subscribers_table, key)
            if item is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id)
            before = MailState(item["status"], int(item.get("transient_bounces", 0)),
                               item.get("mail_event_at"))
            after = after_mail_event(before, kind, transient_limit=transient_limit,
                                     occurred_at=at)
            if after == before:
                return read_subscriber(item)
            update = "SET #status = :status, #transient_bounces = :count"
            if after.mail_event_at is not None:
                update += ", #mail_event_at = :at"
            if kind != "delivery":  # a delivery changes no status: updated_at stays
                update += ", #updated_at = :now"
            as_read = " AND ".join(["#status = :was"] + [
                f"#{name} = :was_{name}" if item.get(name) is not None
                else f"attribute_not_exists(#{name})"
                for name in ("transient_bounces", "mail_event_at")])
            try:
                changed = self._update(
                    self.subscribers_table, key, update, as_read, status=after.status,
                    count=after.transient_bounces, at=after.mail_event_at, now=encode_time(now),
                    was=before.status, was_transient_bounces=before.transient_bounces,
                    was_mail_event_at=before.mail_event_at)
            except Refused:
                continue  # changed or removed since it was read: look again
            return read_subscriber(changed)
        raise self._race_error(self.subscribers_table, "record_mail_event")

    def remove(self, email: str, now: datetime) -> bool:
        """One transaction deletes ``sub#`` and ``email#`` and writes ``supp#``; then a Scan finds
        the ledger rows. ``supp#`` notes the id until then, so the next ``remove`` finishes an
        interrupted one."""
        normal = normalise_email(email)
        key = email_key(normal)
        supp_key = pk_of(SUPPRESSION_PREFIX + suppression_hash(normal))
        stamp = encode_time(now)
        for _ in range(RACE_TRIES):
            subscriber_id = self._id_of(key)
            if subscriber_id is None:
                self._finish_purge(supp_key)
                return False
            delete_sub = "attribute_exists(#pk)"
            delete_email = "#subscriber_id = :id"
            suppress = "SET #created_at = if_not_exists(#created_at, :now), #purge_ledger = :id"
            table = self.subscribers_table
            actions = [
                {"Delete": {"TableName": table, "Key": pk_of(SUBSCRIBER_PREFIX + subscriber_id),
                            "ConditionExpression": delete_sub, **expression(delete_sub)}},
                {"Delete": {"TableName": table, "Key": pk_of(EMAIL_INDEX_PREFIX + key),
                            "ConditionExpression": delete_email,
                            **expression(delete_email, id=subscriber_id)}},
                {"Update": {"TableName": table, "Key": supp_key, "UpdateExpression": suppress,
                            **expression(suppress, now=stamp, id=subscriber_id)}},
            ]
            try:
                self._call(table, "transact_write_items", TransactItems=actions)
            except Refused:
                continue  # removed or replaced meanwhile: look again
            self._finish_purge(supp_key)
            return True
        raise self._race_error(self.subscribers_table, "remove")

    def _finish_purge(self, supp_key: dict[str, Any]) -> None:
        """Erase the ledger rows of the subscriber ``supp#`` notes, then the note: this remove's,
        or one an interrupted remove left."""
        supp = self._get(self.subscribers_table, supp_key)
        subscriber_id = supp.get("purge_ledger") if supp else None
        if not subscriber_id:
            return
        for item in self._items(self.ledger_table, projection="#issue_id, #subscriber_id",
                                row_filter="#subscriber_id = :id", id=subscriber_id):
            self._delete(self.ledger_table, ledger_key(item["issue_id"], item["subscriber_id"]))
        with contextlib.suppress(Refused):  # another remove finished it meanwhile
            self._update(self.subscribers_table, supp_key, "REMOVE #purge_ledger",
                         "#purge_ledger = :id", id=subscriber_id)

    def is_suppressed(self, email: str) -> bool:
        key = pk_of(SUPPRESSION_PREFIX + suppression_hash(normalise_email(email)))
        return self._get(self.subscribers_table, key) is not None

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """The entries read with BatchGetItem, decided as SQLite decides, written as
        :meth:`add` writes (BatchWriteItem takes no condition); a refused write is decided
        again by :meth:`add`."""
        for entry in entries:
            check_new_status(entry.layout, status)
        normals = [(normalise_email(entry.email), entry) for entry in entries]
        existing = self._existing(normal for normal, _ in normals)
        found = self._batch_get(SUPPRESSION_PREFIX + suppression_hash(n) for n, _ in normals)
        suppressed = {pk.removeprefix(SUPPRESSION_PREFIX) for pk in found}
        results = plan_additions(normals, status=status, source=source, now=now,
                                 existing=existing, suppressed=suppressed).results
        redo: set[str] = set()
        for index, (normal, entry) in enumerate(normals):
            key = email_key(normal)
            if key in redo or not self._apply(results[index], source, now):
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
            found = self._create(sub.email, sub.status, sub.layout, source, stamp,
                                 encode_areas(sub.areas), sub.id)
            return isinstance(found, AddResult) and found.created
        try:
            self._activate(sub.id, stamp, source)
        except Refused:
            return False
        return True

    def _existing(self, normals: Iterable[str]) -> dict[str, Subscriber]:
        """The subscribers of these addresses, by email key (one gone meanwhile is left out)."""
        index = self._batch_get(EMAIL_INDEX_PREFIX + email_key(normal) for normal in normals)
        subscribers = self._batch_get(SUBSCRIBER_PREFIX + item["subscriber_id"]
                                      for item in index.values())
        return {item["email_key"]: read_subscriber(item) for item in subscribers.values()}

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

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The ``by_status`` Query of ``active`` that :meth:`iter_subscribers` makes (eventually
        consistent: a choice changed a moment ago may not count yet)."""
        return sorted({(sub.layout, sub.areas) for sub in self._iter_status("active", 1000)
                       if sub.areas})

    def known_areas(self) -> tuple[str, ...]:
        item = self._get(self.subscribers_table, pk_of(CATALOG_KEY))
        return tuple(sorted(item.get("names", ()))) if item else ()

    def note_areas(self, names: Iterable[str]) -> None:
        """One ``ADD`` to the catalog item's string set: atomic and add-only, so two publishers
        at once both land."""
        cleaned = catalog_names(names)
        if cleaned:
            self._update(self.subscribers_table, pk_of(CATALOG_KEY), "ADD #names :names", None,
                         names=cleaned)
