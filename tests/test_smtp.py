"""The smtp transport against a real aiosmtpd server on 127.0.0.1 (tests/support/servers.py)."""

from __future__ import annotations

import os
import smtplib
import socket
import threading
from typing import TYPE_CHECKING, Any

import pytest
from support.servers import SENDER, SUBJECT, outgoing

from pipeline.config import SmtpSettings
from pipeline.errors import (
    SendingMisconfigured,
    SendingStopped,
    TemporaryFailure,
    Unconfirmed,
)
from pipeline.transport.smtp import SmtpTransport, StartTlsRefused

if TYPE_CHECKING:
    from support.servers import Phase, SmtpSink, Tls

pytest_plugins = ["support.servers"]


@pytest.fixture
def transport(smtp_transport: SmtpTransport) -> SmtpTransport:
    return smtp_transport


def test_message_arrives_intact_and_queue_id_is_returned(smtp_server: SmtpSink,
                                                         transport: SmtpTransport) -> None:
    message = outgoing()
    assert b"\r\n.hidden" in message.raw

    queue_id = transport.send(message)

    (got,) = smtp_server.received
    assert queue_id == got.queue_id
    assert got.mail_from == SENDER
    assert got.rcpt_tos == ("reader@example.com",)
    assert got.content == message.raw
    parsed = got.message()
    assert parsed["Subject"] == SUBJECT
    assert "=?utf-8?" in got.content.decode("ascii", "replace").split("Subject:", 1)[1][:20]
    plain, html = parsed.get_body(("plain",)), parsed.get_body(("html",))
    assert plain is not None and html is not None
    assert "调度器重构" in plain.get_content()
    assert ".hidden line" in plain.get_content()
    assert 'lang="zh"' in html.get_content()


@pytest.mark.parametrize(("reply", "expected"), [
    ("250 OK", None),
    ("250 Ok 0100018c1f2e3d4c-5b6a7980-1a2b-4c3d-9e8f-0a1b2c3d4e5f-000000",
     "0100018c1f2e3d4c-5b6a7980-1a2b-4c3d-9e8f-0a1b2c3d4e5f-000000"),
    ("250 OK id=1tXyZa-000Abc-7Q", "1tXyZa-000Abc-7Q"),
])
def test_queue_id_forms(smtp_server: SmtpSink, transport: SmtpTransport, reply: str,
                        expected: str | None) -> None:
    smtp_server.accept_reply = reply
    queue_id = transport.send(outgoing())
    if expected is None:
        assert queue_id.startswith("smtp-") and len(queue_id) > 20
    else:
        assert queue_id == expected


@pytest.mark.parametrize("at", ["MAIL", "RCPT", "DATA"])
def test_throttling_is_temporary_and_the_retry_is_delivered_once(
        smtp_server: SmtpSink, transport: SmtpTransport, at: Phase) -> None:
    message = outgoing()
    smtp_server.fail_next(SENDER if at == "MAIL" else message.recipient,
                          *smtp_server.THROTTLED, at=at)

    with pytest.raises(TemporaryFailure) as caught:
        transport.send(message)
    assert "454" in str(caught.value) and "Maximum sending rate" in str(caught.value)
    assert caught.value.recipient == message.recipient
    assert isinstance(caught.value.__cause__, smtplib.SMTPException)

    transport.send(message)
    assert len(smtp_server.for_recipient(message.recipient)) == 1
    assert len(smtp_server.peers) == 1  # the connection survived the refusal


@pytest.mark.parametrize(("at", "code", "text", "error", "words"), [
    ("RCPT", 454, "4.7.0 Throttling failure: Daily message quota exceeded.", SendingStopped,
     "Daily message quota exceeded"),
    ("DATA", 554, "5.0.0 Daily message quota exceeded.", SendingStopped,
     "Daily message quota exceeded"),
    ("MAIL", 550, "5.4.5 Daily user sending quota exceeded.", SendingStopped,
     "Daily user sending quota exceeded"),
    ("MAIL", 554, "5.0.0 Account is paused.", SendingStopped, "Account is paused"),
    ("DATA", 454, "4.7.0 Sending paused for this account.", SendingStopped,
     "Sending paused for this account"),
    ("MAIL", 553, "5.7.1 <weekly@example.org>: Sender address rejected", SendingMisconfigured,
     r"MAIL refused: 553 .*check \[delivery\] from and \[smtp\] return_path"),
    ("MAIL", 552, "5.3.4 Message size exceeds fixed limit", SendingMisconfigured,
     "size_budget_kb"),
], ids=["quota-rcpt", "quota-data", "quota-mail", "paused-mail", "paused-data", "sender",
        "size"])
