"""The :class:`~subscribers.store.SubscriberStore` on DynamoDB: the production store.

Why this design:

* **Two tables.** ``[store] subscribers_table`` holds everything about people and the app's
  bookkeeping; ``[store] ledger_table`` holds the per-issue delivery ledger, whose natural key
  is (issue, subscriber) and which is read one issue at a time (a Query, not a Scan).
* **One key, ``pk``, with a prefix per kind of item** in the subscribers table:
  ``sub#<id>`` (the subscriber), ``email#<lower-cased address>`` (what makes an address unique:
  it is written in the same transaction as ``sub#`` with ``attribute_not_exists(pk)``),
  ``supp#<sha256>`` (a removed address), ``seen#<key>`` (a message handled once),
  ``quota#<key>`` (a rate counter), ``lease#<name>`` (who runs an issue) and one
  ``catalog#areas`` (the areas readers may pick, a string set). Single-table
  design keeps the deployment at two tables and lets one transaction span a subscriber, its
  address and the suppression check.
* **A sparse GSI, ``by_status``** (status, id; projection ALL): only ``sub#`` items carry
  ``status``, so it indexes subscribers only, in id order per status. ``iter_subscribers``
  reads it; with no status, the five statuses are merged by id. A GSI is eventually
  consistent: a subscriber changed a moment ago may be listed as they were.
* **Conditional writes, never read-then-write.** Uniqueness, claims, quotas and leases are
  each one conditional write (or a transaction), so two threads, processes or Lambda
  instances can never both win; a read happens only after a write was refused, to say why.
  Where SQLite uses one statement with ``CASE`` (a quota's new window or next use, a
  transient bounce that may make an address bounced, a lease taken or extended), this
  adapter tries the two conditional updates in turn; each is atomic, and a refusal that
  another writer caused between them is retried, so the outcome is the one SQLite gives.
* **TTL** (attribute ``expires_at``, epoch seconds) removes ``seen#`` keys
  (:data:`SEEN_RETENTION` after they were recorded) and ``quota#`` counters (when their window
  ends). TTL deletion is lazy (up to days late), so it is garbage collection only: the
  methods never rely on an item being gone, and ``purge_seen`` still works.

Timestamps are stored as the same ISO 8601 text SQLite stores (``%Y-%m-%dT%H:%M:%S.%fZ``,
which sorts as time does), and returned as aware UTC datetimes. Every botocore error is mapped
at this edge to one-line :class:`~subscribers.errors.StoreError` naming the table, keeping the
original as the cause:

=====================================================  ========================================
``ResourceNotFoundException``                          "table X does not exist in <region> …"
``AccessDeniedException``, bad credentials, HTTP 403   "access denied to table X (…)"
throttling after botocore's standard retries           "DynamoDB throttled … try again later"
``EndpointConnectionError``, ``ConnectTimeoutError``   "cannot reach DynamoDB (…)"
``NoCredentialsError``, ``PartialCredentialsError``    "no usable AWS credentials (…)"
any other ``ClientError`` / ``BotoCoreError``          "DynamoDB <code>: <message>"
=====================================================  ========================================

The low-level client is used (not the resource API), with boto3's own type (de)serialisers:
it reports why a condition failed (``ReturnValuesOnConditionCheckFailure``, a transaction's
``CancellationReasons``). botocore clients are thread-safe and this class keeps no mutable
state besides its closed flag, so one store may serve every worker thread.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from pipeline import retry
from pipeline.resource import Resource
from subscribers.errors import StoreError, UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    FEEDBACK,
    FINAL_STATUSES,
    LAYOUTS,
    LEDGER_STATUSES,
    STATUSES,
    AddOutcome,
    AddResult,
    Lease,
    LedgerEntry,
    NewSubscriber,
    Subscriber,
    email_key,
    new_subscriber_id,
    normalise_email,
)
from subscribers.store.dynamo_tables import (
    MESSAGE_INDEX,
    STATUS_INDEX,
    TTL_ATTRIBUTE,
    create_tables,
    dynamo_reason,
    table_definitions,
)
from subscribers.store.rules import (
    IN_FLIGHT_REASON,
    MAIL_EVENTS,
    catalog_names,
    check_new_status,
    decode_areas,
    decode_time,
    decode_time_or_none,
    encode_areas,
    encode_time,
    plan_additions,
    status_counts,
    suppression_hash,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from subscribers.shards import Shard

__all__ = [
    "MESSAGE_INDEX",
    "SEEN_RETENTION",
    "STATUS_INDEX",
    "TTL_ATTRIBUTE",
    "Copied",
    "DynamoStore",
    "create_tables",
    "dynamo_reason",
    "table_definitions",
]

#: Key prefixes of the subscribers table.
SUBSCRIBER_PREFIX = "sub#"
EMAIL_INDEX_PREFIX = "email#"
SUPPRESSION_PREFIX = "supp#"
SEEN_PREFIX = "seen#"
QUOTA_PREFIX = "quota#"
LEASE_PREFIX = "lease#"
#: The one item holding the area catalog (attribute ``names``, a string set).
CATALOG_KEY = "catalog#areas"

#: How long a ``seen#`` key lives before TTL may delete it: well beyond the webhook's window
#: (a week), so ``purge_seen`` stays the rule and TTL only collects what nobody purged.
SEEN_RETENTION = timedelta(days=30)

#: How often a write refused by another writer's concurrent change is tried again (each try
#: is a fresh conditional write; the loop ends as soon as nobody interferes).
_RACE_TRIES = 20
#: Transactions cancelled by a conflicting transaction (not by a condition) are retried.
_CONFLICT_TRIES = 6
_RETRYABLE_REASONS = frozenset({"TransactionConflict", "ThrottlingError",
                                "ProvisionedThroughputExceeded", "RequestLimitExceeded"})

#: Keys per BatchGetItem (DynamoDB's limit), and how often its unprocessed keys are asked again.
_BATCH_GET = 100
_BATCH_GET_TRIES = 8

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
_NAMES = re.compile(r"#(\w+)")
_VALUES = re.compile(r":(\w+)")


class Copied(StrEnum):
    """What ``newsletter store migrate`` did with one record (see ``DynamoStore.copy_*``)."""

    #: Written now (or, in a dry run, would be).
    COPIED = "copied"
    #: Already in DynamoDB as copied before: left alone.
    PRESENT = "present"
    #: In DynamoDB in another form (the address under another id...): left alone, reported.
    CONFLICT = "conflict"


class _Conflict(Exception):
    """A transaction cancelled by a concurrent one: worth another try. Never leaves this
    module."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(str(error))
        self.error = error


class _Refused(Exception):
    """A condition did not hold. Never leaves this module.

    ``item`` is the item as it was (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), None if
    there was none; ``reasons`` a cancelled transaction's per-action codes and items.
    """

    def __init__(self, item: dict[str, Any] | None,
                 reasons: list[tuple[str, dict[str, Any] | None]]) -> None:
        super().__init__("condition failed")
        self.item = item
        self.reasons = reasons

    def failed(self, index: int) -> bool:
        return index < len(self.reasons) and self.reasons[index][0] == "ConditionalCheckFailed"


