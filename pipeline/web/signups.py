"""Sign-ups handed to a queue, so that on Lambda the answer never waits for the address.

Under Mangum background tasks run before the function returns, so the answer's time would
follow the address's state. With ``[subscriptions] queue_url`` set, ``POST /subscribe`` sends
one message instead, whatever the address, and the function invoked by SQS does the sign-up.
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
    """Where sign-ups wait: ``send`` hands one's JSON over, or raises TransportError."""

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
        return subscriptions.request(self.email, self.layout, source="web", now=self.at,
                                     areas=self.areas)
