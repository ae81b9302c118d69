"""What only the DynamoDB store has (tests/test_store.py holds what both share): its tables'
schema, the items it writes, TTL, the ``by_status`` index read in pages, uniqueness under many
clients, and AWS failures as one-line StoreErrors. What moto cannot fail on demand is injected
on the wire with botocore's ``before-send`` hook, shaped as DynamoDB answers it.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from pipeline.wiring import open_store
from subscribers.errors import StoreError
from subscribers.model import STATUSES, AddOutcome, NewSubscriber
from subscribers.store.dynamo import SEEN_RETENTION, DynamoStore

pytest_plugins = ["support.dynamo_support"]

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
ISSUE = "2026-W48"


@pytest.fixture
def store(dynamo) -> DynamoStore:
    opened: DynamoStore = dynamo.open()
    return opened


# -- the wire --------------------------------------------------------------------------------

class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def dynamo_error(status: int, code: str, message: str, **extra: Any) -> AWSResponse:
    """An error answer in DynamoDB's JSON shape."""
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}",
                       "message": message, **extra}).encode()
    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", status,
                       HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"}),
                       _Raw(body))


@dataclass
class Wire:
    """Requests that left one client, by operation (with their parameters), and canned
    answers (or functions of the request giving one): each operation's list is used up one
    answer per request, then moto answers."""

    calls: Counter[str] = field(default_factory=Counter)
    params: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answers: dict[str, list[AWSResponse | Callable[[Any], AWSResponse]]] = field(
        default_factory=dict)

    def before_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.params.append((model.name, json.loads(params["body"] or b"{}")))

    def before_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        self.calls[operation] += 1
        queued = self.answers.get(operation)
        if not queued:
            return None
        answer = queued.pop(0)
        return answer if isinstance(answer, AWSResponse) else answer(request)


def watch(store: DynamoStore) -> Wire:
    wire = Wire()
    store.client.meta.events.register("before-call.dynamodb", wire.before_call)
    # A before-send handler returns the answer to use instead of sending; botocore-stubs
    # types every handler as returning None.
    store.client.meta.events.register("before-send.dynamodb",
                                      wire.before_send)  # type: ignore[arg-type]
    return wire


def shape(client: Any, table: str) -> dict[str, Any]:
    """What a table is made of: its keys, attribute types, billing and one index."""
    found = client.describe_table(TableName=table)["Table"]
    [index] = found["GlobalSecondaryIndexes"]
    return {"status": found["TableStatus"], "billing": found["BillingModeSummary"]["BillingMode"],
            "key": found["KeySchema"], "index": (index["IndexName"], index["KeySchema"],
                                                 index["Projection"]["ProjectionType"]),
            "types": {a["AttributeName"]: a["AttributeType"]
                      for a in found["AttributeDefinitions"]}}


# -- tables ----------------------------------------------------------------------------------

def test_the_tables_have_exactly_the_documented_schema(dynamo):
    assert shape(dynamo.client, dynamo.subscribers_table) == {
        "status": "ACTIVE", "billing": "PAY_PER_REQUEST",
        "key": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "index": ("by_status", [{"AttributeName": "status", "KeyType": "HASH"},
                                {"AttributeName": "id", "KeyType": "RANGE"}], "ALL"),
        "types": {"pk": "S", "status": "S", "id": "S"}}
    ttl = dynamo.client.describe_time_to_live(TableName=dynamo.subscribers_table)
    assert ttl["TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED",
                                            "AttributeName": "expires_at"}
    assert shape(dynamo.client, dynamo.ledger_table) == {
        "status": "ACTIVE", "billing": "PAY_PER_REQUEST",
        "key": [{"AttributeName": "issue_id", "KeyType": "HASH"},
                {"AttributeName": "subscriber_id", "KeyType": "RANGE"}],
        "index": ("by_message_id", [{"AttributeName": "message_id", "KeyType": "HASH"}],
                  "KEYS_ONLY"),
        "types": {"issue_id": "S", "subscriber_id": "S", "message_id": "S"}}


def test_settings_choose_the_dynamodb_store(dynamo):
    with open_store(dynamo.settings) as store:
        assert isinstance(store, DynamoStore)
        assert (store.subscribers_table, store.ledger_table) == (
            "vllm-pr-weekly-subscribers", "vllm-pr-weekly-ledger")
        assert repr(store) == "DynamoStore('vllm-pr-weekly-subscribers', 'vllm-pr-weekly-ledger')"
        assert store.add("x@example.org", source="t", now=NOW).created


