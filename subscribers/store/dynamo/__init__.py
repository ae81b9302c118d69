"""The :class:`~subscribers.store.SubscriberStore` on DynamoDB: the production store.

* **Two tables.** ``[store] subscribers_table`` holds the people and the app's bookkeeping;
  ``[store] ledger_table`` the delivery ledger, keyed (issue, subscriber) and read one issue
  at a time (a Query, not a Scan).
* **One key, ``pk``, with a prefix per kind of item** in the subscribers table (``sub#``,
  ``email#`` which makes an address unique, ``supp#``, ``seen#``, ``quota#``, ``lease#``,
  ``sent#``, one ``catalog#areas``): one transaction can span a subscriber, its address and
  the suppression check.
* **A sparse GSI, ``by_status``** (status, id): only ``sub#`` items carry ``status``. It is
  eventually consistent: a subscriber changed a moment ago may be listed as they were.
* **Conditional writes, never read-then-write.** Uniqueness, claims, quotas and leases are
  each one conditional write (or a transaction); a read happens only after a write was
  refused, to say why. Where SQLite has one statement with ``CASE``, this adapter tries two
  conditional updates in turn, retrying a refusal another writer caused between them.
* **TTL** (``expires_at``) removes ``seen#`` keys and ``quota#`` counters lazily (days late):
  garbage collection only, never relied on.

Timestamps are SQLite's ISO text (it sorts as time does). Every botocore error becomes a
one-line :class:`~subscribers.errors.StoreError` naming the table, keeping the cause
(:func:`dynamo_reason`). The low-level client is used, because it says why a condition failed
(``ReturnValuesOnConditionCheckFailure``, ``CancellationReasons``); it is thread-safe, and
the store keeps no other mutable state, so one store serves every worker thread.
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
