"""Settings: the file, NEWSLETTER_<SECTION>_<KEY> overrides, validation, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from pipeline.config import load
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
        ({"NEWSLETTER_SECRET": "s3cret", "NEWSLETTER_SMTP_PASSWORD": "p"},
         lambda s: s.smtp.username == ""),
    ],
)
def test_environment_overrides_the_file(tmp_path, env, check):
    settings = load(write(tmp_path, '[issue]\ntimezone = "Asia/Shanghai"\n'), env)
    assert check(settings)


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
        ("", {"NEWSLETTER_ISSUE_REQUIRE_APPROVAL": "maybe"}, "true or false"),
    ],
)
def test_bad_configuration_is_one_clear_error(tmp_path, text, env, message):
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, text), env)
    assert message in str(info.value)
    assert "hunter2" not in str(info.value)


def test_a_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load(tmp_path / "nope.toml", {})


def test_without_a_file_the_defaults_apply(tmp_path):
    settings = load(None, {}, cwd=tmp_path)
    assert settings.source is None and settings.base_dir == tmp_path
    assert settings.feed.urls == ()
