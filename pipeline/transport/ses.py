"""The ``ses`` transport: Amazon SES v2 ``SendEmail`` with Raw content, one recipient a call.

botocore's own retries are off: its standard mode would resend on a read timeout, after
which SES may have accepted the message; retrying is the sender's decision. Each botocore
error is mapped at this edge, keeping it as the cause: throttling, a 5xx or a connection
that never opened is :class:`TemporaryFailure`; a quota, a paused or suspended account, an
unverified MAIL FROM domain, missing credentials or any unexpected 4xx (they would fail
every recipient alike) is :class:`SendingStopped`; ``MessageRejected`` and
``BadRequestException`` are :class:`PermanentFailure`; a request that went out with no
answer is :class:`Unconfirmed`.

SES takes no SMTPUTF8: domains go in IDNA form, and a recipient whose local part is not
ASCII is refused (named) before the call; a sender like that stops the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as NeverConnected

from pipeline.aws import access_problem, answer, aws_client
from pipeline.core.email.addresses import UnsendableAddress, wire_address
from pipeline.errors import (
    ConfigError,
    PermanentFailure,
    SendingStopped,
    StoppedError,
    TemporaryFailure,
    TransportError,
    Unconfirmed,
)
from pipeline.transport import (
    ACCOUNT_STOPPED,
    THROTTLED,
    Outgoing,
    Transport,
    without_addresses,
)

if TYPE_CHECKING:
    from mypy_boto3_sesv2 import SESV2Client

__all__ = ["SesTransport", "email_tags", "ses_client"]

_THROTTLED = frozenset({"TooManyRequestsException", "Throttling", "ThrottlingException"})
_STOPPED = frozenset({"SendingPausedException", "AccountSuspendedException",
                      "AccountSendingPausedException", "ConfigurationSetSendingPausedException",
                      "LimitExceededException", "MailFromDomainNotVerifiedException"})
_PERMANENT = frozenset({"MessageRejected", "BadRequestException"})
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: GetAccount answers that mean the credentials themselves are wrong.
_BAD_CREDENTIALS = frozenset({"UnrecognizedClientException", "InvalidClientTokenId",
                              "InvalidSignatureException", "SignatureDoesNotMatch",
                              "IncompleteSignature", "ExpiredTokenException"})


def ses_client(*, read_timeout: float = 30.0) -> SESV2Client:
    """A sesv2 client with botocore's retries off, bounded waits and 32 pooled connections."""
    return aws_client("sesv2", region=None, what="the ses transport",
                      retries={"total_max_attempts": 1, "mode": "standard"},
                      connect_timeout=10.0, read_timeout=read_timeout, max_pool_connections=32)