# -- items -----------------------------------------------------------------------------------

def test_a_subscriber_is_two_items_and_timestamps_are_iso_text(dynamo, store):
    sub = store.add("Li.Wei@Example.org", "zh", status="active", source="cli",
                    now=NOW).subscriber
    items = {item["pk"]["S"]: item for item in dynamo.items()}
    assert set(items) == {f"sub#{sub.id}", "email#li.wei@example.org"}
    assert items["email#li.wei@example.org"]["subscriber_id"] == {"S": sub.id}
    record = items[f"sub#{sub.id}"]
    assert record["email"] == {"S": "Li.Wei@example.org"}
    assert record["email_key"] == {"S": "li.wei@example.org"}
    assert record["status"] == {"S": "active"} and record["layout"] == {"S": "zh"}
    assert record["created_at"] == {"S": "2026-11-30T01:00:00.000000Z"}
    assert record["consent_at"] == record["confirmed_at"] == record["created_at"]
    assert record["transient_bounces"] == {"N": "0"}
    assert "consent_ip" not in record  # nothing stored for none (never a NULL)
    # The by_status index is sparse: it holds subscribers only.
    indexed = dynamo.client.scan(TableName=dynamo.subscribers_table, IndexName="by_status")
    assert [item["pk"]["S"] for item in indexed["Items"]] == [f"sub#{sub.id}"]


def test_a_ledger_row_keeps_its_fields_and_drops_what_is_unset(dynamo, store):
    sid = "a" * 24
    assert store.claim(ISSUE, sid, NOW)
    [claimed] = dynamo.items(dynamo.ledger_table)
    assert claimed == {"issue_id": {"S": ISSUE}, "subscriber_id": {"S": sid},
                       "status": {"S": "sending"}, "permanent": {"BOOL": False},
                       "attempts": {"N": "1"}, "updated_at": {"S": "2026-11-30T01:00:00.000000Z"},
                       "handed_over": {"BOOL": False}}
    store.mark_handed_over(ISSUE, sid)
    [handed] = dynamo.items(dynamo.ledger_table)
    assert handed["handed_over"] == {"BOOL": True}
    store.mark_sent(ISSUE, sid, "ses-1", NOW)
    store.record_feedback("ses-1", "bounce", NOW)
    [sent] = dynamo.items(dynamo.ledger_table)
    assert sent["message_id"] == {"S": "ses-1"} and sent["feedback"] == {"S": "bounce"}
    entry = store.ledger_entry(ISSUE, sid)
    assert entry.status == "sent" and entry.updated_at.tzinfo is UTC


def test_seen_keys_and_quota_counters_carry_the_ttl_attribute(dynamo, store):
    assert store.first_time("sns:abc", NOW)
    window = timedelta(hours=1)
    late = NOW + timedelta(seconds=0.5)  # not on a whole second: TTL is rounded up
    assert store.take_quota("k", late, limit=2, window=window)
    assert store.take_quota("k", late, limit=2, window=window)
    items = {item["pk"]["S"]: item for item in dynamo.items()}
    seen = items["seen#sns:abc"]
    assert seen["at"] == {"S": "2026-11-30T01:00:00.000000Z"}
    assert seen["expires_at"] == {"N": str(int((NOW + SEEN_RETENTION).timestamp()))}
    quota = items["quota#k"]
    assert quota["count"] == {"N": "2"}
    assert quota["expires_at"] == {"N": str(math.ceil((late + window).timestamp()))}
    assert int(quota["expires_at"]["N"]) >= (late + window).timestamp()
    # A lease is not collected by TTL: an expired one may still be renewed by its holder.
    store.acquire_lease("send:x", "me", NOW, window)
    assert "expires_at" not in {item["pk"]["S"]: item for item in dynamo.items()}["lease#send:x"]


# -- concurrency -----------------------------------------------------------------------------

