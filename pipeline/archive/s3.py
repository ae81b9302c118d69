"""The ``s3`` archive: the public web archive as objects in an S3 bucket, under a prefix.

Unchanged objects are skipped without a HEAD each: the first listing keeps every ETag, the
MD5 of a single ``PutObject`` without SSE-KMS (an ETag that is no MD5 means one more upload).
``ContentMD5`` goes with every upload, so S3 refuses a body damaged on the way. botocore's
errors become :class:`ArchiveError` with the key and a one-line reason, keeping the cause.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from pipeline.archive import Archive, SiteObject, check_key, issue_id_of
from pipeline.aws import is_missing_key, s3_client, s3_reason
from pipeline.errors import ArchiveError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Archive", "normalise_prefix"]


def normalise_prefix(prefix: str) -> str:
    """``"/weekly"`` → ``"weekly/"``, ``""`` stays empty; :class:`ArchiveError` for a prefix
    that is not a safe relative path."""
    stripped = prefix.strip().strip("/")
    try:
        return check_key(stripped) + "/" if stripped else ""
    except ArchiveError:
        raise ArchiveError(f"unusable prefix {prefix!r}: expected a relative path such as "
                           "'weekly/'") from None


DELETE_BATCH = 1000


class S3Archive(Archive):
    """The archive as objects in ``bucket`` under ``prefix``; ``client``: one the caller
    built (and owns). ``uploads``, ``uploaded_bytes`` and ``skipped`` count for benchmarks."""

    name = "s3"

    def __init__(self, bucket: str, prefix: str = "", *, client: S3Client | None = None,
                 region: str | None = None) -> None:
        if not bucket:
            raise ArchiveError("no bucket given")
        self.bucket = bucket
        self.prefix = normalise_prefix(prefix)
        self._owns_client = client is None
        self.client: S3Client = client if client is not None else s3_client(region)
        self._etags: dict[str, str] | None = None  # relative key → ETag; None: not listed yet
        self.uploads = 0
        self.uploaded_bytes = 0
        self.skipped = 0

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def list_issues(self) -> list[str]:
        """Lists the whole prefix and keeps its ETags."""
        self._etags = self._list()
        return sorted(week for key in self._etags if (week := issue_id_of(key)))

    def read(self, key: str) -> bytes | None:
        full = self._key(key)
        try:
            return self.client.get_object(Bucket=self.bucket, Key=full)["Body"].read()
        except (ClientError, BotoCoreError, OSError) as exc:
            if isinstance(exc, ClientError) and is_missing_key(exc):
                return None
            raise self._error(exc, f"cannot read {full}", key) from exc

    def write(self, obj: SiteObject) -> bool:
        full, digest = self._key(obj.key), obj.md5
        if self._known_etags().get(obj.key) == digest:
            self.skipped += 1
            return False
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=full, Body=obj.data,
                ContentType=obj.content_type, CacheControl=obj.cache_control,
                ContentMD5=base64.b64encode(bytes.fromhex(digest)).decode("ascii"),
            )
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, f"cannot write {full}", obj.key) from exc
        self._known_etags()[obj.key] = _etag(response.get("ETag")) or digest
        self.uploads += 1
        self.uploaded_bytes += len(obj.data)
        return True

    def keys(self, prefix: str) -> list[str]:
        """From the listing ``write`` keeps (one paginated pass when there is none yet)."""
        return sorted(key for key in self._known_etags() if key.startswith(prefix))

    def delete(self, keys: Sequence[str]) -> int:
        """``DeleteObjects``, 1,000 keys a request (S3's most); an object S3 would not
        delete is an ArchiveError naming it."""
        known = self._known_etags()
        present = [key for key in dict.fromkeys(keys) if key in known]
        for start in range(0, len(present), DELETE_BATCH):
            batch = present[start:start + DELETE_BATCH]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)}
                                                            for k in batch], "Quiet": True})
            except (ClientError, BotoCoreError, OSError) as exc:
                raise self._error(exc, f"cannot remove {len(batch)} object(s) under "
                                  f"{self.describe()}", batch[0]) from exc
            for key in batch:
                known.pop(key, None)
            if errors := response.get("Errors"):
                first = errors[0]
                raise ArchiveError(f"cannot remove s3://{self.bucket}/{first.get('Key')}: "
                                   f"{first.get('Code')}: {first.get('Message')}",
                                   key=str(first.get("Key", ""))[len(self.prefix):])
        return len(present)

    def _known_etags(self) -> dict[str, str]:
        if self._etags is None:
            self._etags = self._list()
        return self._etags

    def _list(self) -> dict[str, str]:
        """Relative key → ETag of every object under the prefix (every page)."""
        found: dict[str, str] = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                      Prefix=self.prefix)
        try:
            for page in pages:
                for item in page.get("Contents", ()):
                    found[item["Key"][len(self.prefix):]] = _etag(item.get("ETag"))
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, f"cannot list {self.describe()}", None) from exc
        return found

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def close(self) -> None:
        """Close the client this archive built (a client passed in stays its owner's)."""
        if self._owns_client:
            self.client.close()

    def _error(self, exc: Exception, doing: str, key: str | None) -> ArchiveError:
        return ArchiveError(f"{doing}: " + s3_reason(
            exc, self.bucket, rights="s3:ListBucket, s3:GetObject and s3:PutObject"), key=key)


def _etag(value: Any) -> str:
    """An ETag without its quotes (``'"9e10…"'`` → ``'9e10…'``)."""
    return str(value or "").strip().strip('"')
