"""The ses transport: boto3 over HTTP to a moto server on 127.0.0.1 (tests/support/servers.py).

What moto cannot do (GetAccount, throttling, quotas, a paused account) is injected on the wire
through botocore's ``before-send`` hook, shaped as AWS answers it.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config
import botocore.retries.standard
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from support.servers import SENDER, SUBJECT, outgoing

from pipeline.errors import (
    PermanentFailure,
    SendingStopped,
    TemporaryFailure,
    TransportError,
    Unconfirmed,
)
from pipeline.transport.ses import SesTransport, email_tags, ses_client

if TYPE_CHECKING:
    from support.servers import MotoServer

pytest_plugins = ["support.servers"]

CONFIGURATION_SET = "weekly-newsletter"
RECIPIENT = "throttling-alerts@example.com"


@pytest.fixture
def transport(moto_server: MotoServer):
    moto_server.client().create_configuration_set(ConfigurationSetName=CONFIGURATION_SET)
    t = SesTransport(CONFIGURATION_SET)
    yield t
    t.close()


def error(code: str, message: str, status: int | None = None) -> dict[str, Any]:
    """An error answer as boto3 reports it (``ClientError.response``)."""
    answer: dict[str, Any] = {"Error": {"Code": code, "Message": message}}
    if status is not None:
        answer["ResponseMetadata"] = {"HTTPStatusCode": status}
    return answer


def test_send_returns_the_message_id_and_moto_keeps_the_message(
        moto_server: MotoServer, transport: SesTransport) -> None:
    wire = moto_server.inject(transport.client)  # no answers: only records the requests
    message = outgoing()

    message_id = transport.send(message)

    (kept,) = moto_server.sent()
    assert kept["id"] == message_id
    assert kept["source"] == SENDER
    assert message.recipient in kept["destinations"]
    assert kept["raw_data"].encode("utf-8") == message.raw
    parsed = moto_server.parse(kept)
    assert parsed["Subject"] == SUBJECT
    plain = parsed.get_body(("plain",))
    assert plain is not None and "调度器重构" in plain.get_content()
    # moto keeps neither tags nor the configuration set: check what went on the wire.
    ((operation, body),) = wire.requests
    assert operation == "SendEmail"
    assert body["ConfigurationSetName"] == CONFIGURATION_SET
    assert body["EmailTags"] == [{"Name": "issue", "Value": "2026-W48"}]
    assert body["Destination"] == {"ToAddresses": [message.recipient]}
    assert body["FromEmailAddress"] == SENDER
    assert base64.b64decode(body["Content"]["Raw"]["Data"]) == message.raw


def test_without_configuration_set_or_tags_nothing_is_sent_for_them(
        moto_server: MotoServer) -> None:
    transport = SesTransport("")
    wire = moto_server.inject(transport.client)
    transport.send(outgoing(tags={}))
    ((_, body),) = wire.requests
    assert "ConfigurationSetName" not in body and "EmailTags" not in body
    transport.close()


def test_tags_are_reduced_to_what_ses_accepts() -> None:
    assert email_tags({"issue": "2026-W48", "lay out": "zh-en/β", "x": ""}) == [
        {"Name": "issue", "Value": "2026-W48"},
        {"Name": "lay_out", "Value": "zh-en__"},
        {"Name": "x", "Value": "_"},
    ]
    assert len(email_tags({"k": "v" * 300})[0]["Value"]) == 256


def test_botocore_retries_are_off(moto_server: MotoServer, transport: SesTransport) -> None:
    config: Any = transport.client.meta.config  # botocore-stubs leave out its option attributes
    assert config.retries["total_max_attempts"] == 1
    throttled = error("TooManyRequestsException", "Maximum sending rate exceeded.")
    wire = moto_server.inject(transport.client, {"SendEmail": [throttled, throttled]})

    for attempt in (1, 2):
        with pytest.raises(TemporaryFailure) as caught:
            transport.send(outgoing())
        assert wire.calls["SendEmail"] == attempt  # one HTTP attempt per send, no retry
        cause = caught.value.__cause__  # the HTTP status the service model gives the code
        assert isinstance(cause, ClientError)
        assert cause.response["ResponseMetadata"]["HTTPStatusCode"] == 429

    transport.send(outgoing())
    assert wire.calls["SendEmail"] == 3
    assert len(moto_server.sent()) == 1


def test_the_hook_counts_real_attempts_when_retries_are_on(moto_server: MotoServer,
                                                          monkeypatch) -> None:
    """The contrast that gives the test above its meaning: botocore's own retry is seen."""
    # Without the pause botocore takes before it (up to 1 s after a throttle): the attempts
    # are what is counted, not the wait between them.
    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount",
                        lambda self, context: 0.0)
    config = botocore.config.Config(retries={"total_max_attempts": 2, "mode": "standard"})
    client = boto3.session.Session().client("sesv2", config=config)
    wire = moto_server.inject(client, {"SendEmail": [
        error("TooManyRequestsException", "Maximum sending rate exceeded.")]})
    SesTransport("", client=client).send(outgoing())
    assert wire.calls["SendEmail"] == 2
    assert len(moto_server.sent()) == 1


