"""The inbox on S3: where an SES receipt rule's S3 action stores each inbound mail, raw.

Listing with ``Delimiter="/"`` never sees what was moved aside, nor SES's setup notification.
Imported only when ``[inbox] source = "s3"``, so boto3 loads only then.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from pipeline.aws import is_missing_key, s3_reason
from pipeline.inbox import InboundMail, Inbox, InboxError, Outcome, check_move, is_mail_name

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Inbox"]


class S3Inbox(Inbox):
    """Raw mails as objects directly under ``prefix`` in ``bucket``.

    Moving aside is CopyObject then DeleteObject; a crash between the two leaves the mail listed
    again, and the next run only finishes the move.
    """

    def __init__(self, bucket: str, prefix: str, client: S3Client, *, owns_client: bool = False,
                 page_size: int | None = None) -> None:
        if not bucket:
            raise InboxError("s3", "no bucket given ([inbox] bucket)")
        self.bucket = bucket
        self.prefix = _prefix(prefix)
        self.client = client
        self.page_size = page_size
        self._owns_client = owns_client

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def pending(self) -> Iterator[InboundMail]:
        for name in self._waiting():
            full = self.prefix + name
            try:
                raw = self.client.get_object(Bucket=self.bucket, Key=full)["Body"].read()
            except (ClientError, BotoCoreError, OSError) as exc:
                if isinstance(exc, ClientError) and is_missing_key(exc):
                    continue  # moved aside by another run meanwhile
                raise self._error(exc, f"cannot read {full}") from exc
            yield InboundMail(name, raw)

    def _waiting(self) -> list[str]:
        """The waiting mails' names, oldest (LastModified) first, from every page."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix, Delimiter="/",
            PaginationConfig={"PageSize": self.page_size} if self.page_size else {})
        found: list[tuple[Any, str]] = []
        try:
            for page in pages:
                for item in page.get("Contents", ()):
                    rest = item["Key"][len(self.prefix):]
                    if is_mail_name(rest):
                        found.append((item.get("LastModified"), rest))
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, "cannot list the waiting mails") from exc
        return [name for _, name in sorted(found)]

    def move_aside(self, key: str, outcome: Outcome) -> None:
        check_move(key, outcome)
        source, target = self.prefix + key, f"{self.prefix}{outcome}/{key}"
        try:
            self.client.copy_object(Bucket=self.bucket, Key=target,
                                    CopySource={"Bucket": self.bucket, "Key": source})
        except (ClientError, BotoCoreError, OSError) as exc:
            if isinstance(exc, ClientError) and is_missing_key(exc):
                return  # already moved aside (by another run)
            raise self._error(exc, f"cannot copy {source} to {target}") from exc
        try:
            self.client.delete_object(Bucket=self.bucket, Key=source)
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, f"cannot delete {source} (copied to {target})") from exc

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def _error(self, exc: Exception, doing: str) -> InboxError:
        return InboxError(self.describe(), f"{doing}: " + s3_reason(
            exc, self.bucket, rights="s3:ListBucket, s3:GetObject, s3:PutObject and "
            "s3:DeleteObject"))


def _prefix(prefix: str) -> str:
    """``""`` stays empty; otherwise no leading slash and exactly one trailing slash."""
    stripped = prefix.strip().strip("/")
    return stripped + "/" if stripped else ""
