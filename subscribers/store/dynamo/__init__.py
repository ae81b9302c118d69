"""The :class:`~subscribers.store.SubscriberStore` on DynamoDB: the production store.

* **Two tables**: the people and the app's bookkeeping, and the ledger keyed (issue,
  subscriber), read one issue at a time (a Query, not a Scan).
* **One key, ``pk``, with a prefix per kind of item**, so one transaction can span a
  subscriber, its address (``email#`` makes it unique) and the suppression check.
* **A sparse GSI, ``by_status``**, eventually consistent: a subscriber changed a moment ago
  may be listed as they were.
* **Conditional writes**: a write decided from a read (a mail event, an import's batch)
  holds only if the item is still as read; elsewhere a read happens only after a write was
  refused, to say why. TTL only collects garbage, days late: never relied on.

Timestamps are SQLite's ISO text. The low-level client is used because it says why a
condition failed; it is thread-safe and the store keeps no other mutable state, so one store
serves every worker thread.
"""

from __future__ import annotations

from subscribers.store.dynamo.coordination import DynamoCoordination
from subscribers.store.dynamo.directory import DynamoDirectory
from subscribers.store.dynamo.items import SEEN_RETENTION
from subscribers.store.dynamo.ledger import DynamoLedger
from subscribers.store.dynamo.migration import Copied, DynamoMigration, refusal
from subscribers.store.dynamo.tables import create_tables, table_definitions

__all__ = ["SEEN_RETENTION", "Copied", "DynamoStore", "create_tables", "refusal",
           "table_definitions"]


class DynamoStore(DynamoMigration, DynamoDirectory, DynamoLedger, DynamoCoordination):
    """:class:`~subscribers.store.SubscriberStore` on two DynamoDB tables: every role."""
