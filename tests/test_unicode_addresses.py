"""Addresses beyond ASCII (RFC 6531/6532) through every transport, as a mail server sees them.

The domain always goes in IDNA form; a non-ASCII local part goes only to a server offering
SMTPUTF8, and is refused for that recipient alone by one that does not and by SES. No address in
``To`` or ``From`` holds an RFC 2047 encoded word.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.project import SAMPLE_WEEK, sample_settings

from pipeline.config import Settings, load
from pipeline.core.email.message import Messages
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from pipeline.stages.optin_mail import OptInMailer
from pipeline.stages.send import Sender, SendOptions
from pipeline.stages.send_report import SendReport
from pipeline.transport import Transport
from pipeline.transport.ses import SesTransport
from pipeline.transport.smtp import SmtpTransport
from subscribers.model import Subscriber
from subscribers.store.sqlite import SqliteStore
from subscribers.tokens import Keys

if TYPE_CHECKING:
    from support.servers import MotoServer, Received, SmtpSink

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "unicode-address-test-secret-0123456789"})
LOCAL = "用户@example.com"            # a non-ASCII local part: SMTPUTF8 only
DOMAIN = "reader@例子.中国"           # an ASCII local part at an internationalised domain
DOMAIN_IDNA = "reader@xn--fsqu00a.xn--fiqs8s"
PLAIN = "plain@example.com"


@pytest.fixture
def app_built(tmp_path: Path) -> BuiltIssue:
    """The sample week built with an app URL, whose settings the sends here read back."""
    settings = sample_settings(tmp_path, extra='[site]\napp_url = "https://news.example.org/app"\n')
    return load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "issue").out_dir)


@pytest.fixture
def store(tmp_path: Path):
    opened = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    for address in (LOCAL, DOMAIN, PLAIN):
        added = opened.add(address, "en", status="active", source="test", now=NOW)
        assert added.subscriber is not None
    yield opened
    opened.close()


def reader(store: SqliteStore, address: str) -> Subscriber:
    """The reader at ``address``, one of the three the ``store`` fixture adds."""
    found = store.find(address)
    assert found is not None, address
    return found


def send(app_built: BuiltIssue, store: SqliteStore, transport: Transport) -> SendReport:
    """The issue sent to the store's readers through ``transport``, closed after."""
    settings = load(app_built.folder.parent / "newsletter.toml", {})
    messages = Messages(app_built, settings.site, settings.delivery, KEYS)
    try:
        return Sender(app_built, store, transport, messages, rate=None, concurrency=2,
                      sleep=lambda _: None).run(SendOptions())
    finally:
        transport.close()


def confirm(settings: Settings, transport: Transport, *readers: Subscriber) -> None:
    """The subscription app's confirmation mail to each reader, ``transport`` closed after."""
    try:
        for each in readers:
            OptInMailer(settings, transport).confirmation(
                each, "https://news.example.org/app/confirm?token=t", NOW)
    finally:
        transport.close()


def header_line(raw: bytes, name: bytes) -> bytes:
    """The raw header ``name`` of a message, unfolded."""
    head = raw.split(b"\r\n\r\n", 1)[0].replace(b"\r\n ", b" ")
    (line,) = [line for line in head.split(b"\r\n") if line.lower().startswith(name + b":")]
    return line


def to_line(raw: bytes) -> bytes:
    return header_line(raw, b"to")


def by_recipient(received: list[Received]) -> dict[str, Received]:
    found = {}
    for record in received:
        (rcpt,) = record.rcpt_tos
        found[rcpt] = record
    return found


def test_smtputf8_carries_a_non_ascii_local_part_and_idna_carries_the_domain(
        smtp_server_factory: Callable[..., SmtpSink], app_built: BuiltIssue,
        store: SqliteStore) -> None:
    sink = smtp_server_factory(smtputf8=True)
    report = send(app_built, store, SmtpTransport(sink.settings(), None, timeout=10.0))
    assert (report.sent, report.failed, report.unconfirmed) == (3, 0, 0)
    got = by_recipient(sink.wait_for(3))
    assert set(got) == {LOCAL, DOMAIN_IDNA, PLAIN}
    assert "SMTPUTF8" in got[LOCAL].mail_options  # asked for only where it is needed
    assert "SMTPUTF8" not in got[DOMAIN_IDNA].mail_options
    assert "SMTPUTF8" not in got[PLAIN].mail_options
    assert to_line(got[LOCAL].content) == "To: 用户@example.com".encode()
    assert to_line(got[DOMAIN_IDNA].content) == f"To: {DOMAIN_IDNA}".encode()
    for record in got.values():
        assert b"=?" not in to_line(record.content)  # no encoded word in an address

    # The subscription app's confirmation mail leaves the same way (the app answered 500).
    sink = smtp_server_factory(smtputf8=True)
    confirm(load(app_built.folder.parent / "newsletter.toml", {}),
            SmtpTransport(sink.settings(), None, timeout=10.0),
            reader(store, LOCAL), reader(store, DOMAIN))
    confirmations = by_recipient(sink.wait_for(2))
    assert to_line(confirmations[LOCAL].content) == "To: 用户@example.com".encode()
    assert to_line(confirmations[DOMAIN_IDNA].content) == f"To: {DOMAIN_IDNA}".encode()
    assert "SMTPUTF8" in confirmations[LOCAL].mail_options


