""":class:`~subscribers.store.Ledger`, :class:`~subscribers.store.Feedback` and
:class:`~subscribers.store.SentIssues` on DynamoDB: the ledger table, keyed (issue, subscriber) and
read one issue at a time, and the ``sent#`` items. A claim is a put only if absent, or one
update conditional on the status it takes over.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from subscribers.model import FEEDBACK, LEDGER_STATUSES, LedgerEntry, SentIssue
from subscribers.store.dynamo.core import DynamoCore, Refused
from subscribers.store.dynamo.items import SENT_PREFIX, ledger_key, pk_of
from subscribers.store.dynamo.tables import MESSAGE_INDEX
from subscribers.store.rules import (
    IN_FLIGHT_REASON,
    check_known,
    encode_time,
    read_entry,
    read_sent,
)

if TYPE_CHECKING:
    from subscribers.shards import Shard

#: The Query key condition of one issue's rows.
_OF_ISSUE = "#issue_id = :issue"


class DynamoLedger(DynamoCore):
    """What became of each (issue, subscriber), and what each issue went out as."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        stamp = encode_time(now)
        row = {"issue_id": issue_id, "subscriber_id": subscriber_id, "status": "sending",
               "permanent": False, "attempts": 1, "updated_at": stamp, "handed_over": False}
        with contextlib.suppress(Refused):
            self._put(self.ledger_table, row, "attribute_not_exists(#subscriber_id)")
            return True
        if not (retry or retry_temporary):
            return False
        condition = "#status = :failed AND #permanent = :false"
        if retry:
            condition = f"#status = :unconfirmed OR ({condition})"
        update = ("SET #status = :sending, #permanent = :false, #attempts = #attempts + :one, "
                  "#updated_at = :now, #handed_over = :false REMOVE #message_id, #reason")
        try:
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id), update,
                         condition, sending="sending", false=False, one=1, now=stamp,
                         unconfirmed="unconfirmed", failed="failed")
        except Refused:
            return False
        return True

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                     "SET #status = :sent, #message_id = :message_id, #permanent = :false, "
                     "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                     "REMOVE #reason", None, sent="sent", message_id=message_id, false=False,
                     now=encode_time(now), one=1)

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "failed", reason, permanent, now)

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None:
        self._record_not_sent(issue_id, subscriber_id, "unconfirmed", reason, False, now)

    def _record_not_sent(self, issue_id: str, subscriber_id: str, status: str, reason: str,
                         permanent: bool, now: datetime) -> None:
        with contextlib.suppress(Refused):  # delivered: stays so
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #status = :status, #reason = :reason, #permanent = :permanent, "
                         "#updated_at = :now, #attempts = if_not_exists(#attempts, :one) "
                         "REMOVE #message_id",
                         "attribute_not_exists(#subscriber_id) OR #status <> :sent",
                         status=status, reason=reason, permanent=bool(permanent),
                         now=encode_time(now), one=1, sent="sent")

    def release(self, issue_id: str, subscriber_id: str) -> bool:
        return self._delete(self.ledger_table, ledger_key(issue_id, subscriber_id),
                            "#status = :sending", sending="sending")

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        with contextlib.suppress(Refused):  # resolved meanwhile: nothing to note
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #handed_over = :handed", "#status = :sending",
                         handed=bool(handed), sending="sending")

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """A Query of the issue's ``sending`` rows, then per row a delete (never handed over) or
        an update to ``unconfirmed``, each conditional on the row being as read."""
        stamp = encode_time(now)
        changed = 0
        for item in self._items(self.ledger_table, _OF_ISSUE,
                                projection="#subscriber_id, #handed_over",
                                row_filter="#status = :sending", issue=issue_id,
                                sending="sending"):
            subscriber_id = item["subscriber_id"]
            if shard is not None and subscriber_id not in shard:
                continue
            key = ledger_key(issue_id, subscriber_id)
            if item.get("handed_over") is False:
                self._delete(self.ledger_table, key,
                             "#status = :sending AND #handed_over = :false", sending="sending",
                             false=False)
                continue
            try:
                self._update(self.ledger_table, key,
                             "SET #status = :unconfirmed, #reason = :reason, "
                             "#updated_at = :now", "#status = :sending",
                             unconfirmed="unconfirmed", reason=IN_FLIGHT_REASON, now=stamp,
                             sending="sending")
            except Refused:
                continue  # its outcome arrived meanwhile
            changed += 1
        return changed

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]:
        check_known("ledger status", LEDGER_STATUSES, status)
        rows = self._items(self.ledger_table, _OF_ISSUE, issue=issue_id, status=status,
                           row_filter="#status = :status" if status else None)
        return {item["subscriber_id"]: read_entry(item) for item in rows}

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        item = self._get(self.ledger_table, ledger_key(issue_id, subscriber_id))
        return read_entry(item) if item else None

    def ledger_counts(self, issue_id: str) -> dict[str, int]:
        rows = self._items(self.ledger_table, _OF_ISSUE, projection="#status", issue=issue_id)
        return dict.fromkeys(LEDGER_STATUSES, 0) | Counter(item["status"] for item in rows)

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """Found through the ``by_message_id`` index (eventually consistent: SES's feedback
        comes seconds after the send at the earliest)."""
        check_known("feedback", FEEDBACK, kind)
        found = next(self._items(self.ledger_table, "#message_id = :message_id",
                                 index=MESSAGE_INDEX, message_id=message_id), None)
        if found is None:
            return None
        self.note_feedback(str(found["issue_id"]), str(found["subscriber_id"]), kind)
        return str(found["issue_id"])

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        check_known("feedback", FEEDBACK, kind)
        guard = "attribute_exists(#subscriber_id)" + (
            "" if kind == "complaint" else " AND attribute_not_exists(#feedback)")
        try:
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #feedback = :kind", guard, kind=kind)
        except Refused as refused:  # no row, or a complaint (or this bounce) already
            return bool(refused.item)
        return True

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        rows = self._items(self.ledger_table, _OF_ISSUE, projection="#feedback",
                           row_filter="attribute_exists(#feedback)", issue=issue_id)
        return dict.fromkeys(FEEDBACK, 0) | Counter(item["feedback"] for item in rows)

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        item = self._get(self.subscribers_table, pk_of(SENT_PREFIX + issue_id))
        return read_sent(item) if item else None

    def record_sent(self, issue_id: str, content_hash: str, now: datetime) -> SentIssue:
        """A put of the ``sent#`` item only if absent; a refused put returns the item that
        was there (read from the refusal)."""
        item = {"pk": SENT_PREFIX + issue_id, "issue_id": issue_id,
                "content_hash": content_hash, "first_hash": content_hash,
                "first_sent_at": encode_time(now)}
        try:
            self._put(self.subscribers_table, item, "attribute_not_exists(#pk)")
        except Refused as refused:
            found = read_sent(refused.item) if refused.item else self.sent_issue(issue_id)
            if found is None:  # nothing deletes these items: a store changed by hand
                raise self._race_error(self.subscribers_table, "record_sent") from None
            return found
        return read_sent(item)

    def record_correction(self, issue_id: str, content_hash: str, *, replacing: str,
                          corrected_on: str, reason: str) -> SentIssue | None:
        """One update of the ``sent#`` item conditional on its hash being ``replacing``."""
        try:
            item = self._update(self.subscribers_table, pk_of(SENT_PREFIX + issue_id),
                                "SET #content_hash = :new, #corrected_on = :on, "
                                "#correction = :reason", "#content_hash = :replacing",
                                new=content_hash, on=corrected_on, reason=reason,
                                replacing=replacing)
        except Refused as refused:
            return read_sent(refused.item) if refused.item else None
        return read_sent(item)
