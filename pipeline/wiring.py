"""Wiring: the one module that imports the adapters and builds them from settings.

The stages only ever see the interfaces; the command line and the web app call these
functions. Adapters that need boto3 are imported inside the function that builds them, so
it loads only when a deployment uses AWS.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.archive import Archive
from pipeline.archive.local import LocalArchive
from pipeline.aws import aws_client, s3_client
from pipeline.config import Settings, TranslateSettings
from pipeline.errors import ArchiveError, ConfigError
from pipeline.inbox import Inbox
from pipeline.inbox.local import LocalInbox
from pipeline.sources.github import GithubClient
from pipeline.stages.machine_translation import translate_html
from pipeline.stages.optin_mail import OptInMailer
from pipeline.stages.preflight import check_delivery, check_issue
from pipeline.translate import API_KEY_VARIABLE, Translator
from pipeline.translate.aws import AwsTranslator
from pipeline.translate.memory import TranslationMemory, memory_path
from pipeline.translate.openai import OpenAITranslator
from pipeline.transport import Transport, require_secret
from pipeline.transport.outbox import OutboxTransport
from pipeline.transport.smtp import SmtpTransport, default_helo_name, tls_context
from subscribers.store import SubscriberStore
from subscribers.store.sqlite import FILE_NAME, SqliteStore
from subscribers.subscriptions import Policy, Subscriptions
from subscribers.tokens import Keys

if TYPE_CHECKING:
    from pipeline.aws.sqs import SqsQueue
    from pipeline.core.assemble import Choice
    from pipeline.sources import PullSource
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.deliver import SendRequest
    from pipeline.stages.machine_translation import Translate
    from pipeline.stages.preflight import Delivery
    from subscribers.model import SentIssue
    from subscribers.store.dynamo import DynamoStore

OUTBOX_DIR = "outbox"


def open_transport(settings: Settings, environ: Mapping[str, str], issue_folder: Path
                   ) -> Transport:
    kind = settings.delivery.transport
    if kind == "outbox":
        return OutboxTransport(issue_folder / OUTBOX_DIR)
    require_secret(environ, kind)
    if kind == "smtp":
        return open_smtp(settings, environ)
    from pipeline.transport.ses import SesTransport

    return SesTransport(settings.ses.configuration_set)


def open_smtp(settings: Settings, environ: Mapping[str, str]) -> Transport:
    """The ``smtp`` transport; a missing CA file or a From domain that is no host name is a
    ConfigError here, before anything is sent."""
    s = settings.smtp
    context = tls_context(settings.resolve(s.ca_file) if s.ca_file else None)
    return SmtpTransport(s, environ.get("NEWSLETTER_SMTP_PASSWORD"), ssl_context=context,
                         helo_name=default_helo_name(s, settings.delivery.from_),
                         eight_bit=settings.delivery.eight_bit)


def signing_keys(environ: Mapping[str, str]) -> tuple[Keys, bool]:
    """The keys that sign links, and whether they are the development key (the local
    outbox's fallback, so ``make run`` works on a fresh machine)."""
    if environ.get("NEWSLETTER_SECRET"):
        return Keys.from_environ(environ), False
    return Keys.development(), True


def open_delivery(settings: Settings, environ: Mapping[str, str], built: BuiltIssue,
                  request: SendRequest, *, at: datetime) -> Delivery:
    """Every check of a send, in :mod:`pipeline.stages.preflight`'s order; the first that
    fails raises."""
    check_issue(settings, built, at=at, test_copies=request.to is not None,
                allow_missing_translations=request.allow_missing_translations,
                allow_partial_week=request.allow_partial_week)
    keys, development = signing_keys(environ)
    transport = open_transport(settings, environ, built.folder)
    return check_delivery(settings, built, keys, development, transport)


@contextmanager
def open_subscriptions(settings: Settings, environ: Mapping[str, str]
                       ) -> Iterator[Subscriptions]:
    """The subscription actions wired to the deployment's store, keys and transport (with
    the local outbox, confirmation mails land in ``<build_dir>/outbox/``)."""
    if not settings.site.app_url:
        raise ConfigError("needed for the links in confirmation mails", key="[site] app_url")
    keys, _ = signing_keys(environ)
    s = settings.subscriptions
    policy = Policy(confirm_days=s.confirm_days, transient_bounce_limit=s.transient_bounce_limit,
                    address_per_day=s.address_per_day, client_per_hour=s.client_per_hour)
    with open_transport(settings, environ, settings.resolve(settings.paths.build_dir)
                        ) as transport, open_store(settings) as store:
        yield Subscriptions(store, keys, OptInMailer(settings, transport),
                            app_url=settings.site.app_url, policy=policy)


def open_signup_queue(settings: Settings) -> SqsQueue | None:
    """The queue the app hands sign-ups to on Lambda, or None: done in its own process."""
    if not settings.subscriptions.queue_url:
        return None
    from pipeline.aws.sqs import SqsQueue  # boto3 only when a queue is used

    return SqsQueue(settings.subscriptions.queue_url, what="the sign-up queue",
                    key="[subscriptions] queue_url")


def open_archive(settings: Settings) -> Archive:
    conf = settings.archive
    if conf.target == "local":
        return LocalArchive(settings.resolve(conf.dir))
    if not conf.bucket.strip():
        raise ConfigError("the s3 archive needs a bucket name", key="[archive] bucket")
    from pipeline.archive.s3 import S3Archive, normalise_prefix  # boto3 only when S3 is used

    try:
        normalise_prefix(conf.prefix)
    except ArchiveError as exc:
        raise ConfigError(str(exc).removeprefix("archive: "), key="[archive] prefix") from None
    return S3Archive(conf.bucket.strip(), conf.prefix)


def open_inbox(settings: Settings) -> Inbox:
    s = settings.inbox
    if s.source == "s3":
        from pipeline.inbox.s3 import S3Inbox  # boto3 only when S3 is used

        return S3Inbox(s.bucket, s.prefix, s3_client(), owns_client=True)
    return LocalInbox(settings.resolve(s.dir))


def open_store(settings: Settings) -> SubscriberStore:
    """The store ``[store] backend`` names. Typed as the whole interface: mypy checks here
    that both backends keep every role of it."""
    if settings.store.backend == "dynamodb":
        return open_dynamo_store(settings)
    return SqliteStore.open(sqlite_path(settings))


def sqlite_path(settings: Settings) -> Path:
    return settings.resolve(settings.paths.data_dir) / FILE_NAME


def reader_choices(settings: Settings, week_id: str
                   ) -> tuple[Sequence[Choice], SentIssue | None]:
    """The readers' (layout, areas) choices a build renders variants for, and what the week
    went out as, if it did. A build must not create a local store, so none means neither."""
    if not store_exists(settings):
        return [], None
    with open_store(settings) as store:
        return store.variant_choices(), store.sent_issue(week_id)


def sent_issue(settings: Settings, week_id: str) -> SentIssue | None:
    if not store_exists(settings):
        return None
    with open_store(settings) as store:
        return store.sent_issue(week_id)


def archive_weeks(settings: Settings) -> Sequence[str]:
    """The weeks the archive holds, which number a build's issue unless ``[issue]
    first_week`` is set."""
    if settings.issue.first_week:
        return []
    with open_archive(settings) as archive:
        return archive.list_issues()


def store_exists(settings: Settings) -> bool:
    """Whether there is a store to read: a command that only reads it must not create it."""
    return settings.store.backend == "dynamodb" or sqlite_path(settings).exists()


def archive_lease(settings: Settings) -> str:
    """The lease every write to the archive holds, named for where the archive is: the same
    from any folder and machine, however the prefix's slashes were written."""
    conf = settings.archive
    if conf.target == "s3":
        return f"publish:s3://{conf.bucket.strip()}/{conf.prefix.strip().strip('/')}"
    return f"publish:{settings.resolve(conf.dir)}"


def open_dynamo_store(settings: Settings) -> DynamoStore:
    """The DynamoDB tables of ``[store]``, whatever ``[store] backend`` says (``store
    migrate`` copies there); ConfigError when no AWS region is configured."""
    from subscribers.store.dynamo import DynamoStore

    # botocore retries throttling and 5xx; the pool is as large as the send loop may need.
    client = aws_client("dynamodb", region=None, what="the DynamoDB store",
                        key="[store] backend", retries={"mode": "standard"},
                        connect_timeout=10.0, read_timeout=30.0, max_pool_connections=32)
    return DynamoStore(client, settings.store.subscribers_table, settings.store.ledger_table,
                       owns_client=True)


def open_translator(settings: Settings | TranslateSettings,
                    environ: Mapping[str, str]) -> Translator | None:
    """The configured backend, or None (the openai key is optional: vLLM's server needs none)."""
    conf = settings.translate if isinstance(settings, Settings) else settings
    if conf.backend == "none":
        return None
    if conf.backend == "openai":
        if not conf.base_url:
            raise ConfigError("the openai backend needs the server's URL "
                              "(e.g. http://127.0.0.1:8000/v1)", key="[translate] base_url")
        if not conf.model:
            raise ConfigError("the openai backend needs a model name", key="[translate] model")
        return OpenAITranslator(conf.base_url, conf.model, environ.get(API_KEY_VARIABLE) or None)
    return AwsTranslator()


@contextmanager
def open_translation(settings: Settings, environ: Mapping[str, str]
                     ) -> Iterator[Translate | None]:
    """The build's machine-translation callable, or None; its memory stays open for the block."""
    translator = open_translator(settings, environ)
    if translator is None:
        yield None
        return
    with translator, TranslationMemory.open(memory_path(settings)) as memory:
        yield functools.partial(translate_html, translator, memory)


def open_github(settings: Settings, environ: Mapping[str, str]) -> PullSource | None:
    if not settings.github.enabled:
        return None
    return GithubClient(settings.github.api_url, environ.get("GITHUB_TOKEN"),
                        settings.resolve(settings.paths.data_dir) / "github")
