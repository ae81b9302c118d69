"""The errors a user can cause, and the one root they share.

    NewsletterError                 anything the command line reports in one line
    ├── ConfigError                 bad configuration file or override        (exit 2)
    ├── UsageError                  bad arguments, e.g. a malformed --week    (exit 2)
    ├── FeedError                   a feed that cannot be read or parsed      (exit 2)
    ├── RenderError                 a template or MJML compile failure        (exit 1)
    ├── OutputError                 the build folder cannot be written        (exit 2)
    ├── IssueNotFoundError          no built issue for the week               (exit 2)
    ├── BlockedError                proof problems, not approved, tampered    (exit 3)
    │   └── SentWeekError           another issue under a sent week's name    (exit 3)
    ├── StoppedError                quota, paused account, interrupted        (exit 4)
    ├── LockedError                 another run holds the issue's lock        (exit 5)
    ├── ArchiveError                the archive cannot be read or written     (exit 1)
    ├── EmptyWeekError              the week has no items: nothing to send    (exit 6)
    ├── TranslateError              a translation backend failed or refused   (exit 1)
    └── TransportError              one message could not be handed over
        ├── PermanentFailure        this recipient will never take it: recorded, run goes on
        ├── TemporaryFailure        throttled or busy: retried with backoff
        ├── Unconfirmed             the transport may have taken it (timeout): never retried blindly
        └── SendingStopped          the account cannot send now (quota, paused): stop, resumable
            └── SendingMisconfigured  no rerun can fix it (login refused, untrusted
                                      certificate, no AUTH): stop, exit 2 with the fix

Each subclass carries its subject (a feed URL, a config key, a week) so messages name it.
Only the command line maps them to exit codes; stages raise, they never exit.
"""

from __future__ import annotations


class NewsletterError(Exception):
    exit_code = 1


class ConfigError(NewsletterError):
    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"config: {key}: {message}" if key else f"config: {message}")
        self.key = key


class UsageError(NewsletterError):
    exit_code = 2


class FeedError(NewsletterError):
    exit_code = 2

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"feed {url}: {message}")
        self.url = url


class RenderError(NewsletterError):
    def __init__(self, template: str, message: str) -> None:
        super().__init__(f"render {template}: {message}")


class OutputError(NewsletterError):
    exit_code = 2


class EmptyWeekError(NewsletterError):
    exit_code = 6

    def __init__(self, week_id: str, skipped: int = 0) -> None:
        extra = f" ({skipped} entries skipped)" if skipped else ""
        super().__init__(f"nothing to do: no reviews in {week_id}{extra}")


class IssueNotFoundError(NewsletterError):
    exit_code = 2


class BlockedError(NewsletterError):
    exit_code = 3


class SentWeekError(BlockedError):
    def __init__(self, message: str, *, week: str) -> None:
        super().__init__(message)
        self.week = week


class StoppedError(NewsletterError):
    exit_code = 4


class LockedError(NewsletterError):
    exit_code = 5


class ArchiveError(NewsletterError):
    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"archive: {message}")
        self.key = key


class TranslateError(NewsletterError):
    """A translation that arrives but breaks the code it had to keep is no error: it is
    rejected as a result value."""

    def __init__(self, message: str, *, backend: str) -> None:
        super().__init__(f"translate ({backend}): {message}")
        self.backend = backend


class TransportError(NewsletterError):
    def __init__(self, message: str, *, recipient: str | None = None) -> None:
        super().__init__(message)
        self.recipient = recipient


class PermanentFailure(TransportError):
    """``bounce``: the mailbox does not exist (``550 5.1.1``), so the address is marked
    bounced, as an SES bounce notification would do; any other refusal fails this message
    only."""

    def __init__(self, message: str, *, recipient: str | None = None,
                 bounce: bool = False) -> None:
        super().__init__(message, recipient=recipient)
        self.bounce = bounce


class TemporaryFailure(TransportError):
    def __init__(self, message: str, *, recipient: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, recipient=recipient)
        self.retry_after = retry_after


class Unconfirmed(TransportError):
    pass


class SendingStopped(TransportError):
    exit_code = 4


class SendingMisconfigured(SendingStopped):
    """It stops the run like any :class:`SendingStopped` (claims released, nothing lost), but
    no rerun cures it: exit 2, the message naming the setting to fix."""

    exit_code = 2