@pytest.mark.parametrize(("answer", "expected"), [
    (error("TooManyRequestsException", "Maximum sending rate exceeded."), TemporaryFailure),
    (error("Throttling", "Maximum sending rate exceeded."), TemporaryFailure),
    (error("InternalFailure", "An internal error occurred.", 500), TemporaryFailure),
    (error("TooManyRequestsException", "Daily message quota exceeded."), SendingStopped),
    (error("LimitExceededException", "Daily message quota exceeded."), SendingStopped),
    (error("SendingPausedException", "Sending is paused for this account."), SendingStopped),
    (error("AccountSuspendedException",
           "Your account has been shut down because of issues related to your email "
           "sending practices."), SendingStopped),
    (error("MailFromDomainNotVerifiedException",
           "The MAIL FROM domain mail.example.org is not verified."), SendingStopped),
    (error("NotFoundException", "Configuration set <weekly-newsletter> does not exist."),
     SendingStopped),
    (error("MessageRejected", "Email address is not verified. The following identities "
           f"failed the check in region US-EAST-1: {RECIPIENT}"), PermanentFailure),
    (error("BadRequestException", "Illegal address"), PermanentFailure),
], ids=lambda v: v["Error"]["Code"] + ":" + v["Error"]["Message"][:20]
    if isinstance(v, dict) else v.__name__)
def test_error_mapping(moto_server: MotoServer, transport: SesTransport,
                       answer: dict[str, Any], expected: type[TransportError]) -> None:
    """The recipient's address names "throttling": it is no word about the account."""
    wire = moto_server.inject(transport.client, {"SendEmail": [answer]})
    with pytest.raises(TransportError) as caught:
        transport.send(outgoing(RECIPIENT))
    assert type(caught.value) is expected
    assert caught.value.recipient == RECIPIENT
    cause = caught.value.__cause__
    assert isinstance(cause, ClientError)
    # botocore's own parser read the injected answer exactly as it reads AWS's.
    assert cause.response["Error"]["Code"] == answer["Error"]["Code"]
    assert cause.response["Error"]["Message"] == answer["Error"]["Message"]
    assert answer["Error"]["Code"] in str(caught.value)
    assert "\n" not in str(caught.value)
    assert wire.calls["SendEmail"] == 1
    assert moto_server.sent() == []


def test_no_rate_is_known_when_get_account_fails(moto_server: MotoServer,
                                                 transport: SesTransport) -> None:
    wire = moto_server.inject(transport.client)  # moto answers GetAccount with a 404
    assert transport.probe() is None
    assert wire.calls["GetAccount"] == 1


def test_no_answer_after_the_request_is_unconfirmed(moto_server: MotoServer,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    silent_server: tuple[str, int]) -> None:
    host, port = silent_server
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    transport = SesTransport("", client=ses_client(read_timeout=0.5))
    started = time.monotonic()
    with pytest.raises(Unconfirmed) as caught:
        transport.send(outgoing())
    assert time.monotonic() - started < 3  # one attempt, no retry
    assert isinstance(caught.value.__cause__, ReadTimeoutError)
    assert "may have accepted" in str(caught.value)


def test_unreachable_endpoint_is_temporary(moto_server: MotoServer,
                                           monkeypatch: pytest.MonkeyPatch,
                                           unused_port: int) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{unused_port}")
    transport = SesTransport("")
    with pytest.raises(TemporaryFailure) as caught:
        transport.send(outgoing())
    assert isinstance(caught.value.__cause__, EndpointConnectionError)


def test_missing_credentials_stop_the_run(moto_server: MotoServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    transport = SesTransport("")
    with pytest.raises(SendingStopped, match="no usable AWS credentials"):
        transport.send(outgoing())
    assert moto_server.sent() == []


def test_close_leaves_a_borrowed_client_open(moto_server: MotoServer) -> None:
    client = ses_client()
    SesTransport("", client=client).close()
    assert client.send_email(FromEmailAddress=SENDER,
                             Destination={"ToAddresses": ["a@example.com"]},
                             Content={"Raw": {"Data": outgoing().raw}})["MessageId"]
