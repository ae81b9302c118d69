"""Wiring for delivery: the transport, the signing keys and the rate a run uses.

The one place that turns settings and the environment into live adapters; the send loop
itself (``send.py``) only sees the interfaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.transport import OutboxTransport, Transport, require_secret
from subscribers.store import SubscriberStore
from subscribers.store.sqlite import FILE_NAME, SqliteStore
from subscribers.subscriptions import Policy, Subscriptions
from subscribers.tokens import Keys

if TYPE_CHECKING:
    from subscribers.store.dynamo import DynamoStore

OUTBOX_DIR = "outbox"


def open_transport(settings: Settings, environ: Mapping[str, str], issue_folder: Path
                   ) -> Transport:
    kind = settings.delivery.transport
    if kind == "outbox":
        return OutboxTransport(issue_folder / OUTBOX_DIR)
    require_secret(environ, kind)
    if kind == "smtp":
        from pipeline.transport.smtp import SmtpTransport

        return SmtpTransport(settings.smtp, environ.get("NEWSLETTER_SMTP_PASSWORD"))
    from pipeline.transport.ses import SesTransport

    return SesTransport(settings.ses.configuration_set)


def signing_keys(settings: Settings, environ: Mapping[str, str]) -> tuple[Keys, bool]:
    """The keys that sign links, and whether they are the development key.

    Real transports never get here without ``NEWSLETTER_SECRET``; the local outbox falls
    back to a fixed development key so ``make run`` works on a fresh machine.
    """
    if environ.get("NEWSLETTER_SECRET"):
        return Keys.from_environ(environ), False
    return Keys.development(), True


def send_rate(settings: Settings, transport: Transport) -> float | None:
    """``[delivery] max_rate`` when set, else what the transport reports (SES: the
    account's MaxSendRate), else unlimited."""
    if settings.delivery.max_rate > 0:
        return settings.delivery.max_rate
    return transport.max_rate()


def subscription_policy(settings: Settings) -> Policy:
    """``[subscriptions]`` as the subscription actions read it."""
    s = settings.subscriptions
    return Policy(confirm_days=s.confirm_days, transient_bounce_limit=s.transient_bounce_limit,
                  address_per_day=s.address_per_day, client_per_hour=s.client_per_hour)


@contextmanager
def open_subscriptions(settings: Settings, environ: Mapping[str, str]
                       ) -> Iterator[Subscriptions]:
    """The subscription actions wired to the deployment's store, keys and transport.

    Confirmation mails leave through ``[delivery] transport``; with the local outbox they
    land in ``<build_dir>/outbox/``. Used by ``newsletter serve`` and ``inbox process``.
    """
    from pipeline.stages.optin_mail import OptInMailer

    if not settings.site.app_url:
        raise ConfigError("needed for the links in confirmation mails", key="[site] app_url")
    keys, _ = signing_keys(settings, environ)
    transport = open_transport(settings, environ, settings.resolve(settings.paths.build_dir))
    try:
        store = open_store(settings)
        try:
            yield Subscriptions(store, keys, OptInMailer(settings, transport),
                                app_url=settings.site.app_url,
                                policy=subscription_policy(settings))
        finally:
            store.close()
    finally:
        transport.close()


def open_store(settings: Settings) -> SubscriberStore:
    """The deployment's subscriber store, as ``[store] backend`` says: ``sqlite`` is
    ``<[paths] data_dir>/subscribers.sqlite3``; ``dynamodb`` the two tables of ``[store]``
    (:func:`open_dynamo_store`, imported only then, so boto3 is loaded only by deployments
    that use it). Typed as the whole interface: mypy checks here that both backends keep
    every role of it."""
    if settings.store.backend == "dynamodb":
        return open_dynamo_store(settings)
    return SqliteStore.open(settings.resolve(settings.paths.data_dir) / FILE_NAME)


def open_dynamo_store(settings: Settings) -> DynamoStore:
    """The DynamoDB tables of ``[store]``, through a client built from AWS's own settings
    (region, endpoint, credentials), which the store closes with itself. Nothing is
    requested yet. ConfigError when no AWS region is configured. ``store migrate`` uses it
    whatever ``[store] backend`` says: DynamoDB is where it copies to."""
    from pipeline.aws import aws_client
    from subscribers.store.dynamo import DynamoStore

    # botocore's standard retries (throttling and 5xx are retried by botocore itself),
    # bounded waits, and a pool as large as the send loop's workers may need.
    client = aws_client("dynamodb", region=None, what="the DynamoDB store",
                        key="[store] backend", retries={"mode": "standard"},
                        connect_timeout=10.0, read_timeout=30.0, max_pool_connections=32)
    return DynamoStore(client, settings.store.subscribers_table, settings.store.ledger_table,
                       owns_client=True)
