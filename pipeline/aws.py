"""One way to make a boto3 client, for the adapters that speak to AWS (SES, S3, Translate).

A fresh boto3 session each time: the default session caches the credentials it found first,
which a long-lived process (or a test changing the environment) should not inherit. boto3 is
imported here, lazily, and only the AWS adapters call this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from pipeline.errors import ConfigError

if TYPE_CHECKING:  # boto3-stubs (the test extra): types only, never imported at run time
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sesv2 import SESV2Client
    from mypy_boto3_translate import TranslateClient

#: The services the adapters speak to; each gets its typed client below.
Service = Literal["s3", "sesv2", "translate", "dynamodb"]


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
def aws_client(service: Service, *, region: str | None, what: str, key: str | None = None,
               **config: Any) -> S3Client | SESV2Client | TranslateClient | DynamoDBClient:
    """A ``service`` client configured with ``config`` (botocore ``Config`` arguments); no
    region anywhere is a configuration error naming ``what`` needs it."""
    import boto3
    import botocore.config
    from botocore.exceptions import NoRegionError

    try:
        return boto3.session.Session(region_name=region).client(
            service, config=botocore.config.Config(**config))
    except NoRegionError as exc:
        raise ConfigError(f"{what} needs an AWS region (set AWS_DEFAULT_REGION or a "
                          "profile's region)", key=key) from exc


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
