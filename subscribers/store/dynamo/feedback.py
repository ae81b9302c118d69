""":class:`~subscribers.store.Feedback` on DynamoDB: bounces and complaints noted on ledger
items, found by SES's message id through the ``by_message_id`` index.
"""

from __future__ import annotations

from datetime import datetime

from subscribers.model import FEEDBACK
from subscribers.store.dynamo.core import DynamoCore, Refused
from subscribers.store.dynamo.items import expression, ledger_key
from subscribers.store.dynamo.tables import MESSAGE_INDEX


class DynamoFeedback(DynamoCore):
    """Feedback on the ledger rows of an issue."""

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """Found through the ``by_message_id`` index (eventually consistent: SES's feedback
        comes seconds after the send at the earliest)."""
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        condition = "#message_id = :message_id"
        found = None
        for page in self._pages(self.ledger_table, "query", TableName=self.ledger_table,
                                IndexName=MESSAGE_INDEX, KeyConditionExpression=condition,
                                **expression(condition, message_id=message_id)):
            if page:
                found = page[0]
                break
        if found is None:
            return None
        self.note_feedback(str(found["issue_id"]), str(found["subscriber_id"]), kind)
        return str(found["issue_id"])

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        if kind not in FEEDBACK:
            raise ValueError(f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK)}")
        guard = "attribute_exists(#subscriber_id)" + (
            "" if kind == "complaint" else " AND attribute_not_exists(#feedback)")
        try:
            self._update(self.ledger_table, ledger_key(issue_id, subscriber_id),
                         "SET #feedback = :kind", guard, kind=kind)
        except Refused as refused:  # no row, or a complaint (or this bounce) already
            return bool(refused.item)
        return True

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        counts = dict.fromkeys(FEEDBACK, 0)
        for item in self._issue_rows(issue_id, "#feedback", "attribute_exists(#feedback)"):
            counts[item["feedback"]] += 1
        return counts
