"""Whether a mail server's refusal means "this mailbox does not exist".

The ``smtp`` transport hears refusals at ``RCPT TO``, ``inbox process`` in delivery status
notifications days later; both must decide alike, because a gone mailbox is marked
``bounced`` for good while any other refusal is about the message. The RFC 3463 status
(``5.1.1``) decides when there is one; without one, a few common phrases. A 4xx never does.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["GONE_STATUSES", "BounceKind", "bounce_kind", "enhanced_status", "mailbox_gone"]

BounceKind = Literal["bounce-permanent", "bounce-transient"]

#: RFC 3463 details that say the address itself is dead: bad mailbox (X.1.1), bad
#: destination system (X.1.2), bad address syntax (X.1.3), moved with no forwarding address
#: (X.1.6), null MX (X.1.10, RFC 7505), mailbox disabled (X.2.1).
GONE_STATUSES = frozenset({"1.1", "1.2", "1.3", "1.6", "1.10", "2.1"})

_STATUS = re.compile(r"(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")
_GONE_TEXT = re.compile(
    r"user unknown|unknown user|no such (?:user|mailbox|recipient|address)"
    r"|(?:mailbox|user|recipient|address|account) (?:does not|doesn't) exist"
    r"|(?:mailbox|user|recipient) not found|unknown (?:recipient|mailbox)"
    r"|recipient unknown|invalid (?:recipient|mailbox)|mailbox (?:is )?disabled"
    r"|account (?:has been |is )?disabled|unrouteable address",
    re.IGNORECASE,
)


def enhanced_status(text: str) -> str | None:
    """The first RFC 3463 status code in ``text`` (``"5.1.1"``), if it names one."""
    found = _STATUS.search(text)
    return ".".join(found.groups()) if found else None


def mailbox_gone(text: str, *, code: int | None = None, status: str | None = None) -> bool:
    """Whether a refusal says the recipient's mailbox does not exist (for good).

    ``status``: an RFC 3463 code given apart from ``text`` (a DSN's ``Status:``).
    """
    if code is not None and not 500 <= code < 600:
        return False
    # 5.0.0 is "other or undefined": Exim writes it for every failure and leaves the real
    # reason to the reply (a code in it, else its words), at RCPT as in a DSN.
    for given in (status, enhanced_status(text)):
        if given is not None and given.strip() != "5.0.0":
            klass, _, detail = given.strip().partition(".")
            return klass == "5" and detail in GONE_STATUSES
    return bool(_GONE_TEXT.search(text))


def bounce_kind(status: str, text: str = "") -> BounceKind | None:
    """A DSN's failed recipient: ``bounce-permanent`` when the mailbox is gone,
    ``bounce-transient`` for another 5.x.x failure (counted), None for a 4.x.x one."""
    status = enhanced_status(status) or ""
    if not status.startswith("5."):
        return None
    return "bounce-permanent" if mailbox_gone(text, status=status) else "bounce-transient"
