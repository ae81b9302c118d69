"""The smtp transport against relays as they really behave: logins refused once, TLS with a
private CA, implicit TLS, the EHLO name, the envelope sender, refusals about us rather than the
recipient, and bounces at RCPT. All against the aiosmtpd sink on 127.0.0.1."""

from __future__ import annotations

import smtplib
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.servers import SENDER, outgoing

from pipeline.config import Settings, SmtpSettings
from pipeline.errors import (
    ConfigError,
    PermanentFailure,
    SendingMisconfigured,
    TemporaryFailure,
    TransportError,
)
from pipeline.transport import Outgoing
from pipeline.transport.smtp import SmtpTransport, default_helo_name, tls_context
from pipeline.wiring import open_smtp

if TYPE_CHECKING:
    from support.servers import Phase, SmtpSink, Tls

pytest_plugins = ["support.servers"]

READER = "reader@example.com"


def settings_for(sink: SmtpSink, tmp_path: Path, *, from_: str = f"Weekly <{SENDER}>",
                 **smtp: object) -> Settings:
    """Whole settings (as wiring sees them) pointing at ``sink``; paths under ``tmp_path``."""
    from dataclasses import replace

    base = Settings(base_dir=tmp_path)
    return replace(base, smtp=sink.settings(**smtp),  # type: ignore[arg-type]
                   delivery=replace(base.delivery, transport="smtp", from_=from_))


def sending(transport: SmtpTransport, message: Outgoing) -> None:
    try:
        transport.send(message)
    finally:
        transport.close()


