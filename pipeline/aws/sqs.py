"""The sign-up queue on Amazon SQS: one ``SendMessage`` a sign-up, botocore's errors turned
into :class:`~pipeline.errors.TransportError` at this edge."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from pipeline.aws import aws_client
from pipeline.errors import TransportError

__all__ = ["SqsQueue"]


class SqsQueue:
    """Sends each message body to ``queue_url``; ``what`` names it in errors, ``key`` the
    setting a missing region is about."""

    def __init__(self, queue_url: str, *, what: str, key: str) -> None:
        self.queue_url = queue_url
        self.what = what
        self.client = aws_client("sqs", region=region_of(queue_url), what=what, key=key)

    def send(self, body: str) -> None:
        try:
            self.client.send_message(QueueUrl=self.queue_url, MessageBody=body)
        except (BotoCoreError, ClientError) as exc:
            raise TransportError(f"{self.what} did not take the request: "
                                 f"{type(exc).__name__}") from exc


def region_of(queue_url: str) -> str | None:
    """``https://sqs.<region>.amazonaws.com/…`` → the region; None for any other host (a
    local endpoint: AWS's own settings then decide)."""
    host = queue_url.split("://", 1)[-1].split("/", 1)[0]
    parts = host.split(".")
    return parts[1] if len(parts) >= 4 and parts[0] == "sqs" else None
