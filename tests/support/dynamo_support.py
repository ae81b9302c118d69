"""DynamoDB for the store tests: the two tables in the session's moto server
(tests/support/servers.py).

``dynamo`` (fixture) resets moto, creates the tables of ``[store]`` with
:func:`subscribers.store.dynamo.create_tables` and gives settings whose ``[store] backend`` is
``dynamodb``; ``dynamo.open()`` returns a new :class:`DynamoStore` (its own boto3 client) on
the same tables, as another process or Lambda instance would have.

moto gap: moto's DynamoDB is not atomic per request. A conditional write is a Python
"check, then set" with no lock, and a failed ``TransactWriteItems`` rolls back by restoring
a deep copy of the whole table taken before it started, discarding whatever other requests
wrote meanwhile. Real DynamoDB makes each conditional write and each transaction atomic,
which is exactly what the store relies on, so the fixture serialises moto's DynamoDB
requests (one lock around ``DynamoHandler.call_action``, in this process where the server
runs). The store's clients still send their requests concurrently, from several threads and
connections; only moto's handling is made one-at-a-time, as DynamoDB's per-item
serialisation is.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest

from pipeline.wiring import open_dynamo_store
from subscribers.store.dynamo import DynamoStore, create_tables

if TYPE_CHECKING:
    from pipeline.config import Settings

_MOTO_LOCK = threading.RLock()


def serialise_moto_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the in-process moto server handle one DynamoDB request at a time."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _MOTO_LOCK:
            return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", call_action)


def dynamo_settings(settings: Settings) -> Settings:
    """``settings`` with ``[store] backend = "dynamodb"`` (default table names)."""
    return replace(settings, store=replace(settings.store, backend="dynamodb"))


@dataclass
class Dynamo:
    """The tables of ``settings.store`` in moto, and stores opened on them."""

    settings: Settings
    #: A plain client for set-up and inspection (the session's; never closed here).
    client: Any
    opened: list[DynamoStore] = field(default_factory=list)

    @property
    def subscribers_table(self) -> str:
        return self.settings.store.subscribers_table

    @property
    def ledger_table(self) -> str:
        return self.settings.store.ledger_table

    def open(self) -> DynamoStore:
        """A new store (own client) on the tables; closed at the end of the test."""
        store = open_dynamo_store(self.settings)
        self.opened.append(store)
        return store

    def items(self, table: str | None = None) -> list[dict[str, Any]]:
        """Every item of a table (the subscribers table by default), as DynamoDB JSON."""
        paginator = self.client.get_paginator("scan")
        found: list[dict[str, Any]] = []
        for page in paginator.paginate(TableName=table or self.subscribers_table,
                                       ConsistentRead=True):
            found.extend(page["Items"])
        return found

    def keys(self, prefix: str) -> list[str]:
        """The ``pk`` of every subscribers-table item starting with ``prefix``, sorted."""
        return sorted(item["pk"]["S"] for item in self.items()
                      if item["pk"]["S"].startswith(prefix))

    def dump(self) -> bytes:
        """Everything both tables hold, as bytes (to search for an address)."""
        return json.dumps([self.items(), self.items(self.ledger_table)],
                          ensure_ascii=False, sort_keys=True).encode("utf-8")

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture
def dynamo(moto_server, settings, monkeypatch) -> Any:
    """Fresh tables in moto (reset by ``moto_server``), requests serialised (module doc)."""
    serialise_moto_dynamodb(monkeypatch)
    configured = dynamo_settings(settings)
    client = moto_server.client("dynamodb")  # set-up only, cached for the session
    # A test has no two seconds to wait between polls.
    create_tables(client, configured.store.subscribers_table, configured.store.ledger_table,
                  delay=0.05)
    env = Dynamo(configured, client)
    try:
        yield env
    finally:
        env.close()
