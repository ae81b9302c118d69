"""The events AWS Lambda hands the subscription app's function: function URL requests as
CloudFront forwards them (payload format 2.0), and batches from the sign-up queue."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

APP_URL = "https://example.org/api"
SITE = "https://example.org"


def url_event(method: str, path: str, *, form: dict[str, str] | None = None,
              query: str = "", base64_body: bool = False,
              headers: dict[str, str] | None = None,
              source_ip: str = "130.176.9.19") -> dict[str, Any]:
    headers = {"host": "abcdefghij.lambda-url.us-east-1.on.aws", "x-forwarded-proto": "https",
               "x-forwarded-for": source_ip, "user-agent": "Amazon CloudFront",
               **(headers or {})}
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "headers": headers, "isBase64Encoded": base64_body,
        "requestContext": {
            "accountId": "anonymous", "apiId": "abcdefghij",
            "domainName": headers["host"], "domainPrefix": "abcdefghij",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": source_ip, "userAgent": "Amazon CloudFront"},
            "requestId": "c1a7e9b0-0000-4000-8000-000000000000", "routeKey": "$default",
            "stage": "$default", "time": "30/Nov/2026:01:00:00 +0000",
            "timeEpoch": 1795914000000},
    }
    if form is not None:
        body = urlencode(form)
        headers["content-type"] = "application/x-www-form-urlencoded"
        event["body"] = base64.b64encode(body.encode()).decode() if base64_body else body
    return event


def subscribe_event(email: str, **options: Any) -> dict[str, Any]:
    """The subscribe form posted from the archive's own site."""
    headers = {"origin": SITE, **options.pop("headers", {})}
    return url_event("POST", "/api/subscribe", form={"email": email, "layout": "en"},
                     headers=headers, **options)


def sqs_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch of ``messages`` (as ``ReceiveMessage`` returned them) for the function."""
    return {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"],
                         "body": m["Body"], "attributes": {}, "messageAttributes": {},
                         "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
                         "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:signups",
                         "awsRegion": "us-east-1"} for m in messages]}


def body_of(answer: dict[str, Any]) -> str:
    """The text of a function URL answer, base64 or not."""
    body = answer.get("body", "")
    return base64.b64decode(body).decode() if answer.get("isBase64Encoded") else body
