"""Sign-ups handed to a queue, so that on Lambda the answer never waits for the address.

``POST /subscribe`` answers before the address is looked up: the page, its status and its
time must say nothing about whether the address is known (see :mod:`pipeline.web.app`).
Under uvicorn the store's work and the confirmation mail run after the answer has gone (a
background task, :class:`~pipeline.web.mail_queue.MailQueue`). Under Mangum on Lambda there
is no "after": the function's answer leaves only when the handler returns, background
tasks included, so its time would again follow the address's state.

With ``[subscriptions] queue_url`` set (the deploy template sets it), the request is instead
one message to a :class:`SignupQueue`, sent before the answer: one SQS ``SendMessage``
(:class:`pipeline.aws.sqs.SqsQueue`), the same call whatever the address. The same
function, invoked by SQS, does the sign-up (:func:`pipeline.web.lambda_app.create_handler`),
and a sign-up that fails for now (the store or the mail unavailable) is retried by SQS, then
kept in the dead-letter queue.

A message holds what the sign-up needs and nothing more: the address, the layout, the areas
it chose and the time of the request (the consent record's time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from subscribers.subscriptions import RequestOutcome, Subscriptions

__all__ = ["Signup", "SignupQueue"]

#: A message larger than any real sign-up (an address is at most 254 characters; the areas a
#: form may send are bounded by the app): refused when read back.
MAX_MESSAGE_CHARS = 16_384


class SignupQueue(Protocol):
    """Where sign-ups wait to be carried out: ``send`` hands one over (its JSON, see
    :meth:`Signup.to_json`) or raises :class:`~pipeline.errors.TransportError`."""

    def send(self, body: str) -> None: ...


@dataclass(frozen=True)
class Signup:
    """One ``POST /subscribe`` that passed the app's checks, to be carried out."""

    email: str
    layout: str
    areas: tuple[str, ...]
    #: When it was asked (the consent record's time, whenever the work is done).
    at: datetime

    def to_json(self) -> str:
        return json.dumps({"email": self.email, "layout": self.layout,
                           "areas": list(self.areas), "at": self.at.isoformat()},
                          ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Signup:
        """The sign-up a message holds; ValueError for anything else."""
        if len(text) > MAX_MESSAGE_CHARS:
            raise ValueError("the message is larger than any sign-up")
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the message is not a JSON object")
        email, layout, areas, at = (data.get(k) for k in ("email", "layout", "areas", "at"))
        if not (isinstance(email, str) and isinstance(layout, str) and isinstance(at, str)
                and isinstance(areas, list) and all(isinstance(a, str) for a in areas)):
            raise ValueError("the message lacks email, layout, areas or at")
        when = datetime.fromisoformat(at)
        if when.tzinfo is None:
            raise ValueError("the message's time has no offset")
        return cls(email, layout, tuple(areas), when)

    def run(self, subscriptions: Subscriptions) -> RequestOutcome:
        """What the app's background task does: the store's request and the mail."""
        return subscriptions.request(self.email, self.layout, source="web", now=self.at,
                                     areas=self.areas)
