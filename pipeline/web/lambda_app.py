"""The subscription app as an AWS Lambda function (``deploy/template.yaml``).

CloudFront sends ``/api/*`` to the function URL, and Mangum hands each event to the app
``newsletter serve`` runs, built once per cold start. What only the Lambda host needs:

* **Secrets** never sit in the function's configuration: ``<NAME>_PARAMETER`` names an SSM
  SecureString or a Secrets Manager ARN, read at cold start.
* **Only through CloudFront.** The function URL is public, so CloudFront adds a secret
  ``X-Origin-Verify`` header and a request without it is refused (403); only then is
  ``CloudFront-Viewer-Address`` believed as the visitor's address.
* **Sign-ups through SQS** (:mod:`pipeline.web.signups`): Mangum runs background tasks before
  the function returns, so the answer's time would follow the address's state.
"""

from __future__ import annotations

import base64
import functools
import hmac
import logging
import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mangum import Mangum

from pipeline.aws import aws_client
from pipeline.config import load
from pipeline.web.app import open_app
from pipeline.web.mail_queue import carry_out
from pipeline.web.signups import Signup

if TYPE_CHECKING:
    from subscribers.subscriptions import Subscriptions

log = logging.getLogger("newsletter.app")

#: The header CloudFront adds to every request it sends to the function (deploy/).
ORIGIN_HEADER = "x-origin-verify"
#: The header in which CloudFront gives the viewer's ``address:port``.
VIEWER_ADDRESS_HEADER = "cloudfront-viewer-address"
#: Secret variables, each read from the parameter or secret that ``<NAME>_PARAMETER`` names.
SECRET_VARIABLES = ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS", "NEWSLETTER_ORIGIN_SECRET")

Event = dict[str, Any]
Handler = Callable[[Event, Any], dict[str, Any]]


def read_secret(reference: str) -> str:
    """The value behind ``reference``: a Secrets Manager ARN, else an SSM parameter name
    (a SecureString is decrypted)."""
    if reference.startswith("arn:") and ":secretsmanager:" in reference:
        secret = aws_client("secretsmanager", region=None, what="reading a secret")
        return str(secret.get_secret_value(SecretId=reference)["SecretString"])
    parameter = aws_client("ssm", region=None, what="reading a secret").get_parameter(
        Name=reference, WithDecryption=True)
    return str(parameter["Parameter"]["Value"])


def with_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ`` with each secret of :data:`SECRET_VARIABLES` filled in from
    the parameter its ``_PARAMETER`` variable names, unless it is set already."""
    resolved = dict(environ)
    for name in SECRET_VARIABLES:
        reference = resolved.pop(f"{name}_PARAMETER", "").strip()
        if reference and not resolved.get(name):
            resolved[name] = read_secret(reference).strip()
    return resolved


def create_handler(environ: Mapping[str, str], stack: ExitStack) -> Handler:
    """The Lambda handler over the app wired from ``environ`` (secrets already resolved);
    what ``open_app`` opens is closed with ``stack``."""
    config = environ.get("NEWSLETTER_CONFIG")
    settings = load(Path(config) if config else None, environ)
    app = open_app(settings, environ, stack)
    adapter = Mangum(app, lifespan="off")
    origin_secret = environ.get("NEWSLETTER_ORIGIN_SECRET", "")

    def handle(event: Event, context: Any) -> dict[str, Any]:
        if _from_sqs(event):  # the Lambda service itself, never a function URL request
            return drain_signups(event, app.state.subscriptions)
        headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
        if origin_secret and not hmac.compare_digest(headers.pop(ORIGIN_HEADER, "").encode(),
                                                     origin_secret.encode()):
            return {"statusCode": 403, "body": "Forbidden",
                    "headers": {"content-type": "text/plain; charset=utf-8",
                                "cache-control": "no-store"}}
        # Without the secret, nothing vouches for the viewer's address.
        return adapter(_prepared(event, headers, trust_viewer_address=bool(origin_secret)),
                       context)

    return handle


def _from_sqs(event: Event) -> bool:
    """Whether the event is a batch of SQS messages; a function URL request never is."""
    records = event.get("Records")
    return ("requestContext" not in event and isinstance(records, list) and bool(records)
            and all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs"
                    for r in records))


def drain_signups(event: Event, subscriptions: Subscriptions) -> dict[str, Any]:
    """Carry out each queued sign-up. One that fails for now is named in
    ``batchItemFailures`` so SQS delivers it again; one that is no sign-up is logged and dropped."""
    failed: list[dict[str, str]] = []
    for record in event["Records"]:
        message_id = str(record.get("messageId", ""))
        try:
            signup = Signup.from_json(str(record.get("body", "")))
        except ValueError as exc:
            log.warning("sign-up %s dropped: %s", message_id, exc)
            continue
        if not carry_out(functools.partial(signup.run, subscriptions), "subscribe"):
            failed.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failed}


def _prepared(event: Event, headers: dict[str, str], *, trust_viewer_address: bool) -> Event:
    """The event without the origin secret, with the viewer's address when CloudFront vouches
    for it, and with a ``Content-Length`` (the app reads a form only up to that length)."""
    event = {**event, "headers": headers}
    body = event.get("body")
    if body and "content-length" not in headers:
        raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
        headers["content-length"] = str(len(raw))
    viewer = headers.get(VIEWER_ADDRESS_HEADER, "")
    if trust_viewer_address and viewer:
        context = event.get("requestContext") or {}
        http = {**(context.get("http") or {}), "sourceIp": _address_of(viewer)}
        event["requestContext"] = {**context, "http": http}
    return event


def _address_of(viewer_address: str) -> str:
    """``203.0.113.7:46532`` → ``203.0.113.7``; ``2001:db8::1:46532`` → ``2001:db8::1``."""
    host, _, port = viewer_address.strip().rpartition(":")
    return host.strip("[]") if host and port.isdigit() else viewer_address.strip()


#: Never closed: Lambda discards the environment without a shutdown hook.
_stack = ExitStack()
handler: Handler = create_handler(with_secrets(os.environ), _stack)
