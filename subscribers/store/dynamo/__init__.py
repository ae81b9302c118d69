"""The :class:`~subscribers.store.SubscriberStore` on DynamoDB: the production store.

Why this design:

* **Two tables.** ``[store] subscribers_table`` holds everything about people and the app's
  bookkeeping; ``[store] ledger_table`` holds the per-issue delivery ledger, whose natural key
  is (issue, subscriber) and which is read one issue at a time (a Query, not a Scan).
* **One key, ``pk``, with a prefix per kind of item** in the subscribers table:
  ``sub#<id>`` (the subscriber), ``email#<lower-cased address>`` (what makes an address unique:
  it is written in the same transaction as ``sub#`` with ``attribute_not_exists(pk)``),
  ``supp#<sha256>`` (a removed address), ``seen#<key>`` (a message handled once),
  ``quota#<key>`` (a rate counter), ``lease#<name>`` (who runs an issue), ``sent#<issue>``
  (what an issue went out as) and one ``catalog#areas`` (the areas readers may pick, a
  string set). Single-table
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

One module per role (``directory``, ``imports``, ``interests``, ``ledger``, ``sent_issues``,
``feedback``, ``leases``, ``once_keys``, ``quotas``), each a class on
:class:`~.core.DynamoCore` (the client, its requests and errors); ``items`` says what an
item holds, ``tables`` the tables' definitions, ``migration`` what ``store migrate`` needs
besides the roles. :class:`DynamoStore` is all of them.
"""

from __future__ import annotations

from subscribers.store.dynamo.feedback import DynamoFeedback
from subscribers.store.dynamo.imports import DynamoImports
from subscribers.store.dynamo.interests import DynamoInterests
from subscribers.store.dynamo.items import SEEN_RETENTION
from subscribers.store.dynamo.leases import DynamoLeases
from subscribers.store.dynamo.ledger import DynamoLedger
from subscribers.store.dynamo.migration import Copied, DynamoMigration, refusal
from subscribers.store.dynamo.once_keys import DynamoOnceKeys
from subscribers.store.dynamo.quotas import DynamoQuotas
from subscribers.store.dynamo.sent_issues import DynamoSentIssues
from subscribers.store.dynamo.tables import (
    MESSAGE_INDEX,
    STATUS_INDEX,
    TTL_ATTRIBUTE,
    create_tables,
    dynamo_reason,
    table_definitions,
)

__all__ = [
    "MESSAGE_INDEX",
    "SEEN_RETENTION",
    "STATUS_INDEX",
    "TTL_ATTRIBUTE",
    "Copied",
    "DynamoStore",
    "create_tables",
    "dynamo_reason",
    "refusal",
    "table_definitions",
]


class DynamoStore(DynamoImports, DynamoMigration, DynamoInterests, DynamoLedger,
                  DynamoSentIssues, DynamoFeedback, DynamoLeases, DynamoOnceKeys, DynamoQuotas):
    """:class:`~subscribers.store.SubscriberStore` on two DynamoDB tables (module doc): every
    role, on the one client of :class:`~subscribers.store.dynamo.core.DynamoCore`. Nothing of
    its own: what a role needs is in the role's module, what they share in ``core``."""
