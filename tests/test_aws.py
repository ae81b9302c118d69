"""``pipeline.aws.aws_client``: a fresh session per client, one loader of models for all."""

from __future__ import annotations

from typing import Any

import pytest
from support.servers import aws_environment

from pipeline import aws
from pipeline.errors import ConfigError


def access_key(client: Any) -> str:
    """The key a client signs with, from botocore's private signer (not in the stubs)."""
    key: str = client._request_signer._credentials.access_key
    return key


def test_clients_share_the_models_but_each_reads_the_credentials_anew(
        monkeypatch: pytest.MonkeyPatch) -> None:
    aws_environment(monkeypatch, "http://127.0.0.1:9")
    first = aws.aws_client("s3", region=None, what="the s3 archive")
    paths = list(aws._loader().search_paths)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated")
    second = aws.aws_client("s3", region="eu-west-1", what="the s3 archive")
    aws.aws_client("dynamodb", region=None, what="the DynamoDB store")

    # The models were read once, and boto3's folder did not join the search path again.
    assert second.meta.service_model.operation_model("PutObject") is not None
    assert aws._loader().search_paths == paths
    assert paths.count(paths[-1]) == 1
    # Credentials and region are each session's own: a rotated key is seen at once.
    assert access_key(first) == "testing"
    assert access_key(second) == "rotated"
    assert (first.meta.region_name, second.meta.region_name) == ("us-east-1", "eu-west-1")


def test_no_region_anywhere_names_what_needs_one(monkeypatch: pytest.MonkeyPatch) -> None:
    aws_environment(monkeypatch, "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigError, match="the DynamoDB store needs an AWS region"):
        aws.aws_client("dynamodb", region=None, what="the DynamoDB store")
