"""One way to make a boto3 client, for the adapters that speak to AWS, and the wording of
the errors they share.

A fresh boto3 session each time: the default one keeps the credentials it found first, which
a long-lived process should not inherit. The sessions share botocore's loader of service
models, most of what a new client costs. boto3 is imported lazily, by the AWS adapters only.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, overload

from pipeline.errors import ConfigError

if TYPE_CHECKING:  # boto3-stubs (the test extra): types only, never imported at run time
    from botocore.exceptions import ClientError
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sesv2 import SESV2Client
    from mypy_boto3_translate import TranslateClient

#: The services the adapters speak to; each gets its typed client below (SQS, SSM and
#: Secrets Manager untyped: the test extra's boto3-stubs leave them out).
Service = Literal["s3", "sesv2", "translate", "dynamodb", "sqs", "ssm", "secretsmanager"]


@overload
def aws_client(service: Literal["s3"], *, region: str | None, what: str,
               key: str | None = None, **config: Any) -> S3Client: ...
@overload
def aws_client(service: Literal["sesv2"], *, region: str | None, what: str,
               key: str | None = None, **config: Any) -> SESV2Client: ...
@overload
def aws_client(service: Literal["translate"], *, region: str | None, what: str,
               key: str | None = None, **config: Any) -> TranslateClient: ...
@overload
def aws_client(service: Literal["dynamodb"], *, region: str | None, what: str,
               key: str | None = None, **config: Any) -> DynamoDBClient: ...
@overload
def aws_client(service: Literal["sqs", "ssm", "secretsmanager"], *, region: str | None, what: str,
               key: str | None = None, **config: Any) -> Any: ...
def aws_client(service: Service, *, region: str | None, what: str, key: str | None = None,
               **config: Any) -> Any:
    """A ``service`` client configured with ``config`` (botocore ``Config`` arguments); no
    region anywhere is a configuration error naming ``what`` needs it."""
    import boto3
    import botocore.config
    import botocore.session
    from botocore.exceptions import NoRegionError

    session = botocore.session.get_session()
    session.register_component("data_loader", _loader())
    try:
        return boto3.session.Session(botocore_session=session, region_name=region).client(
            service, config=botocore.config.Config(**config))
    except NoRegionError as exc:
        raise ConfigError(f"{what} needs an AWS region (set AWS_DEFAULT_REGION or a "
                          "profile's region)", key=key) from exc


class _SearchPaths(list[str]):
    """The loader's folders. Each boto3 session appends its own data folder to its loader's
    list: a shared loader takes it once, not once per client ever made."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@cache
def _loader() -> Any:
    """botocore's loader of service models, shared by every session: nothing it reads depends on
    credentials or region. ``AWS_DATA_PATH`` is honoured as botocore does."""
    import botocore.loaders

    extra = os.environ.get("AWS_DATA_PATH", "")
    paths = _SearchPaths(os.path.expanduser(os.path.expandvars(p))
                         for p in extra.split(os.pathsep) if p)
    return botocore.loaders.Loader(extra_search_paths=paths)


def access_problem(exc: Exception, service: str) -> str | None:
    """The one-line reason for the failures every AWS adapter words alike (no credentials,
    the service unreachable), or None for the others, which each adapter words itself."""
    from botocore.exceptions import ConnectionError as NeverConnected
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return (f"no usable AWS credentials ({exc}); set AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY or a profile")
    if isinstance(exc, NeverConnected):
        said = " ".join(str(exc).split())
        return f"cannot reach {service} ({said[:300]})"
    return None


class Answer(NamedTuple):
    """An error answer from AWS: its code, HTTP status and message (on one line)."""

    code: str
    status: int
    message: str

    def __str__(self) -> str:
        named = self.code or str(self.status)
        return f"{named}: {self.message}" if self.message else named


def answer(exc: ClientError) -> Answer:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return Answer(str(error.get("Code", "")), int(status),
                  " ".join(str(error.get("Message", "")).split()))


_DENIED = frozenset({"AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId",
                     "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"})


def s3_client(region: str | None = None) -> S3Client:
    """An S3 client with bounded waits and botocore's standard retries."""
    return aws_client("s3", region=region, what="the s3 archive", retries={"mode": "standard"},
                      connect_timeout=10.0, read_timeout=60.0, max_pool_connections=16)


def s3_reason(exc: Exception, bucket: str, *, rights: str) -> str:
    """A botocore error in one line that says what to do (and, when access is denied, which
    ``rights`` the credentials need)."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        said = answer(exc)
        if said.code == "NoSuchBucket":
            return f"bucket {bucket} does not exist"
        if said.code in _DENIED or said.status == 403:
            return (f"access denied to bucket {bucket} ({said}); check the credentials' "
                    f"{rights} rights")
        if said.code in ("BadDigest", "InvalidDigest"):
            return "the upload was damaged in transit (Content-MD5 did not match)"
        return f"S3 {said}"
    return access_problem(exc, "S3") or f"S3: {' '.join(str(exc).split()) or type(exc).__name__}"


def is_missing_key(exc: ClientError) -> bool:
    return answer(exc).code in {"NoSuchKey", "404", "NotFound"}