def test_a_refusal_about_the_account_stops_the_run(
        smtp_server: SmtpSink, transport: SmtpTransport, at: Phase, code: int, text: str,
        error: type[SendingStopped], words: str) -> None:
    """A quota or a paused account: exit 4, to resume later; a refused sender or size: exit 2,
    a configuration to fix. Either way, not a failure of every reader in turn."""
    message = outgoing()
    smtp_server.fail_next(SENDER if at == "MAIL" else message.recipient, code, text, at=at)
    with pytest.raises(SendingStopped, match=words) as caught:
        transport.send(message)
    assert type(caught.value) is error
    assert caught.value.exit_code == (2 if error is SendingMisconfigured else 4)


def test_connection_refused_stops_naming_host_and_port(unused_port: int) -> None:
    port = unused_port
    transport = SmtpTransport(SmtpSettings(host="127.0.0.1", port=port, starttls=False), None,
                              timeout=2.0)
    with pytest.raises(SendingStopped) as caught:
        transport.send(outgoing())
    text = str(caught.value)
    assert f"127.0.0.1:{port}" in text and "refused" in text.lower()
    assert "\n" not in text and caught.value.exit_code == 4  # the relay may come back
    assert not isinstance(caught.value, SendingMisconfigured)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


def test_hang_up_after_data_is_unconfirmed(smtp_server: SmtpSink,
                                           transport: SmtpTransport) -> None:
    smtp_server.drop_next("reader@example.com", at="DATA")
    with pytest.raises(Unconfirmed):
        transport.send(outgoing())
    assert smtp_server.attempts("reader@example.com") == 1


def test_lost_connection_before_data_is_reopened_once(smtp_server: SmtpSink,
                                                      transport: SmtpTransport) -> None:
    smtp_server.drop_next("reader@example.com", at="RCPT")
    transport.send(outgoing())
    assert smtp_server.attempts("reader@example.com") == 2
    assert len(smtp_server.received) == 1

    smtp_server.drop_next("twice@example.com", at="RCPT", times=2)
    with pytest.raises(TemporaryFailure, match="connection lost"):
        transport.send(outgoing("twice@example.com"))
    assert smtp_server.attempts("twice@example.com") == 2
    assert smtp_server.for_recipient("twice@example.com") == []


def test_closing_reply_before_data_reopens_once(smtp_server: SmtpSink,
                                                transport: SmtpTransport) -> None:
    smtp_server.fail_next(SENDER, 421, "4.7.0 sink.test closing connection", at="MAIL")
    transport.send(outgoing())
    assert len(smtp_server.received) == 1
    assert len(smtp_server.peers) == 2  # smtplib closed on 421; a fresh connection took it


def test_an_8bit_message_is_sent_with_body_8bitmime_a_7bit_one_without(
        smtp_server: SmtpSink, transport: SmtpTransport) -> None:
    eight, seven = outgoing(), outgoing(cte="quoted-printable")
    transport.send(eight)
    transport.send(seven)
    received = smtp_server.received
    assert "BODY=8BITMIME" in received[0].mail_options and received[0].content == eight.raw
    assert "BODY=8BITMIME" not in received[1].mail_options and received[1].content == seven.raw


def test_an_8bit_message_to_a_relay_without_8bitmime_stops_the_send_naming_the_fix(
        smtp_server_factory) -> None:
    """RFC 6152: re-encoding behind the editor's approval is not ours, so the send stops."""
    sink = smtp_server_factory(eight_bit_mime=False)
    transport = SmtpTransport(sink.settings(), None, timeout=5.0)
    try:
        transport.probe()  # not told parts may be 8bit: nothing asked of the relay
        with pytest.raises(SendingMisconfigured) as caught:
            transport.send(outgoing())
        assert caught.value.exit_code == 2 and "8BITMIME" in str(caught.value)
        assert "[delivery] eight_bit = false" in str(caught.value)
        transport.send(outgoing(cte="quoted-printable"))  # an ASCII body goes as it is
    finally:
        transport.close()
    assert len(sink.received) == 1


@pytest.mark.parametrize(("asked", "switch"), [
    ({"starttls": True}, "[smtp] starttls = false"),
    ({"tls": "starttls"}, '[smtp] tls = "none"'),
], ids=["starttls", "tls"])
def test_starttls_not_offered_is_a_config_error_naming_the_switch_set(
        smtp_server: SmtpSink, asked: dict[str, Any], switch: str) -> None:
    """Running again would not help, so ``probe`` says so as a configuration error."""
    transport = SmtpTransport(smtp_server.settings(**asked), None, timeout=5.0)
    try:
        with pytest.raises(StartTlsRefused) as caught:
            transport.probe()
        assert caught.value.exit_code == 2
        assert switch in str(caught.value)
        assert f"127.0.0.1:{smtp_server.port}" in str(caught.value)
        with pytest.raises(SendingStopped):  # in the send loop: a resumable stop
            transport.send(outgoing())
    finally:
        transport.close()
    assert smtp_server.received == []


