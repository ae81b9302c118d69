"""``[smtp]`` settings checked at load: ``tls``, the port of implicit TLS, ``helo_name``,
``return_path``, ``ca_file`` and the login, each a one-line ConfigError naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import SmtpSettings, load
from pipeline.errors import ConfigError


def loaded(tmp_path: Path, smtp: str, env: dict[str, str] | None = None) -> SmtpSettings:
    path = tmp_path / "newsletter.toml"
    path.write_text(f"[smtp]\n{smtp}", encoding="utf-8")
    return load(path, env or {}).smtp


@pytest.mark.parametrize(("smtp", "mode"), [
    ("", "starttls"),                                   # the embedded default
    ("starttls = false\n", "none"),                     # the older switch keeps working
    ('tls = "implicit"\nport = 465\n', "implicit"),
    ('tls = "none"\n', "none"),                         # tls, when set, decides
    ('tls = "starttls"\nstarttls = false\n', "starttls"),
])
def test_tls_mode_follows_tls_else_starttls(tmp_path: Path, smtp: str, mode: str) -> None:
    assert loaded(tmp_path, smtp).tls_mode == mode


@pytest.mark.parametrize(("smtp", "env", "words"), [
    ('tls = "ssl"\n', {}, '[smtp] tls: expected "starttls" (port 587), "implicit" (port 465) '
     'or "none", got \'ssl\''),
    ("", {"NEWSLETTER_SMTP_TLS": "STARTTLS"}, "NEWSLETTER_SMTP_TLS ([smtp] tls): expected"),
    ("port = 465\n", {}, '[smtp] tls: port 465 speaks TLS from the first byte: set [smtp] '
     'tls = "implicit"'),
    ('port = 465\ntls = "none"\n', {}, "port 465 speaks TLS from the first byte"),
    ('helo_name = "mail example.org"\n', {}, "[smtp] helo_name: expected the host name"),
    ('helo_name = "mail_relay.example.org"\n', {}, "[smtp] helo_name"),
    ("", {"NEWSLETTER_SMTP_HELO_NAME": "mail.example.org\n"}, "[smtp] helo_name"),
    ("", {"NEWSLETTER_SMTP_HOST": "relay.example.org\n"}, "[smtp] host"),
    ('helo_name = "mail.example.org\\r\\nMAIL FROM:<x@evil.example>"\n', {},
     "[smtp] helo_name"),
    ('helo_name = "例子.中国"\n', {}, "IDNA-encode"),
    ('return_path = "Bounces <bounces@example.org>"\n', {},
     "[smtp] return_path: expected a bare address"),
    ('return_path = "bounces@example.org\\r\\nRCPT TO:<x@evil.example>"\n', {},
     "[smtp] return_path"),
    ('return_path = "bounces"\n', {}, "[smtp] return_path: expected an address"),
    ('username = "weekly\\r\\nAUTH"\n', {}, "[smtp] username: expected a login without"),
    ('tls = "none"\nca_file = "ca.pem"\n', {}, '[smtp] ca_file: is set but [smtp] tls is '
     '"none"'),
])
def test_bad_smtp_values_are_one_line_config_errors(tmp_path: Path, smtp: str,
                                                    env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, smtp, env)
    message = str(caught.value)
    assert words in message, message
    assert "\n" not in message and "\r" not in message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("smtp", [
    'helo_name = "mail.example.org"\n',
    'helo_name = "[192.0.2.25]"\n',
    'return_path = "bounces@example.org"\n',
    'return_path = "bounces@例子.中国"\n',
    'tls = "implicit"\nport = 465\nca_file = "does-not-exist-yet.pem"\n',  # checked by a send
])
def test_good_smtp_values_load(tmp_path: Path, smtp: str) -> None:
    loaded(tmp_path, smtp)
