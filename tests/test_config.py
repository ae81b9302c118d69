"""Settings: the file, NEWSLETTER_<SECTION>_<KEY> overrides, validation, secrets; each bad
value a one-line ConfigError naming its key."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from support.project import ROOT

from pipeline.config import Settings, load
from pipeline.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "newsletter.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_embedded_default_loads_and_names_every_design_key():
    settings = load(ROOT / "newsletter.toml", {})
    assert settings.feed.urls == ("examples/sample-feed.atom",)
    assert settings.issue.timezone == "Asia/Shanghai"
    assert settings.issue.size_budget_kb == 90
    assert settings.issue.require_approval is False
    assert settings.delivery.transport == "outbox"
    assert settings.archive.target == "local"
    text = (ROOT / "newsletter.toml").read_text(encoding="utf-8")
    design_keys = {
        "feed": ["urls", "repo"], "issue": ["timezone", "size_budget_kb", "require_approval"],
        "paths": ["build_dir", "data_dir", "editorial_dir"], "site": ["base_url", "app_url"],
        "delivery": ["transport", "from", "reply_to", "max_rate", "concurrency",
                     "unsubscribe_mailto"],
        "smtp": ["host", "port", "starttls", "username"], "ses": ["configuration_set"],
        "archive": ["target", "dir", "bucket", "prefix"],
        "translate": ["backend", "base_url", "model"], "github": ["enabled", "api_url"],
    }
    for section, keys in design_keys.items():
        assert f"[{section}]" in text
        for key in keys:
            assert f"\n{key} = " in text, (section, key)


def test_the_operations_guide_lists_exactly_the_declared_keys():
    """The fields declare the keys; docs/operations.md's table is the one copy, kept whole."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `\[(\w+)\]` \| (.*) \|$", text, re.M))
    assert table.keys() == {f.name for f in fields(Settings)} - {"base_dir", "source"}
    declared = {name: {f.name.rstrip("_") for f in fields(getattr(Settings(), name))}
                for name in table}
    assert {name: set(re.findall(r"(?:^|, )`(\w+)`", keys)) for name, keys in table.items()
            } == declared


def test_relative_paths_resolve_against_the_config_folder(tmp_path):
    settings = load(write(tmp_path, '[paths]\nbuild_dir = "out"\n'), {}, cwd=Path("/"))
    assert settings.resolve(settings.paths.build_dir) == tmp_path / "out"
    assert settings.feed_location("feeds/a.xml") == str(tmp_path / "feeds" / "a.xml")
    assert settings.feed_location("https://x.example/f") == "https://x.example/f"


@pytest.mark.parametrize(
    ("env", "check"),
    [
        ({"NEWSLETTER_ISSUE_TIMEZONE": "UTC"}, lambda s: s.issue.timezone == "UTC"),
        ({"NEWSLETTER_ISSUE_SIZE_BUDGET_KB": "60"}, lambda s: s.issue.size_budget_kb == 60),
        ({"NEWSLETTER_ISSUE_REQUIRE_APPROVAL": "yes"}, lambda s: s.issue.require_approval),
        ({"NEWSLETTER_FEED_URLS": "a.xml, https://b.example/f"},
         lambda s: s.feed.urls == ("a.xml", "https://b.example/f")),
        ({"NEWSLETTER_DELIVERY_FROM": "X <x@example.org>"},
         lambda s: s.delivery.from_ == "X <x@example.org>"),
        ({"NEWSLETTER_DELIVERY_MAX_RATE": "12.5"}, lambda s: s.delivery.max_rate == 12.5),
        ({"NEWSLETTER_SITE_BASE_URL": "https://news.example"},
         lambda s: s.site.base_url == "https://news.example"),
        ({"NEWSLETTER_SECRET": "s3cret-" * 5, "NEWSLETTER_SMTP_PASSWORD": "p"},
         lambda s: s.smtp.username == ""),
    ],
)
def test_environment_overrides_the_file(tmp_path, env, check):
    settings = load(write(tmp_path, '[issue]\ntimezone = "Asia/Shanghai"\n'), env)
    assert check(settings)


