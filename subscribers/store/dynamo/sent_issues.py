""":class:`~subscribers.store.SentIssues` on DynamoDB: one ``sent#<issue>`` item of the
subscribers table an issue, put only if absent; a correction is an update conditional on
the hash it replaces.
"""

from __future__ import annotations

from datetime import datetime

from subscribers.model import SentIssue
from subscribers.store.dynamo.core import DynamoCore, Refused
from subscribers.store.dynamo.items import SENT_PREFIX, pk_of, read_sent
from subscribers.store.rules import encode_time


class DynamoSentIssues(DynamoCore):
    """What each issue went out as."""

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        """The ``sent#`` item of the issue (a strongly consistent read), or None."""
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