def test_starttls_answered_454_is_a_config_error() -> None:
    """A server that lists STARTTLS but answers it "454 TLS not available"."""
    import socketserver

    class Refusing(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"220 relay.test ESMTP\r\n")
            for line in self.rfile:
                verb = line.split(b" ")[0].strip().upper()
                if verb == b"EHLO":
                    self.wfile.write(b"250-relay.test\r\n250 STARTTLS\r\n")
                elif verb == b"STARTTLS":
                    self.wfile.write(b"454 4.7.0 TLS not available due to local problem\r\n")
                elif verb == b"QUIT":
                    self.wfile.write(b"221 bye\r\n")
                    return
                else:
                    self.wfile.write(b"503 5.5.1 Bad sequence\r\n")

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Refusing) as server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.005,), daemon=True).start()
        try:
            port = server.server_address[1]
            transport = SmtpTransport(SmtpSettings(host="127.0.0.1", port=port,
                                                   starttls=True), None, timeout=5.0)
            with pytest.raises(StartTlsRefused, match=r"STARTTLS refused: 454 4\.7\.0 .*"
                               r"\[smtp\] starttls = false"):
                transport.probe()
        finally:
            server.shutdown()


def test_probe_logs_in_and_sends_nothing(smtp_server_factory, tls: Tls) -> None:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True,
                                         users={"ses-user": "s3cret"})
    good = SmtpTransport(sink.settings(starttls=True, username="ses-user"), "s3cret",
                         ssl_context=tls.client, timeout=5.0)
    good.probe()
    good.close()
    bad = SmtpTransport(sink.settings(starttls=True, username="ses-user"), "wrong",
                        ssl_context=tls.client, timeout=5.0)
    with pytest.raises(SendingStopped, match="login"):
        bad.probe()
    bad.close()
    assert sink.received == []


@pytest.mark.slow  # 200 messages from eight threads through a real SMTP sink
def test_eight_threads_two_hundred_messages_each_once(smtp_server: SmtpSink,
                                                      transport: SmtpTransport) -> None:
    recipients = [f"reader{n:03d}@example.com" for n in range(200)]
    errors: list[BaseException] = []
    ids: list[str] = []
    lock = threading.Lock()

    def work(mine: list[str]) -> None:
        for address in mine:
            try:
                queue_id = transport.send(outgoing(address))
            except Exception as exc:  # collected and asserted below
                errors.append(exc)
            else:
                with lock:
                    ids.append(queue_id)

    threads = [threading.Thread(target=work, args=(recipients[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    received = smtp_server.received
    assert sorted(r.rcpt_tos[0] for r in received) == recipients
    assert len(set(ids)) == 200 and set(ids) == {r.queue_id for r in received}
    assert len(smtp_server.peers) <= 8  # one reused connection per thread
    transport.close()
    transport.send(outgoing("after-close@example.com"))  # reopens after close()
    assert len(smtp_server.received) == 201


def _client_nodelay(peer: tuple[str, int]) -> int:
    """TCP_NODELAY of this process's socket whose local address is ``peer`` (the sink saw
    the connection come from there), read from the descriptor itself, as it is after any
    TLS wrapping."""
    for name in os.listdir("/proc/self/fd"):
        try:
            copy = os.dup(int(name))
        except OSError:
            continue  # gone meanwhile
        try:
            sock = socket.socket(fileno=copy)
        except OSError:  # not a socket (a file, a pipe): the copy is ours to close, or a
            os.close(copy)  # pipe's end stays open (Playwright's driver then never ends)
            continue
        with sock:
            try:
                if sock.family == socket.AF_INET and sock.getsockname()[:2] == peer:
                    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            except OSError:
                continue
    raise AssertionError(f"no socket of this process is {peer}")


@pytest.mark.parametrize("mode", ["none", "starttls", "implicit"])
def test_every_connection_sends_at_once_without_nagle(smtp_server_factory, tls: Tls,
                                                       mode: str) -> None:
    """Nagle would hold each message's last TLS record until the relay's delayed ACK."""
    options: dict[str, object] = {}
    if mode == "starttls":
        options.update(tls_context=tls.server, require_starttls=True)
    elif mode == "implicit":
        options.update(implicit_tls=tls.server)
    sink: SmtpSink = smtp_server_factory(**options)
    transport = SmtpTransport(sink.settings(tls=mode), None, ssl_context=tls.client,
                              timeout=5.0)
    sink.drop_next("second@example.com", at="RCPT")  # the retry opens a second connection
    try:
        transport.send(outgoing("first@example.com"))
        (first,) = sink.peers
        assert _client_nodelay(first) != 0
        transport.send(outgoing("second@example.com"))
        (second,) = sink.peers - {first}
        assert _client_nodelay(second) != 0
    finally:
        transport.close()
    assert len(sink.received) == 2