def test_eight_clients_adding_one_address_create_it_once(dynamo):
    stores = [dynamo.open() for _ in range(8)]
    rounds = 6
    outcomes: list[list[AddOutcome]] = [[] for _ in range(rounds)]
    lock = threading.Lock()
    barrier = threading.Barrier(len(stores))

    def worker(n: int, store: DynamoStore) -> None:
        for r in range(rounds):
            barrier.wait()
            spelling = f"Same{r}@Example.org" if n % 2 else f"same{r}@example.ORG"
            result = store.add(spelling, status="active" if n == 3 else "pending",
                               source="test", now=NOW)
            with lock:
                outcomes[r].append(result.outcome)

    threads = [threading.Thread(target=worker, args=(n, s)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for each in outcomes:
        assert each.count(AddOutcome.CREATED) == 1
        assert len(each) == 8
        assert set(each) <= {AddOutcome.CREATED, AddOutcome.EXISTING, AddOutcome.ACTIVATED}
    assert len(dynamo.keys("sub#")) == rounds == len(dynamo.keys("email#"))
    assert stores[0].count_by_status()["active"] == rounds  # the --confirmed one won or upgraded


# -- listing ---------------------------------------------------------------------------------

def test_every_status_is_listed_in_one_id_order(store):
    ids: dict[str, list[str]] = {status: [] for status in STATUSES}
    for n in range(23):
        sub = store.add(f"r{n}@example.org", status="active", source="t", now=NOW).subscriber
        status = STATUSES[n % len(STATUSES)]
        if status != "active":
            store.set_status(sub.id, status, NOW)
        ids[status].append(sub.id)
    everyone = sorted(sid for group in ids.values() for sid in group)
    for batch in (1, 2, 5, 1000):
        listed = [sub.id for sub in store.iter_subscribers(batch=batch)]
        assert listed == everyone
        for status in STATUSES:
            assert [s.id for s in store.iter_subscribers(status, batch=batch)] == sorted(
                ids[status])


def test_small_batches_are_queried_one_page_at_a_time(store):
    for n in range(10):
        store.add(f"p{n}@example.org", status="active", source="t", now=NOW)
    wire = watch(store)
    stream = store.iter_subscribers("active", batch=3)
    first = [next(stream), next(stream), next(stream)]
    assert wire.calls["Query"] == 1  # the next page is not fetched before it is needed
    rest = list(stream)
    assert len(first + rest) == 10
    queries = [params for name, params in wire.params if name == "Query"]
    assert len(queries) == 4  # 3 + 3 + 3 + 1
    assert all(q["Limit"] == 3 and q["IndexName"] == "by_status" for q in queries)
    assert "ExclusiveStartKey" not in queries[0]
    assert all("ExclusiveStartKey" in q for q in queries[1:])


def test_a_subscriber_changing_status_during_a_listing_is_not_listed_twice(store):
    made = [store.add(f"m{n}@example.org", status="active", source="t", now=NOW).subscriber.id
            for n in range(4)]
    first, second, third, fourth = sorted(made)
    store.set_status(first, "pending", NOW)
    store.set_status(fourth, "pending", NOW)
    stream = store.iter_subscribers(batch=1)
    assert next(stream).id == first  # the pending stream's first page
    # The active stream already holds `second`; the pending one's next page will find it too.
    store.set_status(second, "pending", NOW)
    assert [sub.id for sub in stream] == [second, third, fourth]


# -- failures --------------------------------------------------------------------------------

def test_a_missing_table_is_one_clear_error(moto_server, dynamo):
    client = moto_server.client("dynamodb")
    lost = DynamoStore(client, "nowhere-subscribers", "nowhere-ledger")
    with pytest.raises(StoreError) as caught:
        lost.find("a@example.org")
    message = str(caught.value)
    assert "\n" not in message
    assert "table nowhere-subscribers does not exist in us-east-1" in message
    assert caught.value.exit_code == 1
    assert str(caught.value.path) == "dynamodb:nowhere-subscribers"
    with pytest.raises(StoreError, match="table nowhere-ledger does not exist"):
        lost.ledger_counts(ISSUE)
    with pytest.raises(StoreError, match="table nowhere-subscribers does not exist"):
        lost.add("a@example.org", source="t", now=NOW)
    assert lost.missing_tables() == ["nowhere-subscribers", "nowhere-ledger"]
    assert dynamo.open().missing_tables() == []
    lost.close()
    lost.close()  # idempotent
    assert client.describe_table(TableName=dynamo.subscribers_table)  # the caller's: open


def test_access_denied_names_the_table_and_the_rights(store):
    wire = watch(store)
    wire.answers["GetItem"] = [dynamo_error(400, "AccessDeniedException",
                                            "User: arn:aws:iam::1:user/x is not authorized")]
    with pytest.raises(StoreError) as caught:
        store.get("a" * 24)
    message = str(caught.value)
    assert "\n" not in message
    assert "access denied to table vllm-pr-weekly-subscribers" in message
    assert "AccessDeniedException: User: arn:aws:iam::1:user/x is not authorized" in message
    assert wire.calls["GetItem"] == 1  # not retried


def test_an_unreachable_endpoint_is_one_line(dynamo, monkeypatch, unused_port):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{unused_port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with open_store(dynamo.settings) as store, pytest.raises(StoreError) as caught:
        store.is_suppressed("a@example.org")
    assert "cannot reach DynamoDB" in str(caught.value) and "\n" not in str(caught.value)


def test_a_transaction_cancelled_by_a_conflict_is_tried_again(store):
    wire = watch(store)
    conflict = dynamo_error(
        400, "TransactionCanceledException", "Transaction cancelled",
        CancellationReasons=[{"Code": "None"}, {"Code": "TransactionConflict"},
                             {"Code": "None"}])
    wire.answers["TransactWriteItems"] = [conflict, conflict]
    result = store.add("busy@example.org", source="t", now=NOW)
    assert result.created
    assert wire.calls["TransactWriteItems"] == 3
    assert store.find("busy@example.org") == result.subscriber


def test_a_remove_stopped_before_the_ledger_was_purged_is_finished_next_time(dynamo, store):
    sid = store.add("half@example.org", status="active", source="t", now=NOW).subscriber.id
    for issue in ("2026-W47", ISSUE):
        assert store.claim(issue, sid, NOW)
        store.mark_failed(issue, sid, "550 <half@example.org>: no such user", True, NOW)
    wire = watch(store)
    wire.answers["Scan"] = [dynamo_error(400, "AccessDeniedException", "no dynamodb:Scan")]
    with pytest.raises(StoreError, match="access denied to table vllm-pr-weekly-ledger"):
        store.remove("half@example.org", NOW)
    assert store.find("half@example.org") is None and store.is_suppressed("half@example.org")
    assert len(dynamo.items(dynamo.ledger_table)) == 2  # not yet erased
    assert store.remove("half@example.org", NOW) is False  # nothing left to remove...
    assert dynamo.items(dynamo.ledger_table) == []  # ...but the erasure was finished
    [suppression] = dynamo.items()
    assert set(suppression) == {"pk", "created_at"}
    assert b"half@" not in dynamo.dump()


def unprocessed(request: Any) -> AWSResponse:
    """DynamoDB's answer to a batch read it throttles: every key comes back unprocessed."""
    body = json.dumps({"Responses": {}, "UnprocessedKeys": json.loads(request.body)[
        "RequestItems"]}).encode()
    return AWSResponse(request.url, 200, HTTPHeaders.from_dict(
        {"Content-Type": "application/x-amz-json-1.0"}), _Raw(body))


def test_keys_a_batch_read_leaves_unprocessed_are_asked_again(store, monkeypatch):
    monkeypatch.setattr("pipeline.retry.backoff", lambda attempt, **_: 0.0)
    store.add("kept@example.org", "zh", status="active", source="web", now=NOW)
    wire = watch(store)
    wire.answers["BatchGetItem"] = [unprocessed, unprocessed]
    [kept, new] = store.add_many([NewSubscriber("kept@example.org"),
                                  NewSubscriber("new@example.org")],
                                 status="active", source="import:t.csv", now=NOW)
    assert wire.calls["BatchGetItem"] > 2  # the throttled reads were asked again, then answered
    assert kept.outcome is AddOutcome.EXISTING and new.outcome is AddOutcome.CREATED
    assert (found := store.find("kept@example.org")) is not None and found.layout == "zh"


def test_a_batch_read_throttled_every_time_is_one_clear_error(store, monkeypatch):
    monkeypatch.setattr("pipeline.retry.backoff", lambda attempt, **_: 0.0)
    wire = watch(store)
    wire.answers["BatchGetItem"] = [unprocessed] * 100
    with pytest.raises(StoreError, match="unprocessed \\(throttled\\); try again"):
        store.add_many([NewSubscriber("new@example.org")], status="active",
                       source="import:t.csv", now=NOW)
    assert wire.calls["BatchGetItem"] == 8
    assert store.find("new@example.org") is None  # nothing written after a failed read
