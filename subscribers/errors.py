"""The errors the subscriber side can raise, under the pipeline's one root.

    NewsletterError (pipeline.errors)
    ├── InvalidAddress       not an email address                          (exit 2)  .address
    ├── StoreError           the store cannot be opened, read, written      (exit 1)  .path
    ├── UnknownSubscriber    no such subscriber                            (exit 2)  .address
    ├── RefusedAddress       the CLI will not (re)add this address         (exit 2)  .address
    ├── AreaChoiceError      areas a reader may not pick (unknown, too many) (exit 2) .names
    └── TokenError           a link token that does not verify             (exit 2)  .reason

None ever carries a secret or a token's signing key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pipeline.errors import NewsletterError

__all__ = ["AreaChoiceError", "InvalidAddress", "RefusedAddress", "StoreError", "TokenError",
           "TokenReason", "UnknownSubscriber"]

#: Why a token was refused; the subscription app picks its page from this, not from the text.
TokenReason = Literal["malformed", "bad-signature", "unknown-key", "expired", "wrong-purpose"]


_TOKEN_MESSAGES: dict[str, str] = {
    "malformed": "the link is incomplete or damaged",
    "bad-signature": "the link's signature does not match",
    "unknown-key": "the link was signed with a key that is no longer accepted",
    "expired": "the link has expired",
    "wrong-purpose": "the link is meant for another action",
}


class InvalidAddress(NewsletterError):
    """Text that is not a deliverable-looking email address (checked without DNS)."""

    exit_code = 2

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"invalid address {address!r}: {reason}")
        self.address = address
        self.reason = reason


class StoreError(NewsletterError):
    """The subscriber store cannot be used. Exit 1, not 2: the input is fine, the machine's
    state is not."""

    exit_code = 1

    def __init__(self, path: Path | str, message: str) -> None:
        super().__init__(f"subscriber store {path}: {message}")
        self.path = Path(path)


class UnknownSubscriber(NewsletterError):
    """No subscriber has this address (or this id, for callers that only hold an id)."""

    exit_code = 2

    def __init__(self, address: str | None = None, *, subscriber_id: str | None = None) -> None:
        subject = address if address is not None else f"id {subscriber_id}"
        super().__init__(f"no subscriber {subject}")
        self.address = address
        self.subscriber_id = subscriber_id


class RefusedAddress(NewsletterError):
    """``subscribers add`` will not bring back an address that left or was removed: only the
    person's own new confirmation can."""

    exit_code = 2

    def __init__(self, address: str, why: str) -> None:
        super().__init__(f"{address}: {why}")
        self.address = address


class AreaChoiceError(NewsletterError):
    """A reader's pick of areas that cannot be stored as asked (``unknown`` names, or
    ``too-many``): refused rather than trimmed, so what is stored is what the reader saw checked."""

    exit_code = 2

    def __init__(self, reason: Literal["unknown", "too-many"], names: tuple[str, ...]) -> None:
        shown = ", ".join(repr(name[:60]) for name in names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        said = ("not areas one can follow" if reason == "unknown"
                else "more areas than one may follow")
        super().__init__(f"{said}: {shown}{more}")
        self.reason = reason
        self.names = names


class TokenError(NewsletterError):
    """A token that does not verify; ``reason`` says why. The message never includes the token
    or a key: a token is a bearer credential, and error texts end up in logs."""

    exit_code = 2

    def __init__(self, reason: TokenReason, *, subscriber_id: str | None = None) -> None:
        super().__init__(f"token {reason}: {_TOKEN_MESSAGES[reason]}")
        self.reason: TokenReason = reason
        #: Set only for ``expired``: the signature held, so the id is genuine, and the
        #: subscription app can offer that subscriber a fresh confirmation mail.
        self.subscriber_id = subscriber_id
