"""The subscription app wired from the settings: the store, the signing keys, the transport
and the SNS verifier set up in one place for every host (``newsletter serve`` on uvicorn, the
Lambda function of ``deploy/``). Kept apart from uvicorn, which only ``serve`` runs: the
function's package does not ship it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import ExitStack

from starlette.applications import Starlette

from pipeline.config import Settings
from pipeline.core.email.render import Footer
from pipeline.web.app import SNS_WINDOW, create_app
from pipeline.web.sns import CertificateSource, SnsVerifier
from pipeline.wiring import open_signup_queue, open_subscriptions, signing_keys

log = logging.getLogger("newsletter.app")


def open_app(settings: Settings, environ: Mapping[str, str], stack: ExitStack) -> Starlette:
    """The subscription app wired from the settings; its store and transport are closed
    when ``stack`` closes. One wiring for ``newsletter serve`` and any other host (the
    Lambda function of ``deploy/``)."""
    _, development = signing_keys(settings, environ)
    subscriptions = stack.enter_context(open_subscriptions(settings, environ))
    verifier = None
    if settings.ses.sns_topic_arns:
        verifier = SnsVerifier(CertificateSource(), settings.ses.sns_topic_arns,
                               max_age=SNS_WINDOW)
    if development:
        log.warning("links are signed with the public development key: fine for the "
                    "local outbox, never for real mail (set NEWSLETTER_SECRET)")
    if verifier is None:
        log.info("POST /webhooks/ses is off: no [ses] sns_topic_arns")
    signups = open_signup_queue(settings)
    if signups is not None:
        log.info("sign-ups go to the queue %s", settings.subscriptions.queue_url)
    return create_app(subscriptions, app_url=settings.site.app_url,
                      base_url=settings.site.base_url, verifier=verifier,
                      footer=Footer.configured(settings.delivery, settings.site), signups=signups)
