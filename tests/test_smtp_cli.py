"""``newsletter run`` against relays that refuse us for good: exit 2, one line with the fix,
nothing published or sent; and a private CA, implicit TLS, the EHLO name and the return
path working end to end. Real processes, the aiosmtpd sink on loopback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.commands import newsletter_main as newsletter
from support.commands import ok
from support.project import SAMPLE_WEEK, make_project
from support.servers import SmtpSink, Tls

SECRET = "s" * 40
HTTPS_APP = '[site]\napp_url = "https://news.example.org/api"\n'


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def project(folder: Path, sink: SmtpSink, smtp: str, delivery: str = "") -> Path:
    """A deployment sending the sample week to one reader through ``sink``."""
    make_project(folder, extra=f'{HTTPS_APP}[delivery]\ntransport = "smtp"\nconcurrency = 4\n'
                               f'{delivery}[smtp]\nhost = "{sink.host}"\n'
                               f'port = {sink.port}\n{smtp}')
    ok(newsletter(["subscribers", "add", "reader@example.org", "--confirmed"], folder))
    return folder


def run(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return newsletter(["run", "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET, **env)


def published(folder: Path) -> bool:
    site = folder / "build" / "site"
    return site.exists() and any(p.is_file() for p in site.rglob("*"))


def refused(folder: Path, sink: SmtpSink, **env: str) -> str:
    """``run`` ends with exit 2 and one line (returned), nothing published or sent."""
    result = run(folder, **env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert not published(folder) and sink.received == []
    return one_line(result)


@pytest.mark.subprocess  # publishing runs Pagefind
def test_a_private_ca_without_ca_file_is_exit_2_and_with_it_the_issue_goes_out(
        tmp_path: Path, smtp_server_factory, tls: Tls) -> None:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True)
    folder = project(tmp_path, sink, 'tls = "starttls"\n')

    line = refused(folder, sink)
    assert "certificate is not trusted" in line and "set [smtp] ca_file" in line

    (folder / "relay-ca.pem").write_bytes(tls.ca_pem)  # relative to the config's folder
    with (folder / "newsletter.toml").open("a", encoding="utf-8") as config:
        config.write('ca_file = "relay-ca.pem"\n')
    ok(run(folder))
    (got,) = sink.received
    assert got.rcpt_tos == ("reader@example.org",)
    assert set(sink.helo_names) == {"example.org"}  # the From domain, never [127.0.0.1]


@pytest.mark.subprocess  # publishing runs Pagefind
def test_implicit_tls_helo_name_and_return_path_end_to_end(tmp_path: Path,
                                                           smtp_server_factory,
                                                           tls: Tls) -> None:
    sink: SmtpSink = smtp_server_factory(implicit_tls=tls.server)
    folder = project(tmp_path, sink, f'tls = "implicit"\nca_file = "{tls.ca_file}"\n'
                     'helo_name = "mail.example.org"\n'
                     'return_path = "bounces@example.org"\n')
    ok(run(folder))
    (got,) = sink.received
    assert got.mail_from == "bounces@example.org"
    assert got.message()["From"].addresses[0].addr_spec == "weekly@example.org"
    assert set(sink.helo_names) == {"mail.example.org"}


def test_a_refused_login_is_exit_2_after_one_attempt(tmp_path: Path, smtp_server_factory,
                                                     tls: Tls) -> None:
    sink: SmtpSink = smtp_server_factory(tls_context=tls.server, require_starttls=True,
                                         users={"weekly": "right"})
    folder = project(tmp_path, sink, f'username = "weekly"\nca_file = "{tls.ca_file}"\n')
    line = refused(folder, sink, NEWSLETTER_SMTP_PASSWORD="wrong-password")
    assert "login as 'weekly' refused: 535 5.7.8" in line  # stderr is this line alone
    assert "NEWSLETTER_SMTP_PASSWORD" in line and "wrong-password" not in line
    assert sink.auth_attempts == [("PLAIN", "weekly")]  # concurrency 4, one login


def test_auth_not_offered_is_exit_2_with_the_hint(tmp_path: Path, smtp_server_factory) -> None:
    sink: SmtpSink = smtp_server_factory(users={"weekly": "right"})  # AUTH only inside TLS
    folder = project(tmp_path, sink, 'tls = "none"\nusername = "weekly"\n')
    line = refused(folder, sink, NEWSLETTER_SMTP_PASSWORD="right")
    assert "offers no AUTH" in line and "'weekly'" in line
    assert '[smtp] tls = "starttls"' in line and "leave [smtp] username empty" in line
    assert sink.auth_attempts == []


@pytest.mark.parametrize(("smtp", "words"), [
    ('ca_file = "missing-ca.pem"\n', "[smtp] ca_file: no such file"),
    ('tls = "sometimes"\n', "[smtp] tls: expected"),
    ('helo_name = "my relay"\n', "[smtp] helo_name"),
], ids=["missing-ca-file", "bad-tls", "bad-helo-name"])
def test_bad_smtp_settings_stop_before_anything_is_published(tmp_path: Path,
                                                             smtp_server: SmtpSink, smtp: str,
                                                             words: str) -> None:
    folder = project(tmp_path, smtp_server, "")
    with (folder / "newsletter.toml").open("a", encoding="utf-8") as config:
        config.write(smtp)  # once the reader is in: a config that does not load adds no one
    assert words in refused(folder, smtp_server)


@pytest.mark.subprocess  # publishing runs Pagefind
def test_a_relay_without_8bitmime_stops_an_8bit_issue_before_publishing(
        tmp_path: Path, smtp_server_factory) -> None:
    """Known at the probe, before publishing; ``eight_bit = false`` and a build send it encoded."""
    sink: SmtpSink = smtp_server_factory(eight_bit_mime=False)  # strict ASCII, as it says
    folder = project(tmp_path, sink, 'tls = "none"\n')
    line = refused(folder, sink)
    assert "8BITMIME" in line and "[delivery] eight_bit = false" in line
    config = folder / "newsletter.toml"
    config.write_text(config.read_text().replace(
        "[delivery]\n", "[delivery]\neight_bit = false\n"), encoding="utf-8")
    ok(run(folder))
    (received,) = sink.received
    assert b"Content-Transfer-Encoding: 8bit" not in received.content
    assert "BODY=8BITMIME" not in received.mail_options and published(folder)