SECRET_32 = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[feed]\nurl = []\n", {}, "[feed] url: unknown key"),
        ("[colour]\nx = 1\n", {}, "unknown section"),
        ("[issue]\ntimezone = \"Mars/Olympus\"\n", {}, "unknown timezone"),
        ("[issue]\nsize_budget_kb = 120\n", {}, "between 1 and 100"),
        ("[issue]\nsize_budget_kb = \"90\"\n", {}, "whole number"),
        ("[issue]\nrequire_approval = \"no\"\n", {}, "true or false"),
        ("[feed]\nrepo = \"vllm\"\n", {}, "owner/name"),
        ("[site]\nbase_url = \"ftp://x\"\n", {}, "http(s) URL"),
        ("[delivery]\ntransport = \"pigeon\"\n", {}, "outbox, smtp, ses"),
        ("[smtp]\npassword = \"hunter2\"\n", {}, "NEWSLETTER_SMTP_PASSWORD"),
        ("[github]\ntoken = \"hunter2\"\n", {}, "GITHUB_TOKEN"),
        ("[feed\n", {}, "not valid TOML"),
        ("", {"NEWSLETTER_ISSUE_TIMEZON": "UTC"}, "NEWSLETTER_ISSUE_TIMEZON"),
        ("", {"NEWSLETTER_ISSUE_SIZE_BUDGET_KB": "ninety"}, "NEWSLETTER_ISSUE_SIZE_BUDGET_KB"),
        ("", {"NEWSLETTER_SMTP_MAX_CONNECTIONS": "x"}, "expected a whole number (got 'x')"),
        ("", {"NEWSLETTER_DELIVERY_MAX_RATE": "fast"}, "expected a number (got 'fast')"),
        ("", {"NEWSLETTER_ISSUE_REQUIRE_APPROVAL": "maybe"}, "true or false"),
        ("[issue]\nfirst_week = \"2026-W54\"\n", {}, "2026 has no ISO week 54"),
        ("", {"NEWSLETTER_ISSUE_FIRST_WEEK": "week 1"}, "expected an ISO week"),
        # URLs are checked whole, not by their prefix.
        ('[site]\napp_url = "https://example.org/api\\nBcc: x@evil.example"\n', {},
         "[site] app_url: expected a URL without whitespace or control characters"),
        ('[site]\nbase_url = "https://example.org /weekly"\n', {},
         "[site] base_url: expected a URL without whitespace"),
        ('[site]\nbase_url = "https://example.org\\t"\n', {}, "without whitespace"),
        ('[site]\nbase_url = "https://example.org\\u2028"\n', {}, "without whitespace"),
        ("", {"NEWSLETTER_SITE_APP_URL": "https://example.org/api\r\nX-Evil: 1"},
         "NEWSLETTER_SITE_APP_URL ([site] app_url): expected a URL without whitespace"),
        ("", {"NEWSLETTER_SITE_BASE_URL": " https://example.org"}, "without whitespace"),
        ('[site]\napp_url = "javascript:alert(1)//https://x"\n', {}, "http(s) URL"),
        ('[site]\napp_url = "file:///etc/passwd"\n', {}, "http(s) URL"),
        ('[site]\napp_url = "https:example.org"\n', {}, "http(s) URL"),
        ('[site]\napp_url = "HTTPS://example.org"\n', {}, "lower case"),
        ('[site]\napp_url = "https://"\n', {}, "host name"),
        ('[site]\napp_url = "https://user:pw@example.org"\n', {}, "user info"),
        ('[site]\napp_url = "https://example.org:0/api"\n', {}, "port from 1 to 65535"),
        ('[site]\napp_url = "https://example.org:70000/api"\n', {}, "valid host and port"),
        ('[site]\napp_url = "https://example.org/api?x=1"\n', {}, "query or fragment"),
        ('[site]\nbase_url = "https://example.org/#top"\n', {}, "query or fragment"),
        ('[site]\nbase_url = "https://exa_mple.org"\n', {}, "host name"),
        ('[site]\nbase_url = "https://例子.测试"\n', {}, "ASCII URL"),
        ('[translate]\nbase_url = "http://llm.example\\n"\n', {}, "[translate] base_url"),
        ('[github]\napi_url = "gopher://api.github.com"\n', {}, "[github] api_url"),
        ("", {"NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL": "not a url"},
         "NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL ([subscriptions] queue_url)"),
        # Numbers: finite, and within sane bounds.
        ("[delivery]\nmax_rate = nan\n", {}, "[delivery] max_rate: expected messages"),
        ("[delivery]\nmax_rate = inf\n", {}, "[delivery] max_rate"),
        ("[delivery]\nmax_rate = -1.0\n", {}, "[delivery] max_rate"),
        ("", {"NEWSLETTER_DELIVERY_MAX_RATE": "nan"},
         "NEWSLETTER_DELIVERY_MAX_RATE ([delivery] max_rate)"),
        ("", {"NEWSLETTER_DELIVERY_MAX_RATE": "-inf"}, "NEWSLETTER_DELIVERY_MAX_RATE"),
        ("", {"NEWSLETTER_DELIVERY_MAX_RATE": "1e9"}, "to 10000"),
        ("[delivery]\nconcurrency = 100000\n", {}, "[delivery] concurrency"),
        ("[smtp]\nport = 0\n", {}, "[smtp] port: expected 1 to 65,535"),
        ("[smtp]\nport = 65536\n", {}, "[smtp] port"),
        ("", {"NEWSLETTER_SMTP_PORT": "-25"}, "NEWSLETTER_SMTP_PORT ([smtp] port)"),
        ('[smtp]\nhost = ""\n', {}, "[smtp] host: expected a host name"),
        ("", {"NEWSLETTER_SMTP_HOST": ""}, "NEWSLETTER_SMTP_HOST ([smtp] host)"),
        ('[smtp]\nhost = "mail.example.org\\r\\nRCPT"\n', {}, "[smtp] host"),
        ("[subscriptions]\nconfirm_days = 36500\n", {}, "[subscriptions] confirm_days"),
        ("[subscriptions]\nconfirm_days = 0\n", {}, "[subscriptions] confirm_days"),
        ("", {"NEWSLETTER_SUBSCRIPTIONS_CONFIRM_DAYS": "99999999999"},
         "NEWSLETTER_SUBSCRIPTIONS_CONFIRM_DAYS ([subscriptions] confirm_days)"),
        ("[subscriptions]\nclient_per_hour = 1000000000\n", {},
         "[subscriptions] client_per_hour"),
        ("[subscriptions]\naddress_per_day = 100000\n", {},
         "[subscriptions] address_per_day"),
        ("[subscriptions]\ntransient_bounce_limit = 1000\n", {},
         "[subscriptions] transient_bounce_limit"),
        ("[delivery]\nretry_seconds = 90000\n", {},
         "[delivery] retry_seconds: expected 0 to 86,400"),
        ("[smtp]\nmax_connections = 300\n", {}, "[smtp] max_connections: expected 0 to 256"),
        # Choices and names the AWS clients would refuse mid-run.
        ('[store]\nbackend = "redis"\n', {}, "[store] backend: expected one of sqlite, dynamodb"),
        ("", {"NEWSLETTER_ARCHIVE_TARGET": "gcs"},
         "NEWSLETTER_ARCHIVE_TARGET ([archive] target): expected one of local, s3"),
        ('[translate]\nbackend = "deepl"\n', {}, "expected one of none, openai, aws"),
        ('[inbox]\nsource = "s3"\n', {}, "[inbox] bucket: needed when [inbox] source is s3"),
        ('[store]\nledger_table = "x"\n', {}, "[store] ledger_table: expected a DynamoDB table"),
        ('[ses]\nsns_topic_arns = ["arn:aws:sns:us-east-1:1:topic"]\n', {},
         "[ses] sns_topic_arns: expected an SNS topic ARN, got 'arn:aws:sns:us-east-1:1:topic'"),
        # [smtp]: every value reaches the wire (EHLO, MAIL FROM, AUTH).
        ('[smtp]\ntls = "ssl"\n', {}, '[smtp] tls: expected "starttls" (port 587), "implicit" '
         '(port 465) or "none", got \'ssl\''),
        ("", {"NEWSLETTER_SMTP_TLS": "STARTTLS"}, "NEWSLETTER_SMTP_TLS ([smtp] tls): expected"),
        ("[smtp]\nport = 465\n", {}, '[smtp] tls: port 465 speaks TLS from the first byte: '
         'set [smtp] tls = "implicit"'),
        ('[smtp]\nport = 465\ntls = "none"\n', {}, "port 465 speaks TLS from the first byte"),
        ('[smtp]\nhelo_name = "mail example.org"\n', {},
         "[smtp] helo_name: expected the host name"),
        ('[smtp]\nhelo_name = "mail_relay.example.org"\n', {}, "[smtp] helo_name"),
        ("", {"NEWSLETTER_SMTP_HELO_NAME": "mail.example.org\n"}, "[smtp] helo_name"),
        ("", {"NEWSLETTER_SMTP_HOST": "relay.example.org\n"}, "[smtp] host"),
        ('[smtp]\nhelo_name = "mail.example.org\\r\\nMAIL FROM:<x@evil.example>"\n', {},
         "[smtp] helo_name"),
        ('[smtp]\nhelo_name = "例子.中国"\n', {}, "IDNA-encode"),
        ('[smtp]\nreturn_path = "Bounces <bounces@example.org>"\n', {},
         "[smtp] return_path: expected a bare address"),
        ('[smtp]\nreturn_path = "bounces@example.org\\r\\nRCPT TO:<x@evil.example>"\n', {},
         "[smtp] return_path"),
        ('[smtp]\nreturn_path = "bounces"\n', {}, "[smtp] return_path: expected an address"),
        ('[smtp]\nusername = "weekly\\r\\nAUTH"\n', {},
         "[smtp] username: expected a login without"),
        ('[smtp]\ntls = "none"\nca_file = "ca.pem"\n', {},
         '[smtp] ca_file: is set but [smtp] tls is "none"'),
        # Signing secrets: 32 bytes at least, the previous ones too.
        ("", {"NEWSLETTER_SECRET": "hunter2-hunter2-hunter2"},
         "NEWSLETTER_SECRET: too short: use at least 32 random bytes"),
        ("", {"NEWSLETTER_SECRET": SECRET_32, "NEWSLETTER_SECRET_PREVIOUS":
              f"{SECRET_32}-old, hunter2"}, "NEWSLETTER_SECRET_PREVIOUS: too short"),
    ],
)
def test_a_bad_value_is_one_clear_line(tmp_path, text, env, message):
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, text), env)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and "\r" not in str(info.value)  # one line
    assert "hunter2" not in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("text", "env"), [
    ('[site]\napp_url = "https://example.org/api/"\nbase_url = "https://example.org"\n', {}),
    ('[site]\napp_url = "http://[::1]:8001"\nbase_url = "http://127.0.0.1:8000/"\n', {}),
    ("[site]\napp_url = \"\"\n", {}),  # no subscription app
    ("[delivery]\nmax_rate = 0.5\n[smtp]\nport = 465\nhost = \"smtp.example.org\"\n"
     "tls = \"implicit\"\n", {}),
    ("", {"NEWSLETTER_SECRET": SECRET_32, "NEWSLETTER_SECRET_PREVIOUS": f"{SECRET_32}-a,"}),
    ("", {"NEWSLETTER_SECRET": "密" * 11}),  # 33 bytes
    ("", {"NEWSLETTER_SUBSCRIPTIONS_CONFIRM_DAYS": "30",
          "NEWSLETTER_SUBSCRIPTIONS_CLIENT_PER_HOUR": "10000"}),
    ('[smtp]\nhelo_name = "mail.example.org"\n', {}),
    ('[smtp]\nhelo_name = "[192.0.2.25]"\n', {}),
    ('[smtp]\nreturn_path = "bounces@example.org"\n', {}),
    ('[smtp]\nreturn_path = "bounces@例子.中国"\n', {}),
    # A CA file that does not exist yet is checked by a send, not at load.
    ('[smtp]\ntls = "implicit"\nport = 465\nca_file = "does-not-exist-yet.pem"\n', {}),
])
def test_sane_values_still_load(tmp_path, text, env):
    load(write(tmp_path, text), env)


@pytest.mark.parametrize(("smtp", "mode"), [
    ("", "starttls"),                                   # the embedded default
    ("starttls = false\n", "none"),                     # the older switch keeps working
    ('tls = "implicit"\nport = 465\n', "implicit"),
    ('tls = "none"\n', "none"),                         # tls, when set, decides
    ('tls = "starttls"\nstarttls = false\n', "starttls"),
])
def test_smtp_tls_mode_follows_tls_else_starttls(tmp_path, smtp, mode):
    assert load(write(tmp_path, f"[smtp]\n{smtp}"), {}).smtp.tls_mode == mode


def test_without_a_file_the_defaults_apply(tmp_path):
    settings = load(None, {}, cwd=tmp_path)
    assert settings.source is None and settings.base_dir == tmp_path
    assert settings.feed.urls == ()
