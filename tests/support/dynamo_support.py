"""DynamoDB for the store tests: the two tables of ``[store]`` in the session's moto server.

moto's DynamoDB is not atomic per request: a conditional write is a "check, then set" with no
lock, and a failed ``TransactWriteItems`` restores a copy of the whole table, discarding what
other requests wrote meanwhile. Real DynamoDB makes each atomic, which the store relies on, so
the fixture makes moto (in this process) handle one DynamoDB request at a time; the store's
clients still send theirs concurrently.
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
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _MOTO_LOCK:
            return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", call_action)


def dynamo_settings(settings: Settings) -> Settings:
    return replace(settings, store=replace(settings.store, backend="dynamodb"))


@dataclass
class Dynamo:
    """The tables of ``settings.store`` in moto, and stores opened on them; what is stored,
    read with a Scan (tests/test_store.py's ``SqliteBackend`` is its twin on SQLite)."""

    name = "dynamodb"

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
        """A new store with its own client, as another process would have; closed after."""
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

    def subscriber_count(self) -> int:
        return len(self.keys("sub#"))

    def suppressions(self) -> list[str]:
        return [key.removeprefix("supp#") for key in self.keys("supp#")]

    def dump(self) -> bytes:
        """Everything both tables hold, as bytes (to search for an address)."""
        return json.dumps([self.items(), self.items(self.ledger_table)],
                          ensure_ascii=False, sort_keys=True).encode("utf-8")

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture
def dynamo(moto_server, settings, monkeypatch) -> Any:
    """Fresh tables in moto, requests serialised, and settings whose backend is dynamodb."""
    serialise_moto_dynamodb(monkeypatch)
    configured = dynamo_settings(settings)
    client = moto_server.client("dynamodb")
    create_tables(client, configured.store.subscribers_table, configured.store.ledger_table,
                  delay=0.05)
    env = Dynamo(configured, client)
    try:
        yield env
    finally:
        env.close()