class DynamoStore(Resource):
    """:class:`~subscribers.store.SubscriberStore` on two DynamoDB tables (module doc).

    The low-level client is given, never built here: ``pipeline.wiring.open_dynamo_store``
    builds it from AWS's own settings (region, endpoint, credentials) and passes
    ``owns_client=True``, so the store closes it; without that flag the caller keeps the
    client. Nothing is requested yet: a missing table is reported by the first call that
    needs it.
    """

    #: DynamoDB's TTL drops handled-message keys and rate counters: no purge scans.
    expires_by_itself = True
    #: add_many writes each entry on its own (conditional writes do not batch).
    atomic_batches = False

    def __init__(self, client: DynamoDBClient, subscribers_table: str, ledger_table: str, *,
                 owns_client: bool = False) -> None:
        self._client = client
        self.subscribers_table = subscribers_table
        self.ledger_table = ledger_table
        self._owns_client = owns_client
        self._closed = False
        self._close_lock = threading.Lock()

    # -- opening and closing -------------------------------------------------------------

    @property
    def client(self) -> DynamoDBClient:
        return self._client

    def close(self) -> None:
        """Close the client this store built (idempotent). Every write is already durable
        when its method returns: DynamoDB acknowledges a write once it is stored."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return f"DynamoStore({self.subscribers_table!r}, {self.ledger_table!r})"

    # -- subscribers ---------------------------------------------------------------------

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """Store ``email`` as a new subscriber, or say why not (see :class:`AddOutcome`).

        One transaction puts ``sub#<id>`` and ``email#<address>`` (both only if absent) and
        checks that ``supp#<hash>`` is absent: the address is unique whatever its case, and a
        removed one is never stored. Only when the transaction is refused is the existing
        subscriber read; a ``pending`` one asked to be ``active`` is activated by an update
        conditional on it still being ``pending``.
        """
        check_new_status(layout, status)
        normal = normalise_email(email)
        stamp = encode_time(now)
        consent_at = stamp if status == "active" else None
        stored = encode_areas(areas)
        for _ in range(_RACE_TRIES):
            record = _new_record(normal, status, layout, source, stamp, consent_at, stored)
            outcome, existing_id = self._insert(record)
            if outcome == "created" or existing_id == record["id"]:
                # (the address under the id just drawn: our own write, answered twice
                # because botocore retried a transaction that had succeeded)
                return AddResult(AddOutcome.CREATED, _subscriber(record))
            if outcome == "suppressed":
                return AddResult(AddOutcome.SUPPRESSED, None)
            if outcome == "id-taken":
                continue  # 96 random bits collided: draw another id
            item = self._get_subscriber_item(existing_id) if existing_id else None
            if item is None:
                continue  # removed between the two requests: look again
            existing = _subscriber(item)
            if existing.status in FINAL_STATUSES:
                return AddResult(AddOutcome.REFUSED, existing)
            if existing.status == "pending" and status == "active":
                try:
                    changed = self._activate(existing.id, stamp, source)
                except _Refused:
                    continue  # its status changed meanwhile: decide again
                return AddResult(AddOutcome.ACTIVATED, _subscriber(changed))
            return AddResult(AddOutcome.EXISTING, existing)
        raise self._race_error(self.subscribers_table, "add")

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """:meth:`add` for each entry, reading in bulk and writing only what must change.

        The entries' ``email#`` and ``supp#`` items, then the ``sub#`` items they point to,
        are read with BatchGetItem (strongly consistent, 100 keys a request) and the
        outcomes decided as SQLite decides them
        (:func:`~subscribers.store.rules.plan_additions`): an address present, refused or
        suppressed costs no write. What must change is written as :meth:`add` writes it,
        since BatchWriteItem takes no condition: each new subscriber is its own conditional
        transaction (unique address, not suppressed, against every concurrent writer) and
        each activation an update conditional on ``pending``. A write refused because
        someone changed the address since the read is decided again by :meth:`add`, and so
        is every later entry for that address. Not one transaction: each entry is durable
        when its write returns, so an interruption leaves the entries before it done as
        :meth:`add` would have, and none after it.
        """
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
            record = {field: getattr(sub, field) for field in _SUBSCRIBER_FIELDS
                      if field not in ("email_key", "mail_event_at")}
            record.update(email_key=email_key(sub.email), consent_at=_time(sub.consent_at),
                          created_at=stamp, confirmed_at=_time(sub.confirmed_at),
                          updated_at=stamp, areas=encode_areas(sub.areas) or None)
            outcome, existing_id = self._insert(record)
            return outcome == "created" or existing_id == sub.id
        try:
            self._activate(sub.id, stamp, source)
        except _Refused:
            return False
        return True

    def _activate(self, subscriber_id: str, stamp: str, source: str) -> dict[str, Any]:
        """``pending`` → ``active`` with the consent of now; _Refused if it is not pending."""
        return self._update(self.subscribers_table, _pk(SUBSCRIBER_PREFIX + subscriber_id),
                            "SET #status = :active, #consent_at = :now, "
                            "#consent_source = :source, #confirmed_at = :now, "
                            "#updated_at = :now", "#status = :pending",
                            active="active", now=stamp, source=source, pending="pending")

    def _existing(self, normals: Iterable[str]) -> dict[str, Subscriber]:
        """The subscribers of these addresses, by email key: their ``email#`` items, then
        the ``sub#`` items those name (an address whose subscriber is gone meanwhile is
        left out, and ``add`` decides it if it comes to that)."""
        keys = {email_key(normal) for normal in normals}
        index = self._batch_get(EMAIL_INDEX_PREFIX + key for key in keys)
        ids = {item["subscriber_id"] for item in index.values()}
        subscribers = self._batch_get(SUBSCRIBER_PREFIX + sid for sid in ids)
        return {item["email_key"]: _subscriber(item) for item in subscribers.values()}

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
            keys: list[dict[str, Any]] = [_pk(pk) for pk in wanted[start:start + _BATCH_GET]]
            for attempt in range(1, _BATCH_GET_TRIES + 1):
                response = self._call(self.subscribers_table, "batch_get_item", RequestItems={
                    self.subscribers_table: {"Keys": keys, "ConsistentRead": True}})
                for item in response.get("Responses", {}).get(self.subscribers_table, ()):
                    plain = _plain(item)
                    found[plain["pk"]] = plain
                keys = (response.get("UnprocessedKeys", {}).get(self.subscribers_table, {})
                        .get("Keys", []))
                if not keys:
                    break
                time.sleep(retry.backoff(attempt, base=0.05, cap=2.0))
            else:
                raise StoreError(f"dynamodb:{self.subscribers_table}", "DynamoDB kept "
                                 "keys of a batch read unprocessed (throttled); try again")
        return found

    def get(self, subscriber_id: str) -> Subscriber | None:
        item = self._get_subscriber_item(subscriber_id)
        return _subscriber(item) if item else None

    def find(self, email: str) -> Subscriber | None:
        """The subscriber with this address in any case; InvalidAddress for non-addresses.
        Two strongly consistent reads: the address's ``email#`` item, then its ``sub#``."""
        normal = normalise_email(email)
        subscriber_id = self._id_of(email_key(normal))
        return self.get(subscriber_id) if subscriber_id else None

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Every subscriber (with ``status``, if given) in id order, ``batch`` at a time.

        A paginated Query of the ``by_status`` index (``Limit=batch``); each page is fetched
        only when the previous one is used up, so memory stays flat. With no status, the five
        statuses' queries are merged by id (every id is in one status), giving global id
        order. The index is eventually consistent, and a subscriber whose status changes
        while the list is read may appear under either status (never twice: equal ids are
        adjacent in the merge, and repeats are dropped).
        """
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        if status is not None:
            yield from self._iter_status(status, batch)
            return
        streams = [self._iter_status(each, batch) for each in STATUSES]
        last = None
        for sub in heapq.merge(*streams, key=lambda s: s.id):
            if sub.id != last:
                yield sub
            last = sub.id

    def _iter_status(self, status: str, batch: int) -> Iterator[Subscriber]:
        condition = "#status = :status"
        for page in self._pages(self.subscribers_table, "query",
                                TableName=self.subscribers_table, IndexName=STATUS_INDEX,
                                KeyConditionExpression=condition, Limit=batch,
                                **_expression(condition, status=status)):
            for item in page:
                yield _subscriber(item)

    def count_by(self) -> dict[tuple[str, str], int]:
        """Subscribers per (status, layout), e.g. ``{("active", "zh-en"): 120, ...}``.

        A paginated, strongly consistent Scan of the subscribers table that reads only the
        status and layout of ``sub#`` items: a full read of the table, fine for reports."""
        projection = "#status, #layout"
        condition = "begins_with(#pk, :prefix)"
        counts: Counter[tuple[str, str]] = Counter()
        for page in self._pages(self.subscribers_table, "scan",
                                TableName=self.subscribers_table, ConsistentRead=True,
                                ProjectionExpression=projection, FilterExpression=condition,
                                **_expression(projection, condition,
                                              prefix=SUBSCRIBER_PREFIX)):
            counts.update((item["status"], item["layout"]) for item in page)
        return dict(sorted(counts.items()))

    def count_by_status(self) -> dict[str, int]:
        """Subscribers per status, every status present (0 if none)."""
        return status_counts(self.count_by())

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None) -> Subscriber:
        """Change a subscriber's status; UnknownSubscriber if there is none with this id.

        Becoming ``active`` from any other status is a confirmation: ``confirmed_at`` and
        ``consent_at`` become ``now``, ``consent_source`` becomes ``source`` (if given),
        ``consent_ip`` becomes ``client`` and the transient bounces start again from 0. One
        update conditional on the status being different; a refusal means nothing was to
        change (confirming an active subscriber again changes nothing) or there is no such
        subscriber.
        """
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        stamp = encode_time(now)
        sets = ["#status = :status", "#updated_at = :now"]
        removes: list[str] = []
        if status == "active":
            sets += ["#confirmed_at = :now", "#consent_at = :now", "#transient_bounces = :zero"]
            if source is not None:
                sets.append("#consent_source = :source")
            if client is not None:
                sets.append("#consent_ip = :client")
            else:
                removes.append("#consent_ip")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        condition = "attribute_exists(#pk) AND #status <> :status"
        try:
            item = self._update(self.subscribers_table, _pk(SUBSCRIBER_PREFIX + subscriber_id),
                                update, condition, status=status, now=stamp, zero=0,
                                source=source, client=client)
        except _Refused as refused:
            if refused.item is None:
                raise UnknownSubscriber(subscriber_id=subscriber_id) from None
            item = refused.item
        return _subscriber(item)

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        """Change the layout a subscriber reads, and the areas they follow unless ``areas``
        is None (no areas: the attribute removed); UnknownSubscriber if there is none."""
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        update = "SET #layout = :layout, #updated_at = :now"
        stored = None if areas is None else encode_areas(areas)
        if stored:
            update += ", #areas = :areas"
        elif stored is not None:
            update += " REMOVE #areas"
        try:
            item = self._update(self.subscribers_table, _pk(SUBSCRIBER_PREFIX + subscriber_id),
                                update, "attribute_exists(#pk)", layout=layout,
                                now=encode_time(now), areas=stored)
        except _Refused:
            raise UnknownSubscriber(subscriber_id=subscriber_id) from None
        return _subscriber(item)

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A sign-up someone asked for, before any consent (see the protocol).

        ``CREATED`` (a new ``pending`` subscriber, by the same transaction as :meth:`add`),
        ``EXISTING`` (``pending`` or ``active``; a pending one takes the new layout),
        ``REFUSED`` (``unsubscribed``, ``bounced`` or ``complained``: still so, with the new
        layout) or ``SUPPRESSED`` (removed: nothing stored). The layout is changed by one
        update conditional on the subscriber not being ``active``, with the areas asked for;
        an ``active`` subscriber's layout and areas are never changed here.
        """
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
        normal = normalise_email(email)
        stamp = encode_time(now)
        stored = encode_areas(areas)
        if stored:
            update = "SET #layout = :layout, #areas = :areas, #updated_at = :now"
            differs = "(#layout <> :layout OR attribute_not_exists(#areas) OR #areas <> :areas)"
        else:
            update = "SET #layout = :layout, #updated_at = :now REMOVE #areas"
            differs = "(#layout <> :layout OR attribute_exists(#areas))"
        for _ in range(_RACE_TRIES):
            record = _new_record(normal, "pending", layout, source, stamp, None, stored)
            outcome, existing_id = self._insert(record)
            if outcome == "created" or existing_id == record["id"]:
                return AddResult(AddOutcome.CREATED, _subscriber(record))  # (as in add)
            if outcome == "suppressed":
                return AddResult(AddOutcome.SUPPRESSED, None)
            if outcome == "id-taken" or existing_id is None:
                continue
            condition = f"attribute_exists(#pk) AND #status <> :active AND {differs}"
            try:
                item = self._update(self.subscribers_table, _pk(SUBSCRIBER_PREFIX + existing_id),
                                    update, condition, active="active", layout=layout,
                                    now=stamp, areas=stored)
            except _Refused as refused:
                if refused.item is None:
                    continue  # removed meanwhile: look again (it is suppressed now)
                item = refused.item
            current = _subscriber(item)
            outcome_now = (AddOutcome.REFUSED if current.status in FINAL_STATUSES
                           else AddOutcome.EXISTING)
            return AddResult(outcome_now, current)
        raise self._race_error(self.subscribers_table, "request_subscription")

    # -- interests -----------------------------------------------------------------------

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct (layout, areas) of active subscribers who follow any area, sorted.

        One paginated Query of the ``by_status`` index for ``active``, reading only layout
        and areas of the subscribers that have areas (the attribute is absent for none).
        The index is eventually consistent: a choice changed a moment ago may not count yet.
        """
        projection = "#layout, #areas"
        condition = "#status = :status"
        having = "attribute_exists(#areas)"
        choices: set[tuple[str, tuple[str, ...]]] = set()
        for page in self._pages(self.subscribers_table, "query",
                                TableName=self.subscribers_table, IndexName=STATUS_INDEX,
                                KeyConditionExpression=condition, FilterExpression=having,
                                ProjectionExpression=projection,
                                **_expression(projection, condition, having,
                                              status="active")):
            for item in page:
                areas = decode_areas(item.get("areas"))
                if areas:
                    choices.add((item["layout"], areas))
        return sorted(choices)

    def known_areas(self) -> tuple[str, ...]:
        """Every area in the catalog item, sorted (one strongly consistent read)."""
        item = self._get(self.subscribers_table, _pk(CATALOG_KEY))
        return tuple(sorted(item.get("names", ()))) if item else ()

    def note_areas(self, names: Iterable[str]) -> None:
        """Add the names to the catalog item: one ``ADD`` to its string set, atomic and
        add-only, so two publishers at once both land. (An item holds 400 KB: some
        thousands of names of at most 60 characters.)"""
        cleaned = catalog_names(names)
        if cleaned:
            self._update(self.subscribers_table, _pk(CATALOG_KEY), "ADD #names :names", None,
                         names=cleaned)

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """Apply one SES event to a subscriber, atomically (see ``MAIL_EVENTS``).

        Each event is one conditional update (a transient bounce: the update that makes the
        address ``bounced`` at the limit, else the one that only counts it). ``complained``
        is never overridden, and a bounce never turns ``unsubscribed`` into ``bounced``.
        A transient bounce or delivery that happened (``occurred_at``) before the latest
        one applied (``mail_event_at``, SQLite's column of the same name) is ignored, as in
        :meth:`SqliteStore.record_mail_event`. UnknownSubscriber if there is no such id.
        """
        if kind not in MAIL_EVENTS:
            raise ValueError(f"unknown mail event {kind!r}; known: {', '.join(MAIL_EVENTS)}")
        if transient_limit < 1:
            raise ValueError("transient_limit must be at least 1")
        key = _pk(SUBSCRIBER_PREFIX + subscriber_id)
        at = None if occurred_at is None else encode_time(occurred_at)
        values = {"now": encode_time(now), "bounced": "bounced", "complained": "complained",
                  "pending": "pending", "active": "active", "zero": 0, "one": 1,
                  "before_limit": transient_limit - 1, "at": at}
        count_one = "#transient_bounces = if_not_exists(#transient_bounces, :zero) + :one"
        # Timestamps are stored as fixed-width UTC text, so they compare as strings.
        stamp, in_order = ("", "") if at is None else (
            ", #mail_event_at = :at",
            " AND (attribute_not_exists(#mail_event_at) OR #mail_event_at <= :at)")
        steps: list[tuple[str, str]] = {
            "bounce-permanent": [(
                "SET #status = :bounced, #updated_at = :now",
                "attribute_exists(#pk) AND #status IN (:pending, :active)")],
            "bounce-transient": [
                (f"SET {count_one}, #status = :bounced, #updated_at = :now{stamp}",
                 "attribute_exists(#pk) AND #status IN (:pending, :active) "
                 f"AND #transient_bounces >= :before_limit{in_order}"),
                (f"SET {count_one}, #updated_at = :now{stamp}",
                 "attribute_exists(#pk) AND (NOT #status IN (:pending, :active) "
                 "OR #transient_bounces < :before_limit OR attribute_not_exists("
                 f"#transient_bounces)){in_order}")],
            "complaint": [(
                "SET #status = :complained, #updated_at = :now",
                "attribute_exists(#pk) AND #status <> :complained")],
            # Without a time, a delivery writes only to end a run; with one, it always
            # records its time, or an older bounce arriving after it would count.
            "delivery": [(
                f"SET #transient_bounces = :zero{stamp}",
                "attribute_exists(#pk) AND "
                + ("#transient_bounces <> :zero" if at is None else in_order[5:]))],
        }[kind]
        for _ in range(_RACE_TRIES):
            for n, (update, condition) in enumerate(steps):
                try:
                    return _subscriber(self._update(self.subscribers_table, key, update,
                                                    condition, **values))
                except _Refused as refused:
                    if refused.item is None:
                        raise UnknownSubscriber(subscriber_id=subscriber_id) from None
                    if len(steps) == 1:
                        return _subscriber(refused.item)  # nothing to change
                    if at is not None and refused.item.get("mail_event_at", "") > at:
                        return _subscriber(refused.item)  # a newer event was applied
                    if n == len(steps) - 1:
                        break  # both refused: it changed between them; try again
        raise self._race_error(self.subscribers_table, "record_mail_event")

    def first_time(self, key: str, now: datetime) -> bool:
        """Record ``key`` as handled; True for exactly one caller (a put only if absent).
        The item expires (TTL) :data:`SEEN_RETENTION` after ``now``."""
        item = {"pk": SEEN_PREFIX + key, "at": encode_time(now),
                TTL_ATTRIBUTE: _epoch(now + SEEN_RETENTION)}
        try:
            self._put(self.subscribers_table, item, "attribute_not_exists(#pk)")
        except _Refused:
            return False
        return True

    def forget(self, key: str) -> None:
        """Undo :meth:`first_time` after the handling failed, so a redelivery is taken."""
        self._call(self.subscribers_table, "delete_item", TableName=self.subscribers_table,
                   Key=_pk(SEEN_PREFIX + key))

    def purge_seen(self, before: datetime) -> int:
        """Drop keys recorded before ``before``; how many.

        A Scan of the subscribers table for old ``seen#`` items, each then deleted on the
        condition that it is still that old. TTL already removes keys after
        :data:`SEEN_RETENTION`, so this only matters for windows shorter than that.
        """
        condition = "begins_with(#pk, :prefix) AND #at < :before"
        values = {"prefix": SEEN_PREFIX, "before": encode_time(before)}
        dropped = 0
        for page in self._pages(self.subscribers_table, "scan",
                                TableName=self.subscribers_table, ConsistentRead=True,
                                ProjectionExpression="#pk", FilterExpression=condition,
                                **_expression("#pk", condition, **values)):
            for item in page:
                try:
                    self._call(self.subscribers_table, "delete_item",
                               TableName=self.subscribers_table, Key=_pk(item["pk"]),
                               ConditionExpression="#at < :before",
                               **_expression("#at < :before", **values))
                except _Refused:
                    continue  # recorded again meanwhile
                dropped += 1
        return dropped

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """One use of ``key`` in a fixed window of ``window``; False (nothing counted) once
        ``limit`` uses fall in it.

        Two conditional updates, each atomic: start a new window (the counter is absent or
        its window is over), else count one more use if fewer than ``limit`` were counted in
        the current window. If the second is refused because the window ended or the item
        vanished (TTL) in between, the first is tried again. The item expires (TTL) when its
        window ends. ``key`` should be a hash: it is stored.
        """
        if limit < 1 or window <= timedelta(0):
            raise ValueError("limit must be at least 1 and window positive")
        stamp, start = encode_time(now), encode_time(now - window)
        item_key = _pk(QUOTA_PREFIX + key)
        for _ in range(_RACE_TRIES):
            with contextlib.suppress(_Refused):
                self._update(self.subscribers_table, item_key,
                             "SET #window_start = :now, #count = :one, #expires_at = :expires",
                             "attribute_not_exists(#pk) OR #window_start <= :start",
                             now=stamp, one=1, expires=_epoch(now + window), start=start)
                return True
            try:
                self._update(self.subscribers_table, item_key, "SET #count = #count + :one",
                             "attribute_exists(#pk) AND #window_start > :start "
                             "AND #count < :limit", one=1, start=start, limit=limit)
                return True
            except _Refused as refused:
                current = refused.item
                if current is not None and current["window_start"] > start:
                    return False  # the current window's uses are all taken
        raise self._race_error(self.subscribers_table, "take_quota")

    def return_quota(self, key: str) -> None:
        """Give back one use of ``key`` (a confirmation mail that was not sent)."""
        with contextlib.suppress(_Refused):  # nothing to give back
            self._update(self.subscribers_table, _pk(QUOTA_PREFIX + key),
                         "SET #count = #count - :one", "attribute_exists(#pk) AND #count > :zero",
                         one=1, zero=0)

    def remove(self, email: str, now: datetime) -> bool:
        """Erase a subscriber; True if there was one. The address stays refused for good.

        One transaction deletes ``sub#`` and ``email#`` and writes ``supp#<sha256>``; then
        **all the subscriber's ledger rows** are deleted. The ledger has no index by
        subscriber, so they are found by a Scan of the ledger table filtered on the id:
        a full read of the ledger, acceptable for a rare operator action. Until that is done
        the suppression item notes the id (``purge_ledger``), so a remove interrupted between
        the two steps is finished by the next ``remove`` of the address. DynamoDB keeps no
        copy of deleted items (except in backups, if the table has them).
        An address that is not stored is left alone (False), not suppressed.
        """
        normal = normalise_email(email)
        key = email_key(normal)
        supp_key = _pk(SUPPRESSION_PREFIX + suppression_hash(normal))
        stamp = encode_time(now)
        for _ in range(_RACE_TRIES):
            subscriber_id = self._id_of(key)
            if subscriber_id is None:
                self._finish_purge(supp_key)
                return False
            delete_sub = "attribute_exists(#pk)"
            delete_email = "#subscriber_id = :id"
            suppress = "SET #created_at = if_not_exists(#created_at, :now), #purge_ledger = :id"
            actions = [
                {"Delete": {"TableName": self.subscribers_table,
                            "Key": _pk(SUBSCRIBER_PREFIX + subscriber_id),
                            "ConditionExpression": delete_sub, **_expression(delete_sub)}},
                {"Delete": {"TableName": self.subscribers_table,
                            "Key": _pk(EMAIL_INDEX_PREFIX + key),
                            "ConditionExpression": delete_email,
                            **_expression(delete_email, id=subscriber_id)}},
                {"Update": {"TableName": self.subscribers_table, "Key": supp_key,
                            "UpdateExpression": suppress,
                            **_expression(suppress, now=stamp, id=subscriber_id)}},
            ]
            try:
                self._call(self.subscribers_table, "transact_write_items", TransactItems=actions)
            except _Refused:
                continue  # removed or replaced meanwhile: look again
            self._purge_ledger(subscriber_id)
            self._clear_purge(supp_key, subscriber_id)
            return True
        raise self._race_error(self.subscribers_table, "remove")

    def _finish_purge(self, supp_key: dict[str, Any]) -> None:
        item = self._get(self.subscribers_table, supp_key)
        if item and item.get("purge_ledger"):
            self._purge_ledger(item["purge_ledger"])
            self._clear_purge(supp_key, item["purge_ledger"])

    def _purge_ledger(self, subscriber_id: str) -> None:
        projection = "#issue_id, #subscriber_id"
        condition = "#subscriber_id = :id"
        for page in self._pages(self.ledger_table, "scan", TableName=self.ledger_table,
                                ConsistentRead=True, ProjectionExpression=projection,
                                FilterExpression=condition,
                                **_expression(projection, condition, id=subscriber_id)):
            for item in page:
                self._call(self.ledger_table, "delete_item", TableName=self.ledger_table,
                           Key=_ledger_key(item["issue_id"], item["subscriber_id"]))

    def _clear_purge(self, supp_key: dict[str, Any], subscriber_id: str) -> None:
        with contextlib.suppress(_Refused):
            self._update(self.subscribers_table, supp_key, "REMOVE #purge_ledger",
                         "#purge_ledger = :id", id=subscriber_id)

    def is_suppressed(self, email: str) -> bool:
        """Whether this address was removed (compared by hash; any case)."""
        normal = normalise_email(email)
        return self._get(self.subscribers_table,
                         _pk(SUPPRESSION_PREFIX + suppression_hash(normal))) is not None

    # -- ledger ----------------------------------------------------------------------------

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        """Take (issue, subscriber) for sending, before the transport is called.

        True for exactly one caller: the row is put as ``sending`` only if absent
        (``attribute_not_exists(subscriber_id)``). With ``retry`` an ``unconfirmed`` row or
        a temporary failure is taken over instead; with ``retry_temporary`` only a temporary
        failure is: one update conditional on that status, adding one to ``attempts``.
        ``sent``, ``sending`` and permanent failures are never taken.
        """
        stamp = encode_time(now)
        row = {"issue_id": issue_id, "subscriber_id": subscriber_id, "status": "sending",
               "permanent": False, "attempts": 1, "updated_at": stamp, "handed_over": False}
        with contextlib.suppress(_Refused):
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
            self._update(self.ledger_table, _ledger_key(issue_id, subscriber_id), update,
                         condition, sending="sending", false=False, one=1, now=stamp,
                         unconfirmed="unconfirmed", failed="failed")
        except _Refused:
            return False
        return True

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        """The transport took the message and called it ``message_id``: recorded whatever
        the row said before (an unconditional update; the transport's answer is the truth,
        and ``sent`` is final)."""
        self._update(self.ledger_table, _ledger_key(issue_id, subscriber_id),
                     "SET #status = :sent, #message_id = :message_id, #permanent = :false, "
                     "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                     "REMOVE #reason", None, sent="sent", message_id=message_id, false=False,
                     now=encode_time(now), one=1)

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        """The transport refused the message; ``permanent`` if this recipient never will
        take it. A ``sent`` row is never downgraded (the update's condition)."""
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        """The transport may have taken it (a timeout): never re-sent without ``retry``.
        A ``sent`` row is never downgraded."""
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with contextlib.suppress(_Refused):  # delivered: stays so
            self._update(self.ledger_table, _ledger_key(issue_id, subscriber_id),
                         "SET #status = :status, #reason = :reason, #permanent = :permanent, "
                         "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                         "REMOVE #message_id",
                         "attribute_not_exists(#subscriber_id) OR #status <> :sent",
                         status=status, reason=reason, permanent=bool(permanent),
                         now=encode_time(now), one=1, sent="sent")

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        """Drop a ``sending`` claim whose message never reached the transport; True if a
        claim was dropped (a delete conditional on the status)."""
        try:
            self._call(self.ledger_table, "delete_item", TableName=self.ledger_table,
                       Key=_ledger_key(issue_id, subscriber_id),
                       ConditionExpression="#status = :sending",
                       **_expression("#status = :sending", sending="sending"))
        except _Refused:
            return False
        return True

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """The claim's message goes to the transport now (``handed``), or came back untaken
        (a temporary failure): an update conditional on the row still being ``sending``."""
        with contextlib.suppress(_Refused):  # settled meanwhile: nothing to note
            self._update(self.ledger_table, _ledger_key(issue_id, subscriber_id),
                         "SET #handed_over = :handed", "#status = :sending",
                         handed=bool(handed), sending="sending")

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """Settle every ``sending`` row of ``issue_id`` (of ``shard`` only, if given); how
        many became ``unconfirmed``.

        A strongly consistent Query of the issue's ``sending`` rows, then per row either a
        delete (never handed over: nothing left, this run sends it) or an update to
        ``unconfirmed`` (handed over, or written before the flag existed), each conditional
        on the row being as read; only the updates that happened are counted. Call it at the
        start of a run, while holding the run's lease.
        """
        stamp = encode_time(now)
        condition = "#issue_id = :issue"
        status_filter = "#status = :sending"
        changed = 0
        for page in self._pages(self.ledger_table, "query", TableName=self.ledger_table,
                                ConsistentRead=True, KeyConditionExpression=condition,
                                FilterExpression=status_filter,
                                ProjectionExpression="#subscriber_id, #handed_over",
                                **_expression(condition, status_filter, "#subscriber_id",
                                              "#handed_over", issue=issue_id,
                                              sending="sending")):
            for item in page:
                subscriber_id = item["subscriber_id"]
                if shard is not None and subscriber_id not in shard:
                    continue
                key = _ledger_key(issue_id, subscriber_id)
                if item.get("handed_over") is False:
                    unhanded = "#status = :sending AND #handed_over = :false"
                    with contextlib.suppress(_Refused):  # handed over or settled meanwhile
                        self._call(self.ledger_table, "delete_item",
                                   TableName=self.ledger_table, Key=key,
                                   ConditionExpression=unhanded,
                                   **_expression(unhanded, sending="sending", false=False))
                    continue
                try:
                    self._update(self.ledger_table, key,
                                 "SET #status = :unconfirmed, #reason = :reason, "
                                 "#updated_at = :now", "#status = :sending",
                                 unconfirmed="unconfirmed", reason=IN_FLIGHT_REASON,
                                 now=stamp, sending="sending")
                except _Refused:
                    continue  # its outcome arrived meanwhile
                changed += 1
        return changed

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """A bounce or complaint about the message SES called ``message_id``: noted on its
        ledger row (a complaint outranks a bounce). The issue's id, or None for an unknown
        id. The row is found through the ``by_message_id`` index (eventually consistent:
        SES's feedback comes seconds after the send at the earliest)."""
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        condition = "#message_id = :message_id"
        found = None
        for page in self._pages(self.ledger_table, "query", TableName=self.ledger_table,
                                IndexName=MESSAGE_INDEX, KeyConditionExpression=condition,
                                **_expression(condition, message_id=message_id)):
            if page:
                found = page[0]
                break
        if found is None:
            return None
        self.note_feedback(str(found["issue_id"]), str(found["subscriber_id"]), kind)
        return str(found["issue_id"])

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        """Feedback on the row of (issue, subscriber) (a complaint outranks a bounce);
        True if the row is there."""
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        guard = "attribute_exists(#subscriber_id)" + (
            "" if kind == "complaint" else " AND attribute_not_exists(#feedback)")
        try:
            self._update(self.ledger_table, _ledger_key(issue_id, subscriber_id),
                         "SET #feedback = :kind", guard, kind=kind)
        except _Refused as refused:  # no row, or a complaint (or this bounce) already
            return bool(refused.item)
        return True

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        """Ledger rows of the issue with each kind of feedback (every kind present)."""
        counts = dict.fromkeys(FEEDBACK, 0)
        for item in self._issue_rows(issue_id, "#feedback", "attribute_exists(#feedback)"):
            counts[item["feedback"]] += 1
        return counts

    # -- leases ----------------------------------------------------------------------------

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """Take the lease unless another owner holds it unexpired; extend it if ``owner``
        holds it. The lease as it now stands (compare its ``owner`` to know who won).

        First an update conditional on ``owner`` holding it (extends it, keeping
        ``acquired_at``), else a put conditional on the lease being absent or expired and
        someone else's; a refused put returns the holder's lease (read from the refusal).
        """
        stamp, until = encode_time(now), encode_time(now + ttl)
        key = _pk(LEASE_PREFIX + name)
        for _ in range(_RACE_TRIES):
            with contextlib.suppress(_Refused):
                item = self._update(self.subscribers_table, key,
                                    "SET #expires_at_iso = :until", "#owner = :owner",
                                    until=until, owner=owner)
                return _lease(name, item)
            item = {"pk": LEASE_PREFIX + name, "owner": owner, "acquired_at": stamp,
                    "expires_at_iso": until}
            try:
                self._put(self.subscribers_table, item,
                          "attribute_not_exists(#pk) OR "
                          "(#expires_at_iso <= :now AND #owner <> :owner)",
                          now=stamp, owner=owner)
                return _lease(name, item)
            except _Refused as refused:
                if refused.item is not None and refused.item["owner"] != owner:
                    return _lease(name, refused.item)
        raise self._race_error(self.subscribers_table, "acquire_lease")

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        """Extend a lease ``owner`` holds; False if it was lost (expired and taken over)."""
        try:
            self._update(self.subscribers_table, _pk(LEASE_PREFIX + name),
                         "SET #expires_at_iso = :until", "#owner = :owner",
                         until=encode_time(now + ttl), owner=owner)
        except _Refused:
            return False
        return True

    def release_lease(self, name: str, owner: str) -> None:
        """Give the lease up, if ``owner`` still holds it."""
        with contextlib.suppress(_Refused):
            self._call(self.subscribers_table, "delete_item", TableName=self.subscribers_table,
                       Key=_pk(LEASE_PREFIX + name), ConditionExpression="#owner = :owner",
                       **_expression("#owner = :owner", owner=owner))

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        """The ledger of one issue (rows with ``status`` only, if given), by subscriber id,
        in subscriber id order (the table's sort key)."""
        if status is not None and status not in LEDGER_STATUSES:
            raise ValueError(f"unknown ledger status {status!r}")
        rows = self._issue_rows(issue_id, None,
                                "#status = :status" if status else None, status=status)
        return {item["subscriber_id"]: _entry(item) for item in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        """One (issue, subscriber) row, or None if it was never claimed. For reports only."""
        item = self._get(self.ledger_table, _ledger_key(issue_id, subscriber_id))
        return _entry(item) if item else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        """Rows per ledger status for one issue; every status is present (0 if none)."""
        counts = dict.fromkeys(LEDGER_STATUSES, 0)
        for item in self._issue_rows(issue_id, "#status", None):
            counts[item["status"]] += 1
        return counts

    def _issue_rows(self, issue_id: str, projection: str | None, row_filter: str | None,
                    **values: Any) -> Iterator[dict[str, Any]]:
        condition = "#issue_id = :issue"
        params: dict[str, Any] = {"TableName": self.ledger_table, "ConsistentRead": True,
                                  "KeyConditionExpression": condition}
        if projection:
            params["ProjectionExpression"] = projection
        if row_filter:
            params["FilterExpression"] = row_filter
        params.update(_expression(condition, projection, row_filter, issue=issue_id, **values))
        for page in self._pages(self.ledger_table, "query", **params):
            yield from page

    # -- migration (``newsletter store migrate``) --------------------------------------------

    def missing_tables(self) -> list[str]:
        """Which of the two tables do not exist (DescribeTable)."""
        missing = []
        for table in (self.subscribers_table, self.ledger_table):
            try:
                self._client.describe_table(TableName=table)
            except ClientError as exc:
                if _code(exc) != "ResourceNotFoundException":
                    raise self._error(exc, table) from exc
                missing.append(table)
            except BotoCoreError as exc:
                raise self._error(exc, table) from exc
        return missing

    def export(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Everything ``store migrate --to sqlite`` copies, as (kind, record) with SQLite's
        column names and values: ``subscriber``, ``suppression``, ``seen``, ``area`` and
        ``ledger``. Strongly consistent Scans of both tables, a page at a time; rate counters
        and leases are left out (short-lived, started afresh)."""
        for page in self._pages(self.subscribers_table, "scan",
                                TableName=self.subscribers_table, ConsistentRead=True):
            for item in page:
                key = str(item.get("pk", ""))
                if key.startswith(SUBSCRIBER_PREFIX):
                    row = {name: item.get(name) for name in _SUBSCRIBER_FIELDS}
                    row["areas"] = row["areas"] or ""  # no attribute: SQLite's '' for none
                    row["transient_bounces"] = int(row["transient_bounces"] or 0)
                    yield "subscriber", row
                elif key.startswith(SUPPRESSION_PREFIX):
                    yield "suppression", {"email_hash": key[len(SUPPRESSION_PREFIX):],
                                          "created_at": item["created_at"]}
                elif key.startswith(SEEN_PREFIX):
                    yield "seen", {"key": key[len(SEEN_PREFIX):], "at": item["at"]}
                elif key == CATALOG_KEY:
                    for name in sorted(item.get("names") or ()):
                        yield "area", {"name": name}
        for page in self._pages(self.ledger_table, "scan", TableName=self.ledger_table,
                                ConsistentRead=True):
            for item in page:
                row = {name: item.get(name) for name in _LEDGER_FIELDS}
                row["permanent"] = int(bool(row["permanent"]))
                row["attempts"] = int(row["attempts"] if row["attempts"] is not None else 1)
                # Missing: a claim from before the attribute, counted as handed over.
                row["handed_over"] = int(row["handed_over"] is not False)
                yield "ledger", row

    def copy_subscriber(self, record: Mapping[str, Any], *,
                        dry_run: bool = False) -> tuple[Copied, str | None]:
        """Store a subscriber exactly as given (id, address, status, consent record: what
        another store holds), unless its address or id is already here; with the reason
        when it is a conflict. ``record`` has the fields of a ``sub#`` item (timestamps as
        stored text, None for none). The same transaction as :meth:`add`: an address stays
        unique and a suppressed one is not brought back.
        """
        record = {name: record.get(name) for name in _SUBSCRIBER_FIELDS}
        record["areas"] = record["areas"] or None  # SQLite's '' for none: no attribute
        key = record["email_key"]
        if dry_run:
            existing_id = self._id_of(key)
            if existing_id is None:
                if self.is_suppressed(record["email"]):
                    return Copied.CONFLICT, "the address was removed (suppressed) in DynamoDB"
                if self._get_subscriber_item(record["id"]) is not None:
                    return Copied.CONFLICT, "its id belongs to another address in DynamoDB"
                return Copied.COPIED, None
            outcome = "exists"
        else:
            outcome, existing_id = self._insert(record)
        if outcome == "created":
            return Copied.COPIED, None
        if outcome == "suppressed":
            return Copied.CONFLICT, "the address was removed (suppressed) in DynamoDB"
        if outcome == "id-taken":
            return Copied.CONFLICT, "its id belongs to another address in DynamoDB"
        if existing_id == record["id"]:
            return Copied.PRESENT, None
        return Copied.CONFLICT, f"the address is in DynamoDB under another id ({existing_id})"

    def copy_suppression(self, email_hash: str, created_at: str, *,
                         dry_run: bool = False) -> Copied:
        """Store a suppression entry (the sha256 another store kept) unless present."""
        item = {"pk": SUPPRESSION_PREFIX + email_hash, "created_at": created_at}
        return self._copy(self.subscribers_table, item, "#pk", dry_run)

    def copy_ledger_row(self, record: Mapping[str, Any], *, dry_run: bool = False) -> Copied:
        """Store a ledger row as given unless the (issue, subscriber) row exists."""
        item = {name: record.get(name) for name in _LEDGER_FIELDS}
        item["permanent"] = bool(item["permanent"])
        item["attempts"] = int(item["attempts"] if item["attempts"] is not None else 1)
        # SQLite's 0/1; a row from before the column was added counts as handed over there.
        item["handed_over"] = bool(item["handed_over"] if item["handed_over"] is not None
                                   else True)
        return self._copy(self.ledger_table, item, "#subscriber_id", dry_run)

    def copy_seen(self, key: str, at: str, *, dry_run: bool = False) -> Copied:
        """Store a handled-message key (recorded at ``at``, stored text) unless present."""
        item = {"pk": SEEN_PREFIX + key, "at": at,
                TTL_ATTRIBUTE: _epoch(decode_time(at) + SEEN_RETENTION)}
        return self._copy(self.subscribers_table, item, "#pk", dry_run)

    def _copy(self, table: str, item: dict[str, Any], key_name: str, dry_run: bool) -> Copied:
        if dry_run:
            if table == self.ledger_table:
                key = _ledger_key(item["issue_id"], item["subscriber_id"])
            else:
                key = _pk(item["pk"])
            return Copied.PRESENT if self._get(table, key) is not None else Copied.COPIED
        try:
            self._put(table, item, f"attribute_not_exists({key_name})")
        except _Refused:
            return Copied.PRESENT
        return Copied.COPIED

    # -- requests ----------------------------------------------------------------------------

    def _insert(self, record: dict[str, Any]) -> tuple[str, str | None]:
        """Put a subscriber and its address in one transaction, if the address is new, the id
        unused and the address not suppressed. ``("created", None)``, ``("suppressed",
        None)``, ``("id-taken", None)`` or ``("exists", id of the address's subscriber)``."""
        absent = "attribute_not_exists(#pk)"
        names = _expression(absent)
        email_item = {"pk": EMAIL_INDEX_PREFIX + record["email_key"],
                      "subscriber_id": record["id"]}
        actions = [
            {"ConditionCheck": {"TableName": self.subscribers_table,
                                "Key": _pk(SUPPRESSION_PREFIX + suppression_hash(record["email"])),
                                "ConditionExpression": absent, **names}},
            {"Put": {"TableName": self.subscribers_table,
                     "Item": _serialise({"pk": SUBSCRIBER_PREFIX + record["id"], **record}),
                     "ConditionExpression": absent, **names}},
            {"Put": {"TableName": self.subscribers_table, "Item": _serialise(email_item),
                     "ConditionExpression": absent, **names,
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        ]
        try:
            self._call(self.subscribers_table, "transact_write_items", TransactItems=actions)
        except _Refused as refused:
            if refused.failed(0):
                return "suppressed", None
            if refused.failed(2):
                old = refused.reasons[2][1]
                existing = old["subscriber_id"] if old else self._id_of(record["email_key"])
                return "exists", existing
            return "id-taken", None
        return "created", None

    def _id_of(self, key: str) -> str | None:
        item = self._get(self.subscribers_table, _pk(EMAIL_INDEX_PREFIX + key))
        return item["subscriber_id"] if item else None

    def _get_subscriber_item(self, subscriber_id: str) -> dict[str, Any] | None:
        return self._get(self.subscribers_table, _pk(SUBSCRIBER_PREFIX + subscriber_id))

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self._call(table, "get_item", TableName=table, Key=key, ConsistentRead=True)
        item = response.get("Item")
        return _plain(item) if item else None

    def _put(self, table: str, item: dict[str, Any], condition: str, **values: Any) -> None:
        self._call(table, "put_item", TableName=table, Item=_serialise(item),
                   ConditionExpression=condition,
                   ReturnValuesOnConditionCheckFailure="ALL_OLD",
                   **_expression(condition, **values))

    def _update(self, table: str, key: dict[str, Any], update: str, condition: str | None,
                **values: Any) -> dict[str, Any]:
        """One UpdateItem; the item as it now is, or _Refused with the item as it was."""
        params: dict[str, Any] = {"TableName": table, "Key": key, "UpdateExpression": update,
                                  "ReturnValues": "ALL_NEW"}
        if condition:
            params["ConditionExpression"] = condition
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        params.update(_expression(update, condition, **values))
        return _plain(self._call(table, "update_item", **params).get("Attributes") or {})

    def _pages(self, table: str, operation: str,
               **params: Any) -> Iterator[list[dict[str, Any]]]:
        """The pages of a Query or Scan, each requested when the previous one is used up."""
        while True:
            response = self._call(table, operation, **params)
            yield [_plain(item) for item in response.get("Items", ())]
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            params["ExclusiveStartKey"] = last

    def _call(self, table: str, operation: str, **params: Any) -> dict[str, Any]:
        """One request; a refused condition as _Refused, any other failure as StoreError.

        Transactions cancelled by another transaction on the same items (not by a
        condition) are tried again with a short random backoff; botocore's standard retries
        already cover throttling and 5xx.
        """
        try:
            return retry.call(lambda: self._once(table, operation, params), retry_on=_Conflict,
                              attempts=_CONFLICT_TRIES,
                              wait=lambda n, _: retry.backoff(n, base=0.02, cap=math.inf,
                                                              jitter="full"))
        except retry.GaveUp as gave_up:
            failure = cast(_Conflict, gave_up.last).error
            raise self._error(failure, table) from failure

    def _once(self, table: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request of :meth:`_call`; a conflict worth another try as :class:`_Conflict`."""
        try:
            answer: dict[str, Any] = getattr(self._client, operation)(**params)
            return answer
        except ClientError as exc:
            code = _code(exc)
            if code == "ConditionalCheckFailedException":
                item = exc.response.get("Item")
                raise _Refused(_plain(item) if isinstance(item, Mapping) and item else None,
                               []) from None
            if code == "TransactionCanceledException":
                reasons = [(str(r.get("Code", "None")),
                            _plain(r["Item"]) if r.get("Item") else None)
                           for r in exc.response.get("CancellationReasons") or ()]
                codes = {reason for reason, _ in reasons}
                if "ConditionalCheckFailed" in codes:
                    raise _Refused(None, reasons) from None
                if codes & _RETRYABLE_REASONS:
                    raise _Conflict(exc) from exc
            elif code == "TransactionConflictException":
                raise _Conflict(exc) from exc
            raise self._error(exc, table) from exc
        except BotoCoreError as exc:
            raise self._error(exc, table) from exc

    def _error(self, exc: Exception, table: str) -> StoreError:
        region = getattr(getattr(self._client, "meta", None), "region_name", None)
        return StoreError(f"dynamodb:{table}", dynamo_reason(exc, table, region))

    def _race_error(self, table: str, doing: str) -> StoreError:
        return StoreError(f"dynamodb:{table}", f"{doing}: the item kept changing under "
                          f"concurrent writers ({_RACE_TRIES} tries); try again")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


# -- items -----------------------------------------------------------------------------------

#: The attributes of a ``sub#`` item besides ``pk`` (the SQLite columns, same names).
#: Every attribute of a ``sub#`` item and of a ledger item, named as SQLite's columns are:
#: what :meth:`DynamoStore.copy_subscriber` and :meth:`DynamoStore.copy_ledger_row` keep.
_SUBSCRIBER_FIELDS = ("id", "email", "email_key", "status", "layout", "consent_at",
                      "consent_source", "created_at", "confirmed_at", "updated_at",
                      "consent_ip", "transient_bounces", "areas", "mail_event_at")
_LEDGER_FIELDS = ("issue_id", "subscriber_id", "status", "message_id", "reason", "permanent",
                  "attempts", "updated_at", "feedback", "handed_over")


def _new_record(normal: str, status: str, layout: str, source: str, stamp: str,
                consent_at: str | None, areas: str) -> dict[str, Any]:
    """A new ``sub#`` item's attributes; ``areas`` is :func:`encode_areas`'s text, left out
    (None) when empty, as :func:`_serialise` leaves out every None."""
    return {"id": new_subscriber_id(), "email": normal, "email_key": email_key(normal),
            "status": status, "layout": layout, "consent_at": consent_at,
            "consent_source": source, "created_at": stamp, "confirmed_at": consent_at,
            "updated_at": stamp, "consent_ip": None, "transient_bounces": 0,
            "areas": areas or None}


def _time(when: datetime | None) -> str | None:
    return encode_time(when) if when is not None else None


def _pk(value: str) -> dict[str, Any]:
    return {"pk": {"S": value}}


def _ledger_key(issue_id: str, subscriber_id: str) -> dict[str, Any]:
    return {"issue_id": {"S": issue_id}, "subscriber_id": {"S": subscriber_id}}


def _serialise(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item in DynamoDB's JSON; None-valued attributes are left out (never NULL: an index
    key attribute must be a string or absent)."""
    return {name: _SERIALIZER.serialize(value) for name, value in item.items()
            if value is not None}


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}


def _expression(*parts: str | None, **values: Any) -> dict[str, Any]:
    """ExpressionAttributeNames/Values for expressions written with ``#name`` for every
    attribute and ``:name`` for every value: exactly those used (DynamoDB refuses unused
    ones), values serialised."""
    text = " ".join(part for part in parts if part)
    params: dict[str, Any] = {}
    names = sorted(set(_NAMES.findall(text)))
    if names:
        params["ExpressionAttributeNames"] = {f"#{name}": name for name in names}
    used = sorted(set(_VALUES.findall(text)))
    if used:
        params["ExpressionAttributeValues"] = {f":{name}": _SERIALIZER.serialize(values[name])
                                               for name in used}
    return params


def _epoch(when: datetime) -> int:
    """Epoch seconds for TTL, rounded up: an item never expires before ``when``."""
    return math.ceil(when.astimezone(UTC).timestamp())


def _subscriber(item: Mapping[str, Any]) -> Subscriber:
    return Subscriber(
        id=item["id"],
        email=item["email"],
        status=item["status"],
        layout=item["layout"],
        consent_at=decode_time_or_none(item.get("consent_at")),
        consent_source=item["consent_source"],
        created_at=decode_time(item["created_at"]),
        confirmed_at=decode_time_or_none(item.get("confirmed_at")),
        updated_at=decode_time(item["updated_at"]),
        consent_ip=item.get("consent_ip"),
        transient_bounces=int(item.get("transient_bounces", 0)),
        areas=decode_areas(item.get("areas")),
    )


def _entry(item: Mapping[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        issue_id=item["issue_id"],
        subscriber_id=item["subscriber_id"],
        status=item["status"],
        message_id=item.get("message_id"),
        reason=item.get("reason"),
        permanent=bool(item.get("permanent", False)),
        attempts=int(item.get("attempts", 1)),
        updated_at=decode_time(item["updated_at"]),
    )


def _lease(name: str, item: Mapping[str, Any]) -> Lease:
    return Lease(name, item["owner"], decode_time(item["acquired_at"]),
                 decode_time(item["expires_at_iso"]))
