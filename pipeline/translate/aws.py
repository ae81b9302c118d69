"""The ``aws`` translator: Amazon Translate's ``TranslateText`` through boto3.

Region, endpoint and credentials are AWS's own settings. botocore's standard retry mode handles
throttling (the call is a pure function: repeating it is harmless).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.aws import access_problem, answer, aws_client
from pipeline.errors import TranslateError
from pipeline.translate import Translator

if TYPE_CHECKING:
    from mypy_boto3_translate import TranslateClient

__all__ = ["AWS_MAX_BYTES", "AwsTranslator", "translate_client"]

#: TranslateText's limit on ``Text``, in UTF-8 bytes (Amazon Translate quotas, 2022-12 on).
AWS_MAX_BYTES = 10_000


def translate_client(region: str | None = None, *, connect_timeout: float = 10.0,
                     read_timeout: float = 60.0, max_attempts: int = 4) -> TranslateClient:
    """An Amazon Translate client on a fresh boto3 session, with botocore's standard retries."""
    return aws_client("translate", region=region, what="the aws backend",
                      key="[translate] backend",
                      retries={"total_max_attempts": max_attempts, "mode": "standard"},
                      connect_timeout=connect_timeout, read_timeout=read_timeout)


class AwsTranslator(Translator):
    """Amazon Translate's ``TranslateText`` (zh ↔ en); ``client`` lets a caller pass a client it
    built (and owns), e.g. one under botocore's ``Stubber``."""

    name = "aws"
    model = "amazon-translate"

    def __init__(self, region: str | None = None,
                 client: TranslateClient | None = None) -> None:
        self._owns_client = client is None
        self.client: TranslateClient = client if client is not None else translate_client(region)

    def translate(self, text: str, source: str, target: str) -> str:
        from botocore import exceptions as boto  # not at the top: wiring imports this module

        size = len(text.encode("utf-8"))
        if size > AWS_MAX_BYTES:
            raise TranslateError(f"the text is {size:,} bytes; TranslateText takes at most "
                                 f"{AWS_MAX_BYTES:,}", backend=self.name)
        try:
            # Amazon Translate's codes are ours: its "zh" is Simplified Chinese.
            response = self.client.translate_text(Text=text, SourceLanguageCode=source,
                                                  TargetLanguageCode=target)
        except boto.ClientError as exc:
            raise TranslateError(str(answer(exc)), backend=self.name) from exc
        except (boto.NoCredentialsError, boto.PartialCredentialsError, boto.ConnectionError,
                boto.HTTPClientError) as exc:  # no credentials, the endpoint unreachable, timeouts
            problem = access_problem(exc, "Amazon Translate")
            raise TranslateError(problem or f"cannot reach Amazon Translate: {exc}",
                                 backend=self.name) from exc
        return str(response["TranslatedText"]).strip()

    def close(self) -> None:
        """Close the client this translator built (a client passed in stays its owner's)."""
        if self._owns_client:
            self.client.close()