class SesTransport(Transport):
    """Sends through SES v2; ``client`` lets a caller pass a client it built (and owns)."""

    name = "ses"
    reaches_mailboxes = True

    def __init__(self, configuration_set: str, *, client: SESV2Client | None = None) -> None:
        self.configuration_set = configuration_set
        self._owns_client = client is None
        self.client: SESV2Client = client if client is not None else ses_client()

    def send(self, message: Outgoing) -> str:
        """One ``SendEmail`` call; returns the ``MessageId`` SES assigns (it replaces ours)."""
        sender, to = _ascii_envelope(message)
        # Tags and a configuration set go only when there are some.
        optional: dict[str, Any] = {"EmailTags": email_tags(message.tags),
                                    "ConfigurationSetName": self.configuration_set}
        rcpt = message.recipient
        try:
            response = self.client.send_email(
                FromEmailAddress=sender, Destination={"ToAddresses": [to]},
                Content={"Raw": {"Data": message.raw}},
                **{name: value for name, value in optional.items() if value})
        except ClientError as exc:
            raise _client_error(exc, rcpt) from exc
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise SendingStopped(f"ses: {access_problem(exc, 'SES')}", recipient=rcpt) from exc
        except NeverConnected as exc:  # incl. ConnectTimeoutError: the request never left
            raise TemporaryFailure(f"ses: cannot reach SES: {exc}", recipient=rcpt) from exc
        except HTTPClientError as exc:
            raise Unconfirmed(f"ses: no answer after the request was sent ({exc}); SES may "
                              "have accepted the message", recipient=rcpt) from exc
        return str(response["MessageId"])

    def probe(self) -> float | None:
        """``GetAccount``: good credentials, SES reachable, sending enabled; the account's
        ``SendQuota.MaxSendRate`` (messages/s) is its answer. A policy that allows sending but
        not ``GetAccount`` (AccessDenied), or an endpoint without it, says nothing either
        way: no rate is known, and the send goes on and finds out with its first message."""
        try:
            account = self.client.get_account()
        except ClientError as exc:
            code = answer(exc).code
            if code in _BAD_CREDENTIALS:
                raise ConfigError(f"ses: the AWS credentials are refused ({code})") from exc
            return None
        except BotoCoreError as exc:
            problem = access_problem(exc, "SES")
            if problem is None:
                return None
            if isinstance(exc, NoCredentialsError | PartialCredentialsError):
                raise ConfigError(f"ses: {problem}") from exc
            raise StoppedError(f"ses: {problem}; nothing was published or sent: run the same "
                               "command again") from exc
        if account.get("SendingEnabled") is False:
            raise StoppedError("ses: sending is paused for this account (GetAccount: "
                               "SendingEnabled false); nothing was published or sent")
        rate = account.get("SendQuota", {}).get("MaxSendRate", 0.0)
        return rate if rate > 0 else None  # 0 or not said: no limit known

    def describe(self) -> str:
        """``ses``, and the configuration set when one is named."""
        named = self.configuration_set
        return "ses" + (f" (configuration set {named})" if named else "")

    def close(self) -> None:
        """Close the client this transport built (a client passed in stays its owner's)."""
        if self._owns_client:
            self.client.close()


def _ascii_envelope(message: Outgoing) -> tuple[str, str]:
    """(sender, recipient) as SES takes them: ASCII, domains in IDNA form."""
    rcpt = message.recipient
    try:
        to = wire_address(rcpt)
    except UnsendableAddress as exc:
        raise PermanentFailure(f"ses: {exc}", recipient=rcpt) from exc
    if to.needs_smtputf8:
        raise PermanentFailure(f"ses: {rcpt}: the local part is not ASCII, and SES takes "
                               "only ASCII addresses (no SMTPUTF8)", recipient=rcpt)
    try:
        sender = wire_address(message.sender)
    except UnsendableAddress as exc:
        raise SendingStopped(f"ses: the sender {exc}", recipient=rcpt) from exc
    if sender.needs_smtputf8:
        raise SendingStopped(f"ses: the sender {message.sender} has a non-ASCII local part, "
                             "which SES does not take", recipient=rcpt)
    return sender.idna, to.idna


def email_tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """SES message tags in SES's alphabet ([A-Za-z0-9_-], ≤256): a stray character would
    turn every message into a ``BadRequestException``."""
    return [{"Name": _TAG_UNSAFE.sub("_", name)[:256],
             "Value": _TAG_UNSAFE.sub("_", value)[:256] or "_"}
            for name, value in sorted(tags.items()) if name]


def _client_error(exc: ClientError, recipient: str) -> TransportError:
    """The transport error for an error answer from SES."""
    error = answer(exc)
    said = f"ses: {error}"
    words = without_addresses(error.message)  # the sandbox names the recipient it refused
    if ACCOUNT_STOPPED.search(words) or error.code in _STOPPED:
        return SendingStopped(said, recipient=recipient)
    if error.code in _THROTTLED or THROTTLED.search(words) or error.status == 429:
        return TemporaryFailure(said, recipient=recipient)
    if error.code in _PERMANENT:
        return PermanentFailure(said, recipient=recipient)
    if error.status >= 500:
        return TemporaryFailure(said, recipient=recipient)
    return SendingStopped(said, recipient=recipient)