def four_threads_send(transport: SmtpTransport, readers: list[str]) -> list[BaseException]:
    """Four threads sending ``readers`` at once through ``transport``; what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def worker(mine: list[str]) -> None:
        start.wait()
        for reader in mine:
            try:
                transport.send(outgoing(reader))
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(readers[n::4],)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        transport.close()
    return errors


# -- logins: one mechanism, once per run ------------------------------------------------------

@pytest.fixture
def auth_sink(smtp_server_factory, tls: Tls) -> SmtpSink:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True,
                                         users={"ses-user": "s3cret"})
    return sink


def test_a_refused_login_is_tried_once_whatever_the_threads(auth_sink: SmtpSink,
                                                            tls: Tls) -> None:
    """One AUTH reaches the relay, not 4 workers × 2 mechanisms; every worker stops the same way."""
    transport = SmtpTransport(auth_sink.settings(starttls=True, username="ses-user"), "wrong",
                              ssl_context=tls.client, timeout=5.0)
    errors = four_threads_send(transport, [f"reader{n}@example.com" for n in range(4)])

    assert auth_sink.auth_attempts == [("PLAIN", "ses-user")]
    assert len(errors) == 4 and all(isinstance(e, SendingMisconfigured) for e in errors)
    # The one worker that logged in carries the relay's answer; the others its memory of it.
    assert sum(isinstance(e.__cause__, smtplib.SMTPAuthenticationError) for e in errors) == 1
    assert {str(e) for e in errors} == {
        f"smtp 127.0.0.1:{auth_sink.port}: login as 'ses-user' refused: 535 5.7.8 "
        "Authentication credentials invalid; check [smtp] username and "
        "NEWSLETTER_SMTP_PASSWORD"}
    assert all(isinstance(e, SendingMisconfigured) and e.exit_code == 2 for e in errors)
    with pytest.raises(SendingMisconfigured, match="535"):  # remembered, not asked again
        transport.probe()
    assert len(auth_sink.auth_attempts) == 1 and auth_sink.received == []


@pytest.mark.parametrize(("excluded", "mechanism"), [((), "PLAIN"), (("PLAIN",), "LOGIN")])
def test_a_good_login_uses_plain_else_login_once_per_connection(
        smtp_server_factory, tls: Tls, excluded: tuple[str, ...], mechanism: str) -> None:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True,
                                         users={"ses-user": "s3cret"}, auth_exclude=excluded)
    transport = SmtpTransport(sink.settings(starttls=True, username="ses-user"), "s3cret",
                              ssl_context=tls.client, timeout=5.0)
    transport.send(outgoing())
    transport.send(outgoing("second@example.com"))
    transport.close()
    assert sink.auth_attempts == [(mechanism, "ses-user")]
    assert len(sink.received) == 2 and len(sink.peers) == 1


def test_auth_not_offered_at_all_names_the_username_to_drop(smtp_server_factory,
                                                             tls: Tls) -> None:
    # STARTTLS, then "250-AUTH" with no mechanism (what aiosmtpd says with none left)
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, users={"ses-user": "s3cret"},
                                         auth_exclude=("PLAIN", "LOGIN"))
    transport = SmtpTransport(sink.settings(starttls=True, username="ses-user"), "s3cret",
                              ssl_context=tls.client, timeout=5.0)
    with pytest.raises(SendingMisconfigured, match=r"offers no AUTH.*check \[smtp\] host and "
                       r"port, or leave \[smtp\] username empty"):
        transport.send(outgoing())
    transport.close()
    assert sink.received == [] and sink.auth_attempts == []


def test_one_mechanism_is_picked_from_the_relays_list() -> None:
    """PLAIN, else LOGIN, else CRAM-MD5; None when smtplib speaks none of those offered."""
    from pipeline.transport.smtp import _mechanism

    assert _mechanism("XOAUTH2 CRAM-MD5") == "CRAM-MD5"
    assert _mechanism("LOGIN PLAIN CRAM-MD5") == "PLAIN"
    assert _mechanism("login") == "LOGIN"
    assert _mechanism("XOAUTH2") is None


@pytest.mark.parametrize(("password", "words"), [(None, "NEWSLETTER_SMTP_PASSWORD"),
                                                  ("pässword", "ASCII")],
                         ids=["no-password", "non-ascii"])
def test_credentials_that_cannot_log_in_are_refused_before_connecting(password: str | None,
                                                                      words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        SmtpTransport(SmtpSettings(username="ses-user"), password)


# -- refusals about us, not the recipient -----------------------------------------------------

@pytest.mark.parametrize(("sink", "smtp", "words"), [
    ({"require_starttls": True}, {"tls": "none"},
     r'530 Must issue a STARTTLS command first.*set \[smtp\] tls = "starttls"'),
    ({"users": {"ses-user": "s3cret"}, "auth_required": True}, {"starttls": True},
     r"530 5\.7\.0 Authentication required; the relay wants a login first: set \[smtp\] username"),
], ids=["starttls-first", "authentication-required"])
def test_a_530_at_mail_names_the_setting_to_fix(smtp_server_factory, tls: Tls,
                                                 sink: dict[str, Any], smtp: dict[str, Any],
                                                 words: str) -> None:
    server: SmtpSink = smtp_server_factory(tls_context=tls.server, **sink)
    transport = SmtpTransport(server.settings(**smtp), None, ssl_context=tls.client,
                              timeout=5.0)
    with pytest.raises(SendingMisconfigured, match=words) as caught:
        sending(transport, outgoing())
    assert caught.value.exit_code == 2 and server.received == []


@pytest.mark.parametrize(("code", "text", "fix"), [
    (554, "5.7.1 <{address}>: Relay access denied", "will not relay for us"),
    (550, "relay not permitted", "will not relay for us"),
    (550, "5.7.1 Unable to relay for {address}", "will not relay for us"),
    (554, "5.7.1 <unknown[127.0.0.1]>: Client host rejected: Access denied",
     "will not relay for us"),
    (553, "5.7.1 <weekly@example.org>: Sender address rejected: not owned by user",
     "check [delivery] from and [smtp] return_path"),
    (504, "5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname",
     "set [smtp] helo_name"),
], ids=["postfix-relay", "exim-relay", "exchange-relay", "client-host", "sender", "helo"])
def test_a_rcpt_refusal_about_us_stops_the_run_without_naming_the_reader(
        smtp_server: SmtpSink, smtp_transport: SmtpTransport, code: int, text: str,
        fix: str) -> None:
    """Every recipient would be refused alike: failing each for good would lose the whole list."""
    smtp_server.fail_next(READER, code, text, at="RCPT")
    with pytest.raises(SendingMisconfigured) as caught:
        smtp_transport.send(outgoing())
    message = str(caught.value)
    assert fix in message and f"RCPT refused: {code}" in message
    assert READER not in message  # shown on stderr: no subscriber's address
    assert caught.value.recipient == READER and caught.value.exit_code == 2


# -- bounces at RCPT and after the data --------------------------------------------------------

@pytest.mark.parametrize(("code", "text", "error", "bounce"), [
    (550, "5.1.1 <{address}>: Recipient address rejected: User unknown", PermanentFailure, True),
    (550, "User unknown", PermanentFailure, True),
    (550, "5.0.0 <{address}>: User unknown", PermanentFailure, True),
    (550, "5.7.1 Message rejected due to local policy", PermanentFailure, False),
    (552, "5.2.2 Mailbox full", PermanentFailure, False),
    (552, "5.2.2 <{address}>: Quota exceeded (mailbox is full)", PermanentFailure, False),
    (450, "4.1.1 <{address}>: Recipient address rejected: unverified address: User unknown",
     TemporaryFailure, False),
], ids=["5.1.1", "user-unknown-no-status", "exim-5.0.0", "policy", "mailbox-full",
        "mailbox-quota", "4xx-user-unknown"])
@pytest.mark.parametrize("at", ["RCPT", "DATA"])
def test_a_refusal_for_the_recipient_fails_that_message_a_bounce_only_when_the_mailbox_is_gone(
        smtp_server: SmtpSink, smtp_transport: SmtpTransport, at: Phase, code: int, text: str,
        error: type[TransportError], bounce: bool) -> None:
    """A 5xx is permanent, a 4xx temporary; the run goes on. The address names "throttling"
    and the text may say "quota": neither is about the account."""
    recipient = "throttling-alerts@example.com"
    smtp_server.fail_next(recipient, code, text, at=at)
    with pytest.raises(TransportError) as caught:
        smtp_transport.send(outgoing(recipient))
    assert type(caught.value) is error and caught.value.recipient == recipient
    assert f"{at} refused: {code}" in str(caught.value)
    assert getattr(caught.value, "bounce", False) is bounce
    assert isinstance(caught.value.__cause__, smtplib.SMTPRecipientsRefused if at == "RCPT"
                      else smtplib.SMTPDataError)
    smtp_transport.send(outgoing("next@example.com"))  # the run goes on
    assert [r.rcpt_tos for r in smtp_server.received] == [("next@example.com",)]


# -- TLS: implicit, a private CA, host names ---------------------------------------------------

def test_implicit_tls_with_the_test_ca_file(smtp_server_factory, tls: Tls,
                                            tmp_path: Path) -> None:
    sink: SmtpSink = smtp_server_factory(implicit_tls=tls.server)
    settings = settings_for(sink, tmp_path, tls="implicit", ca_file=str(tls.ca_file))
    transport = open_smtp(settings, {})
    assert transport.describe() == f"smtp 127.0.0.1:{sink.port} with implicit TLS"
    with transport:
        transport.probe()
        transport.send(outgoing())
        transport.send(outgoing("second@example.com"))
    assert [r.rcpt_tos[0] for r in sink.received] == [READER, "second@example.com"]
    assert len(sink.peers) == 1  # one TLS connection, reused


@pytest.mark.parametrize("mode", ["starttls", "implicit"])
def test_an_untrusted_certificate_is_a_config_error(smtp_server_factory, tls: Tls,
                                                    tmp_path: Path, mode: str) -> None:
    options = ({"tls_context": tls.server, "require_starttls": True} if mode == "starttls"
               else {"implicit_tls": tls.server})
    sink: SmtpSink = smtp_server_factory(**options)
    transport = open_smtp(settings_for(sink, tmp_path, tls=mode), {})  # system CAs only
    with pytest.raises(SendingMisconfigured) as caught:
        transport.probe()
    assert str(caught.value) == (
        f"smtp 127.0.0.1:{sink.port}: the relay's certificate is not trusted (unable to get "
        "local issuer certificate): set [smtp] ca_file to the CA that signed it")
    assert caught.value.exit_code == 2
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
    with pytest.raises(SendingMisconfigured, match="not trusted"):  # mid-run: the same
        transport.send(outgoing())
    assert sink.received == []


def test_a_certificate_for_another_host_names_the_host(smtp_server_factory, tls: Tls,
                                                       tmp_path: Path) -> None:
    sink: SmtpSink = smtp_server_factory(implicit_tls=tls.elsewhere)
    transport = open_smtp(settings_for(sink, tmp_path, tls="implicit",
                                       ca_file=str(tls.ca_file)), {})
    with pytest.raises(SendingMisconfigured, match=r"certificate is not for this host "
                       r"\(.*mismatch.*127\.0\.0\.1.*\): set \[smtp\] host"):
        transport.probe()


def test_implicit_tls_to_a_plain_port_says_which_mode(smtp_server: SmtpSink,
                                                      tmp_path: Path, tls: Tls) -> None:
    transport = open_smtp(settings_for(smtp_server, tmp_path, tls="implicit",
                                       ca_file=str(tls.ca_file)), {})
    with pytest.raises(SendingMisconfigured, match=r'does not speak TLS on connect.*'
                       r'\[smtp\] tls = "starttls"'):
        transport.probe()


def test_ssl_cert_file_still_works_without_ca_file(smtp_server_factory, tls: Tls,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True)
    with open_smtp(settings_for(sink, tmp_path, starttls=True), {}) as transport:
        transport.send(outgoing())
    assert len(sink.received) == 1


@pytest.mark.parametrize(("content", "words"), [
    (None, "no such file"),
    (b"not a certificate\n", "holds no PEM CA certificate"),
    ("dir", "no such file"),
], ids=["missing", "not-pem", "a-folder"])
def test_a_ca_file_that_cannot_serve_is_a_config_error(tmp_path: Path, content: bytes | str | None,
                                                       words: str) -> None:
    path = tmp_path / "ca.pem"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        tls_context(path)
    assert str(caught.value).startswith("config: [smtp] ca_file: ") and words in str(caught.value)
    assert caught.value.exit_code == 2


# -- who we say we are: EHLO and the envelope sender -------------------------------------------

def test_ehlo_defaults_to_the_from_domain_in_idna(smtp_server: SmtpSink, tmp_path: Path) -> None:
    settings = settings_for(smtp_server, tmp_path, from_="周报 <weekly@例子.中国>", tls="none")
    sending(open_smtp(settings, {}), outgoing())  # type: ignore[arg-type]
    assert smtp_server.helo_names == ["xn--fsqu00a.xn--fiqs8s"]


def test_ehlo_over_starttls_is_said_twice_by_the_same_name(smtp_server_factory, tls: Tls,
                                                           tmp_path: Path) -> None:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True)
    settings = settings_for(sink, tmp_path, starttls=True, ca_file=str(tls.ca_file))
    sending(open_smtp(settings, {}), outgoing())  # type: ignore[arg-type]
    assert sink.helo_names == ["example.org", "example.org"]


@pytest.mark.parametrize("from_", ["Weekly <weekly@under_score.example>", "no address"])
def test_a_from_domain_that_is_no_host_name_asks_for_helo_name(from_: str) -> None:
    with pytest.raises(ConfigError, match=r"\[smtp\] helo_name: .*set \[smtp\] helo_name"):
        default_helo_name(SmtpSettings(), from_)


def test_describe_names_each_mode() -> None:
    def described(**smtp: object) -> str:
        return SmtpTransport(SmtpSettings(host="relay.example.org", **smtp),  # type: ignore[arg-type]
                             None).describe()

    assert described(port=587) == "smtp relay.example.org:587 with STARTTLS"
    assert described(port=465, tls="implicit") == "smtp relay.example.org:465 with implicit TLS"
    assert described(port=25, tls="none") == "smtp relay.example.org:25"
    assert described(port=25, starttls=False) == "smtp relay.example.org:25"


def test_a_relay_refusing_every_greeting_is_a_temporary_failure_and_then_sends(
        smtp_server: SmtpSink, smtp_transport: SmtpTransport) -> None:
    """A busy or restarting relay's 421 fails each message for now (a limit on connections
    names its setting); once back, the next goes."""
    smtp_server.refuse_connections("421 4.7.0 sink.test Error: too many connections")
    smtp_server.refuse_connections(times=2)
    with pytest.raises(TemporaryFailure, match=r"421 .*too many connections; a relay that "
                       r"limits connections per client wants \[smtp\] max_connections"):
        smtp_transport.send(outgoing())
    for _ in range(2):
        with pytest.raises(TemporaryFailure, match=r"421 4\.3\.2"):
            smtp_transport.send(outgoing())
    smtp_transport.send(outgoing())
    assert len(smtp_server.received) == 1


def test_a_relays_reply_reaches_the_report_printable_and_short(
        smtp_server: SmtpSink, smtp_transport: SmtpTransport) -> None:
    smtp_server.fail_next(READER, 550, "5.7.1 \x1b[31mred\x1b[0m " + "x" * 2000)
    with pytest.raises(PermanentFailure) as raised:
        smtp_transport.send(outgoing())
    said = str(raised.value)
    assert "\x1b" not in said and len(said) < 400 and said.endswith("…")
