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
    """Root of every error the pipeline reports to a user."""

    exit_code = 1


class ConfigError(NewsletterError):
    """The configuration file or a ``NEWSLETTER_*`` override is wrong."""

    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"config: {key}: {message}" if key else f"config: {message}")
        self.key = key


class UsageError(NewsletterError):
    """A command-line argument is wrong (a malformed week, a missing feed)."""

    exit_code = 2


class FeedError(NewsletterError):
    """A feed is missing, unreachable, not a feed, or not well-formed XML."""

    exit_code = 2

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"feed {url}: {message}")
        self.url = url


class RenderError(NewsletterError):
    """A template failed to render or its MJML failed to compile."""

    exit_code = 1

    def __init__(self, template: str, message: str) -> None:
        super().__init__(f"render {template}: {message}")
        self.template = template


class OutputError(NewsletterError):
    """The output folder cannot be written."""

    exit_code = 2


class EmptyWeekError(NewsletterError):
    """The week holds no item: an empty issue is never built or sent."""

    exit_code = 6

    def __init__(self, week_id: str, skipped: int = 0) -> None:
        extra = f" ({skipped} entries skipped)" if skipped else ""
        super().__init__(f"nothing to do: no reviews in {week_id}{extra}")
        self.week_id = week_id


class IssueNotFoundError(NewsletterError):
    """A stage that reads issue.json found none for the week."""

    exit_code = 2


class BlockedError(NewsletterError):
    """The issue may not go out as it is: blocking problems, no approval, changed files."""

    exit_code = 3


class SentWeekError(BlockedError):
    """Another issue would replace the one a week went out as, and it is no correction."""

    def __init__(self, message: str, *, week: str) -> None:
        super().__init__(message)
        self.week = week


class StoppedError(NewsletterError):
    """The run stopped before the end; running it again finishes the work."""

    exit_code = 4


class LockedError(NewsletterError):
    """Another run of the same issue is in progress."""

    exit_code = 5


class ArchiveError(NewsletterError):
    """The archive (a folder or an S3 bucket) could not be read or written."""

    exit_code = 1

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(f"archive: {message}")
        self.key = key


class TranslateError(NewsletterError):
    """A machine-translation backend failed (unreachable, throttled past its retries, an
    answer that is not one). ``backend`` is ``openai`` or ``aws``. A translation that arrives
    but breaks the code it had to keep is no error: it is rejected as a result value."""

    exit_code = 1

    def __init__(self, message: str, *, backend: str) -> None:
        super().__init__(f"translate ({backend}): {message}")
        self.backend = backend


class TransportError(NewsletterError):
    """A transport could not hand one message over. ``recipient`` is the address."""

    exit_code = 1

    def __init__(self, message: str, *, recipient: str | None = None) -> None:
        super().__init__(message)
        self.recipient = recipient


class PermanentFailure(TransportError):
    """The recipient's address refuses this message for good (e.g. SMTP 550, SES rejected).

    ``bounce``: the reply says the mailbox does not exist (``550 5.1.1 User unknown``, see
    :func:`pipeline.core.mail_in.bounces.mailbox_gone`), so the address is marked bounced and gets
    no later issue, as an SES bounce notification would do. Any other refusal (a policy, a
    message the server did not like) fails this message only."""

    def __init__(self, message: str, *, recipient: str | None = None,
                 bounce: bool = False) -> None:
        super().__init__(message, recipient=recipient)
        self.bounce = bounce


class TemporaryFailure(TransportError):
    """Throttled or busy (SMTP 421/451/454, SES "Maximum sending rate exceeded"): retry later."""

    def __init__(self, message: str, *, recipient: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, recipient=recipient)
        self.retry_after = retry_after


class Unconfirmed(TransportError):
    """The message may or may not have been accepted (a timeout after the data was sent)."""


class SendingStopped(TransportError):
    """The account cannot send now (daily quota, SendingPaused, AccountSuspended)."""

    exit_code = 4


class SendingMisconfigured(SendingStopped):
    """The transport refuses us in a way no rerun can cure: a login refused (535), a
    certificate nobody told us to trust, a relay that offers no AUTH, a sender it will not
    take. It stops the run like any :class:`SendingStopped` (claims released, nothing lost),
    but it is a configuration error: exit 2, the message naming the setting to fix."""

    exit_code = 2
