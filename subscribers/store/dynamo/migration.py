"""What ``newsletter store migrate`` asks of the DynamoDB store besides its roles: which
tables are missing, everything exported with SQLite's column names, and records copied as
another store holds them, never over what is here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from subscribers.errors import StoreError
from subscribers.store.dynamo.core import Refused
from subscribers.store.dynamo.directory import DynamoDirectory
from subscribers.store.dynamo.items import (
    CATALOG_KEY,
    LEDGER_FIELDS,
    SEEN_PREFIX,
    SEEN_RETENTION,
    SENT_FIELDS,
    SENT_PREFIX,
    SUBSCRIBER_FIELDS,
    SUBSCRIBER_PREFIX,
    SUPPRESSION_PREFIX,
    epoch,
    ledger_key,
    pk_of,
)
from subscribers.store.dynamo.tables import TTL_ATTRIBUTE, error_code
from subscribers.store.rules import decode_time

__all__ = ["Copied", "DynamoMigration", "refusal"]


class Copied(StrEnum):
    """What ``newsletter store migrate`` did with one record (see ``DynamoStore.copy_*``)."""

    #: Written now (or, in a dry run, would be).
    COPIED = "copied"
    #: Already in DynamoDB as copied before: left alone.
    PRESENT = "present"
    #: In DynamoDB in another form (the address under another id...): left alone, reported.
    CONFLICT = "conflict"
    #: Refused by DynamoDB itself (:func:`refusal`): not copied, reported.
    REFUSED = "refused"


def refusal(error: StoreError) -> str | None:
    """DynamoDB's reason when it refused one record for its size, else None: such a record can
    never be written but says nothing of the next, so a copy reports it and goes on."""
    cause = error.__cause__
    if not isinstance(cause, ClientError) or error_code(cause) != "ValidationException":
        return None
    message = str(cause.response.get("Error", {}).get("Message") or "")
    return message if "size" in message.lower() else None


class DynamoMigration(DynamoDirectory):
    """The two tables read whole and written record by record."""

    def missing_tables(self) -> list[str]:
        """Which of the two tables do not exist (DescribeTable)."""
        missing = []
        for table in (self.subscribers_table, self.ledger_table):
            try:
                self.client.describe_table(TableName=table)
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise self._error(exc, table) from exc
                missing.append(table)
            except BotoCoreError as exc:
                raise self._error(exc, table) from exc
        return missing

    def export(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Everything ``store migrate --to sqlite`` copies, as (kind, record) with SQLite's column
        names; rate counters and leases are left out (short-lived, started afresh)."""
        for item in self._items(self.subscribers_table):
            key = str(item.get("pk", ""))
            if key.startswith(SUBSCRIBER_PREFIX):
                row = {name: item.get(name) for name in SUBSCRIBER_FIELDS}
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
            elif key.startswith(SENT_PREFIX):
                yield "sent", {name: item.get(name) for name in SENT_FIELDS}
        for item in self._items(self.ledger_table):
            row = {name: item.get(name) for name in LEDGER_FIELDS}
            row["permanent"] = int(bool(row["permanent"]))
            row["attempts"] = int(row["attempts"] if row["attempts"] is not None else 1)
            # Missing: a claim from before the attribute, counted as handed over.
            row["handed_over"] = int(row["handed_over"] is not False)
            yield "ledger", row

    def copy_subscriber(self, record: Mapping[str, Any], *,
                        dry_run: bool = False) -> tuple[Copied, str | None]:
        """Store a subscriber exactly as another store holds it, unless its address or id is here
        (the reason, then); like :meth:`add`, a suppressed address is not brought back."""
        record = {name: record.get(name) for name in SUBSCRIBER_FIELDS}
        record["areas"] = record["areas"] or None  # SQLite's '' for none: no attribute
        if not dry_run:
            outcome, existing_id = self._insert(record)
        elif (existing_id := self._id_of(record["email_key"])) is not None:
            outcome = "exists"
        elif self.is_suppressed(record["email"]):
            outcome = "suppressed"
        elif self._get_subscriber_item(record["id"]) is not None:
            outcome = "id-taken"
        else:
            outcome = "created"
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
        item = {name: record.get(name) for name in LEDGER_FIELDS}
        item["permanent"] = bool(item["permanent"])
        item["attempts"] = int(item["attempts"] if item["attempts"] is not None else 1)
        # SQLite's 0/1; a row from before the column was added counts as handed over there.
        item["handed_over"] = item["handed_over"] is None or bool(item["handed_over"])
        return self._copy(self.ledger_table, item, "#subscriber_id", dry_run)

    def copy_seen(self, key: str, at: str, *, dry_run: bool = False) -> Copied:
        """Store a handled-message key (recorded at ``at``, stored text) unless present."""
        item = {"pk": SEEN_PREFIX + key, "at": at,
                TTL_ATTRIBUTE: epoch(decode_time(at) + SEEN_RETENTION)}
        return self._copy(self.subscribers_table, item, "#pk", dry_run)

    def copy_sent_issue(self, record: Mapping[str, Any], *, dry_run: bool = False) -> Copied:
        """Store what an issue went out as (another store's record) unless one is here."""
        item = {"pk": SENT_PREFIX + record["issue_id"],
                **{name: record.get(name) for name in SENT_FIELDS}}
        return self._copy(self.subscribers_table, item, "#pk", dry_run)

    def _copy(self, table: str, item: dict[str, Any], key_name: str, dry_run: bool) -> Copied:
        if dry_run:
            if table == self.ledger_table:
                key = ledger_key(item["issue_id"], item["subscriber_id"])
            else:
                key = pk_of(item["pk"])
            return Copied.PRESENT if self._get(table, key) is not None else Copied.COPIED
        try:
            self._put(table, item, f"attribute_not_exists({key_name})")
        except Refused:
            return Copied.PRESENT
        return Copied.COPIED
