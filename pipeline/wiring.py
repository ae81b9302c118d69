"""Wiring for delivery: the transport, the signing keys and the rate a run uses.

The one place that turns settings and the environment into live adapters; the send loop
itself (``send.py``) only sees the interfaces.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.config import Settings, TranslateSettings
from pipeline.errors import ConfigError
from pipeline.translate import API_KEY_VARIABLE, Translator
from pipeline.transport import OutboxTransport, Transport, require_secret
from subscribers.subscriptions import Policy, Subscriptions
from subscribers.tokens import Keys

if TYPE_CHECKING:
    from pipeline.sources import PullSource
    from pipeline.stages.machine_translation import Translate

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
    from subscribers.store.sqlite import open_store

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


# -- the build's sources: machine translation and GitHub -------------------------------------


def open_translator(settings: Settings | TranslateSettings,
                    environ: Mapping[str, str]) -> Translator | None:
    """The configured backend, or None when ``[translate] backend = "none"``.

    ``openai`` needs ``base_url`` and ``model``; its key comes from
    ``NEWSLETTER_TRANSLATE_API_KEY`` only (optional: a local vLLM server needs none).
    ``aws`` needs an AWS region from AWS's own settings.
    """
    conf = settings.translate if isinstance(settings, Settings) else settings
    if conf.backend == "none":
        return None
    if conf.backend == "openai":
        if not conf.base_url:
            raise ConfigError("the openai backend needs the server's URL "
                              "(e.g. http://127.0.0.1:8000/v1)", key="[translate] base_url")
        if not conf.model:
            raise ConfigError("the openai backend needs a model name", key="[translate] model")
        from pipeline.translate.openai import OpenAITranslator

        return OpenAITranslator(conf.base_url, conf.model, environ.get(API_KEY_VARIABLE) or None)
    if conf.backend == "aws":
        from pipeline.translate.aws import AwsTranslator

        return AwsTranslator()
    raise ConfigError(f"expected one of none, openai, aws, got {conf.backend!r}",
                      key="[translate] backend")


@contextmanager
def open_translation(settings: Settings, environ: Mapping[str, str]
                     ) -> Iterator[Translate | None]:
    """The machine-translation callable for a build, or None when ``[translate] backend`` is
    "none"; its translation memory stays open for the block."""
    from pipeline.stages.machine_translation import translate_html
    from pipeline.translate.memory import TranslationMemory, memory_path

    translator = open_translator(settings, environ)
    if translator is None:
        yield None
        return
    memory = TranslationMemory.open(memory_path(settings))
    try:
        yield functools.partial(translate_html, translator, memory)
    finally:
        memory.close()
        close = getattr(translator, "close", None)
        if close:
            close()


def open_github(settings: Settings, environ: Mapping[str, str]) -> PullSource | None:
    """The GitHub facts source for a build, or None when ``[github] enabled`` is false."""
    from pipeline.sources.github import GithubClient

    if not settings.github.enabled:
        return None
    return GithubClient(settings.github.api_url, environ.get("GITHUB_TOKEN"),
                        settings.resolve(settings.paths.data_dir) / "github")
