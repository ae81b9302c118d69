"""The ``s3`` archive: the public web archive as objects in an S3 bucket, under a prefix.

The only module that imports boto3 for the archive. Region, endpoint and credentials are AWS's
own settings (``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``, profiles); nothing here reads them.

Keys are ``<prefix><key>``: the prefix loses any leading slash and gains exactly one trailing
slash when it is not empty (``"/weekly"`` → ``"weekly/"``), and every key passes
:func:`~pipeline.archive.check_key` before a request is made.

Skipping unchanged objects without a HEAD per object: the first ``list_issues`` or ``write``
lists the whole prefix once (paginated) and remembers each object's ETag, which for an object
uploaded in one ``PutObject`` without SSE-KMS/SSE-C is the hex MD5 of its bytes; ``write``
compares that with :attr:`SiteObject.md5` and records the ETag S3 returns for what it uploads.
An object whose ETag is not an MD5 (multipart, SSE-KMS) is simply uploaded again. Headers are
not compared: an object whose bytes are unchanged keeps the ``Content-Type`` and
``Cache-Control`` it was first stored with (:meth:`S3Archive.refresh` only re-reads ETags).

``ContentMD5`` is sent with every upload, so S3 rejects a body damaged on the way (``BadDigest``).
botocore's standard retries stay on: ``PutObject`` of the same bytes is idempotent.

Each botocore error is mapped at this edge to :class:`~pipeline.errors.ArchiveError` with the
key and a one-line reason (:func:`pipeline.aws.s3_reason`, shared with the S3 inbox), keeping
it as the cause:

====================================================  =========================================
``NoSuchBucket``                                       "bucket X does not exist"
``AccessDenied`` / HTTP 403                            "access denied to bucket X (…)"
``BadDigest`` / ``InvalidDigest``                      "… damaged in transit (Content-MD5 …)"
``EndpointConnectionError``, ``ConnectTimeoutError``   "cannot reach S3 (…)"
``NoCredentialsError``, ``PartialCredentialsError``    "no usable AWS credentials (…)"
any other ``ClientError`` / ``BotoCoreError``          "S3 <code>: <message>" / "S3: <error>"
====================================================  =========================================
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from pipeline.archive import Archive, SiteObject, check_key, issue_id_of
from pipeline.aws import is_missing_key, s3_client, s3_reason
from pipeline.errors import ArchiveError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Archive", "normalise_prefix"]

def normalise_prefix(prefix: str) -> str:
    """``""`` stays empty; otherwise no leading slash and exactly one trailing slash.

    Raises :class:`ArchiveError` for a prefix that is not a safe relative path (``..``,
    empty segments, characters outside ``[A-Za-z0-9._/-]``).
    """
    stripped = prefix.strip().strip("/")
    if not stripped:
        return ""
    try:
        check_key(stripped)
    except ArchiveError:
        raise ArchiveError(f"unusable prefix {prefix!r}: expected a relative path such as "
                           "'weekly/'") from None
    if "//" in stripped:
        raise ArchiveError(f"unusable prefix {prefix!r}: empty path segment")
    return stripped + "/"


#: The most keys one DeleteObjects request takes.
DELETE_BATCH = 1000


class S3Archive(Archive):
    """The archive as objects in ``bucket`` under ``prefix``.

    ``client`` lets a caller pass a client it built (and owns); otherwise one is built from
    AWS's own settings, in ``region`` when given. ``page_size`` bounds each
    ``ListObjectsV2`` page (S3's default and maximum is 1,000).

    Counters for reports and benchmarks: ``uploads`` and ``uploaded_bytes`` (what went up),
    ``skipped`` (writes found unchanged).
    """

    name = "s3"

    def __init__(self, bucket: str, prefix: str = "", *, client: S3Client | None = None,
                 region: str | None = None, page_size: int | None = None) -> None:
        if not bucket:
            raise ArchiveError("no bucket given")
        self.bucket = bucket
        self.prefix = normalise_prefix(prefix)
        self.page_size = page_size
        self._owns_client = client is None
        self._client = client if client is not None else s3_client(region)
        self._lock = threading.Lock()
        self._etags: dict[str, str] | None = None  # relative key → ETag; None: not listed yet
        self.uploads = 0
        self.uploaded_bytes = 0
        self.skipped = 0

    @property
    def client(self) -> S3Client:
        return self._client

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    # -- the Archive protocol --------------------------------------------------------------

    def list_issues(self) -> list[str]:
        """The weeks whose ``issues/<week>/issue.json`` is in the bucket, oldest first.

        Lists the whole prefix (one paginated pass) and refreshes the ETag cache with it.
        """
        etags = self._list()
        with self._lock:
            self._etags = etags
        return sorted(week for key in etags if (week := issue_id_of(key)))

    def read(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is no such key."""
        full = self._key(key)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=full)
            return response["Body"].read()
        except ClientError as exc:
            if is_missing_key(exc):
                return None
            raise self._error(exc, f"cannot read {full}", key) from exc
        except (BotoCoreError, OSError) as exc:
            raise self._error(exc, f"cannot read {full}", key) from exc

    def write(self, obj: SiteObject) -> bool:
        """Upload ``obj`` unless the bucket already holds the same bytes (False then)."""
        full = self._key(obj.key)
        digest = obj.md5
        if self._known_etags().get(obj.key) == digest:
            with self._lock:
                self.skipped += 1
            return False
        try:
            response = self._client.put_object(
                Bucket=self.bucket, Key=full, Body=obj.data,
                ContentType=obj.content_type, CacheControl=obj.cache_control,
                ContentMD5=base64.b64encode(bytes.fromhex(digest)).decode("ascii"),
            )
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, f"cannot write {full}", obj.key) from exc
        etag = _etag(response.get("ETag")) or digest
        with self._lock:
            if self._etags is not None:
                self._etags[obj.key] = etag
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
                response = self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)}
                                                            for k in batch], "Quiet": True})
            except (ClientError, BotoCoreError, OSError) as exc:
                raise self._error(exc, f"cannot remove {len(batch)} object(s) under "
                                  f"s3://{self.bucket}/{self.prefix}", batch[0]) from exc
            with self._lock:
                for key in batch:
                    if self._etags is not None:
                        self._etags.pop(key, None)
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise ArchiveError(f"cannot remove s3://{self.bucket}/{first.get('Key')}: "
                                   f"{first.get('Code')}: {first.get('Message')}",
                                   key=str(first.get("Key", ""))[len(self.prefix):])
        return len(present)

    # -- the ETag cache ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Forget the remembered ETags; the next ``write`` lists the prefix again."""
        with self._lock:
            self._etags = None

    def _known_etags(self) -> dict[str, str]:
        with self._lock:
            etags = self._etags
        if etags is None:
            listed = self._list()
            with self._lock:
                if self._etags is None:
                    self._etags = listed
                etags = self._etags
        return etags

    def _list(self) -> dict[str, str]:
        """Relative key → ETag of every object under the prefix (every page)."""
        paging: dict[str, Any] = {"Bucket": self.bucket}
        if self.prefix:
            paging["Prefix"] = self.prefix
        if self.page_size:
            paging["PaginationConfig"] = {"PageSize": self.page_size}
        found: dict[str, str] = {}
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(**paging):
                for item in page.get("Contents", ()):
                    found[item["Key"][len(self.prefix):]] = _etag(item.get("ETag"))
        except (ClientError, BotoCoreError, OSError) as exc:
            where = f"s3://{self.bucket}/{self.prefix}"
            raise self._error(exc, f"cannot list {where}", None) from exc
        return found

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def close(self) -> None:
        """Close the client this archive built (a client passed in stays its owner's)."""
        if self._owns_client:
            self._client.close()

    # -- errors -------------------------------------------------------------------------------

    def _error(self, exc: Exception, doing: str, key: str | None) -> ArchiveError:
        return ArchiveError(f"{doing}: {self._reason(exc)}", key=key)

    def _reason(self, exc: Exception) -> str:
        return s3_reason(exc, self.bucket,
                         rights="s3:ListBucket, s3:GetObject and s3:PutObject")


def _etag(value: Any) -> str:
    """An ETag without its quotes (``'"9e10…"'`` → ``'9e10…'``)."""
    return str(value or "").strip().strip('"')
