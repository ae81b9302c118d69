"""The command line as a user meets it: exit codes, one-line errors. A build and the usage
errors run as real processes (the exit status a shell sees, argparse's own exit); the rest
call the command in process (``newsletter_main``), which returns what ``main`` does."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.commands import newsletter_main as run
from support.commands import run_newsletter as run_process
from support.feeds import Entry, atom
from support.project import DATA, SAMPLE_FEED, SAMPLE_WEEK, make_project

from pipeline.week import last_complete_week


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int,
                          *words: str) -> None:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0]


def written(project: Path) -> list[Path]:
    build = project / "build"
    return sorted(p for p in build.rglob("*") if p.is_file()) if build.exists() else []


@pytest.mark.subprocess
def test_build_writes_the_issue_and_says_where(project):
    result = run_process(["build", "--week", SAMPLE_WEEK], project)
    assert result.returncode == 0, result.stderr
    out = project / "build" / "issues" / SAMPLE_WEEK
    assert f"artifacts: build/issues/{SAMPLE_WEEK}/" in result.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["issue.json"] + [f"email-{lay}.{ext}" for lay in
                                              ("zh-en", "en-zh", "zh", "en")
                                              for ext in ("html", "txt")])
    data = json.loads((out / "issue.json").read_text(encoding="utf-8"))
    assert data["content_hash"] in result.stdout


def test_out_and_several_feeds(project, tmp_path):
    extra = tmp_path / "extra.atom"
    extra.write_bytes(atom([Entry(pr=99999, body="值得一读，补充。")]))
    result = run(["build", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED),
                  "--feed", str(extra), "--out", "here"], project)
    assert result.returncode == 0, result.stderr
    data = json.loads((project / "here" / "issue.json").read_text(encoding="utf-8"))
    assert len(data["items"]) == 9 and data["items"][-1]["pr"] == 99999


BAD_OVERRIDES = [{"NEWSLETTER_ISSUE_SIZE_BUDGET_KB": "lots"},
                 {"NEWSLETTER_DELIVERY_MAX_RATE": "nan"}, {"NEWSLETTER_SECRET": "short"},
                 {"NEWSLETTER_SITE_APP_URL": "https://example.org/api\nBcc: x@evil.example"}]


@pytest.mark.parametrize(("args", "config", "env", "code", "words"), [
    *(pytest.param(["build", "--week", week], None, {}, 2, ("--week",), id=f"week {week}")
      for week in ("2026-W00", "2025-W53", "last", "2026W48")),
    pytest.param(["build", "--week", SAMPLE_WEEK, "--feed", "no/such.atom"], None, {}, 2,
                 ("no such file", "no/such.atom"), id="missing feed"),
    pytest.param(["build", "--week", "2026-W40"], None, {}, 6, ("2026-W40",), id="empty week"),
    pytest.param(["build"], "[issue]\ntimezone = 'Nowhere/Town'\n", {}, 2, ("timezone",),
                 id="bad config"),
    *(pytest.param(["build"], None, env, 2, ("newsletter: error: config: ", *env),
                   id=f"bad {next(iter(env))}") for env in BAD_OVERRIDES),
    pytest.param(["--config", "nope.toml", "build"], None, {}, 2, ("nope.toml", "no such file"),
                 id="explicit missing config"),
    pytest.param(["build", "--week", SAMPLE_WEEK], "", {}, 2, ("--feed",), id="no feed"),
])
def test_a_bad_request_is_one_line_its_exit_code_and_writes_nothing(project, args, config, env,
                                                                    code, words):
    if config is not None:
        (project / "newsletter.toml").write_text(config)
    assert_one_line_error(run(args, project, **env), code, *words)
    assert written(project) == []


@pytest.mark.parametrize(("name", "words"), [
    ("truncated.atom", ("not well-formed",)),
    ("not-a-feed.html", ("not",)),
])
def test_unusable_feed_exits_2_and_keeps_the_previous_build(project, name, words):
    assert run(["build", "--week", SAMPLE_WEEK], project).returncode == 0
    before = {p: p.read_bytes() for p in written(project)}
    result = run(["build", "--week", SAMPLE_WEEK, "--feed", str(DATA / name)], project)
    assert_one_line_error(result, 2, *words)
    assert {p: p.read_bytes() for p in written(project)} == before
    leftovers = [p for p in (project / "build" / "issues").iterdir() if p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.subprocess
def test_usage_errors_are_one_line(project):
    assert_one_line_error(run_process(["build", "--wek", "x"], project), 2, "--wek")
    assert_one_line_error(run_process(["frobnicate"], project), 2, "frobnicate")


def test_default_week_is_the_last_complete_one(project, tmp_path):
    # A review dated now is in the current week, which is not complete: nothing to do.
    now = datetime.now(UTC)
    feed = tmp_path / "now.atom"
    feed.write_bytes(atom([
        Entry(pr=1, body="值得精读。", published=now.isoformat()),
        Entry(pr=2, body="值得一读。", published=(now - timedelta(days=7)).isoformat()),
    ]))
    result = run(["build", "--feed", str(feed)], project, NEWSLETTER_ISSUE_TIMEZONE="UTC")
    assert result.returncode == 0, result.stderr
    week = last_complete_week("UTC")
    data = json.loads((project / "build" / "issues" / week.id / "issue.json").read_text())
    assert [item["pr"] for item in data["items"]] == [2]