def test_without_smtputf8_only_the_non_ascii_local_part_fails_permanently_by_name(
        smtp_server: SmtpSink, app_built: BuiltIssue, store: SqliteStore) -> None:
    report = send(app_built, store, SmtpTransport(smtp_server.settings(), None, timeout=10.0))
    assert (report.sent, report.failed, report.unconfirmed, report.stopped) == (2, 1, 0, None)
    assert set(by_recipient(smtp_server.wait_for(2))) == {DOMAIN_IDNA, PLAIN}
    assert smtp_server.attempts(LOCAL) == 0  # refused before anything was sent
    local_id = reader(store, LOCAL).id
    entry = store.ledger_entry(SAMPLE_WEEK, local_id)
    assert entry is not None and entry.reason is not None
    assert entry.status == "failed" and entry.permanent
    assert LOCAL in entry.reason and "SMTPUTF8" in entry.reason
    # The report holds ids only: the address is named in the ledger, not in the report.
    assert report.failures == [{"subscriber": local_id, "reason": entry.reason
                                .replace(LOCAL, "<recipient>"), "permanent": True,
                                "bounced": False}]


def test_ses_gets_the_idna_domain_and_never_a_non_ascii_local_part(
        moto_server: MotoServer, app_built: BuiltIssue, store: SqliteStore) -> None:
    report = send(app_built, store, SesTransport(""))
    assert (report.sent, report.failed, report.unconfirmed) == (2, 1, 0)
    sent = moto_server.sent()
    assert sorted(r["destinations"][0] for r in sent) == sorted([DOMAIN_IDNA, PLAIN])
    for record in sent:
        assert b"=?" not in to_line(str(record["raw_data"]).encode("utf-8"))
    entry = store.ledger_entry(SAMPLE_WEEK, reader(store, LOCAL).id)
    assert entry is not None and entry.reason is not None
    assert entry.status == "failed" and entry.permanent and LOCAL in entry.reason


def test_messages_write_the_to_header_without_encoded_words(app_built: BuiltIssue) -> None:
    settings = load(app_built.folder.parent / "newsletter.toml", {})
    messages = Messages(app_built, settings.site, settings.delivery, KEYS)
    cases = {LOCAL: "To: 用户@example.com".encode(), DOMAIN: f"To: {DOMAIN_IDNA}".encode(),
             "josé@bücher.de": "To: josé@xn--bcher-kva.de".encode(),
             PLAIN: f"To: {PLAIN}".encode()}
    for address, expected in cases.items():
        raw = messages.build(address, "0" * 24, "en", NOW).raw
        assert to_line(raw) == expected


def test_a_sender_at_an_internationalised_domain_is_written_in_idna(
        app_built: BuiltIssue, store: SqliteStore,
        smtp_server_factory: Callable[..., SmtpSink]) -> None:
    """IDNA in From, Reply-To, the envelope and Message-ID; only the display name is encoded."""
    from email.header import decode_header, make_header

    settings = load(app_built.folder.parent / "newsletter.toml", {
        "NEWSLETTER_DELIVERY_FROM": "vLLM 周报 <weekly@例子.中国>",
        "NEWSLETTER_DELIVERY_REPLY_TO": "editor@例子.中国"})
    messages = Messages(app_built, settings.site, settings.delivery, KEYS)
    outgoing = messages.build(PLAIN, "0" * 24, "en", NOW)
    sender = header_line(outgoing.raw, b"from")
    assert sender.endswith(b" <weekly@xn--fsqu00a.xn--fiqs8s>"), sender
    assert str(make_header(decode_header(sender[len(b"From: "):].decode()))) == \
        "vLLM 周报 <weekly@xn--fsqu00a.xn--fiqs8s>"
    assert header_line(outgoing.raw, b"reply-to") == b"Reply-To: editor@xn--fsqu00a.xn--fiqs8s"
    assert header_line(outgoing.raw, b"message-id").endswith(b"@xn--fsqu00a.xn--fiqs8s>")
    assert outgoing.sender == "weekly@xn--fsqu00a.xn--fiqs8s"
    assert outgoing.raw.split(b"\r\n\r\n", 1)[0].isascii()

    # The confirmation mail of the subscription app, through a relay without SMTPUTF8.
    sink = smtp_server_factory()
    confirm(settings, SmtpTransport(sink.settings(), None, timeout=10.0), reader(store, PLAIN))
    (got,) = sink.wait_for(1)
    assert got.mail_from == "weekly@xn--fsqu00a.xn--fiqs8s"
    assert header_line(got.content, b"from").endswith(b" <weekly@xn--fsqu00a.xn--fiqs8s>")


@pytest.mark.parametrize("value", ["周报 <用户@example.com>", "weekly@例子..中国"])
def test_a_sender_the_wire_cannot_carry_is_a_config_error(app_built: BuiltIssue,
                                                          value: str) -> None:
    from pipeline.errors import ConfigError

    settings = load(app_built.folder.parent / "newsletter.toml",
                    {"NEWSLETTER_DELIVERY_FROM": value})
    with pytest.raises(ConfigError) as caught:
        Messages(app_built, settings.site, settings.delivery, KEYS)
    assert caught.value.exit_code == 2 and "[delivery] from" in str(caught.value)
    assert "\n" not in str(caught.value)
