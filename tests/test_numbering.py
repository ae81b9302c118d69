"""Issue numbers in the embedded default: the first issue an archive holds is No. 1.

The default newsletter.toml sets no ``[issue] first_week`` and `make run` dates the sample into
the last complete week, so a build counts from the first week the archive holds, or from its own
week when the archive is empty.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from support.commands import newsletter_main
from support.feeds import Entry, atom, built_issue
from support.project import ROOT, SAMPLE_FEED, SAMPLE_WEEK

from pipeline.config import load

NEXT_WEEK = "2026-W49"  # 30 November to 7 December 2026, Asia/Shanghai
OLDER_WEEK = "2026-W40"


def default_project(folder: Path) -> Path:
    """The repository's own newsletter.toml, reading the sample feed from where it is."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "newsletter.toml").read_text(encoding="utf-8")
    text = text.replace('urls = ["examples/sample-feed.atom"]', f'urls = ["{SAMPLE_FEED}"]')
    assert str(SAMPLE_FEED) in text
    (folder / "newsletter.toml").write_text(text, encoding="utf-8")
    return folder


def week_feed(folder: Path, pr: int, published: str) -> Path:
    path = folder / f"feed-{pr}.atom"
    path.write_bytes(atom([Entry(pr=pr, title="调度器修复", body="值得一读：调度器的小修复。",
                                 lang="zh-CN", published=published),
                           Entry(pr=pr, title="A scheduler fix", body="Skim: a small fix.",
                                 lang="en", id=f"en-{pr}", published=published)]))
    return path


def number(project: Path, week: str) -> int:
    value: int = built_issue(project, week)["number"]
    return value


def ok(project: Path, *args: str) -> None:
    result = newsletter_main(list(args), project)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.subprocess  # publish runs Pagefind
def test_the_default_configuration_numbers_from_the_archives_first_issue(tmp_path):
    project = default_project(tmp_path / "p")
    assert load(project / "newsletter.toml", {}).issue.first_week == ""
    ok(project, "build", "--week", SAMPLE_WEEK)
    assert number(project, SAMPLE_WEEK) == 1  # a fresh archive's first issue
    subject = built_issue(project)["subject"]
    assert subject["en"].startswith("vLLM PR Weekly · No. 1 · 23–29 Nov · ")
    assert subject["zh"].startswith("vLLM PR 周报 · 第 1 期 · 11 月 23–29 日 · ")
    ok(project, "publish", "--week", SAMPLE_WEEK)
    later = week_feed(tmp_path, 57001, "2026-12-01T10:00:00+08:00")
    ok(project, "build", "--week", NEXT_WEEK, "--feed", str(later))
    assert number(project, NEXT_WEEK) == 2  # the week after the archive's first
    ok(project, "build", "--week", SAMPLE_WEEK)
    assert number(project, SAMPLE_WEEK) == 1  # rebuilt, it keeps its number
    older = week_feed(tmp_path, 50001, "2026-09-29T10:00:00+08:00")
    ok(project, "build", "--week", OLDER_WEEK, "--feed", str(older))
    assert number(project, OLDER_WEEK) == 0  # before the archive's first: unnumbered


def test_a_configured_first_week_is_kept_and_the_archive_never_asked(tmp_path):
    project = default_project(tmp_path / "p")
    config = project / "newsletter.toml"
    text = config.read_text().replace("[issue]\n", '[issue]\nfirst_week = "2026-W46"\n')
    # An archive that cannot be opened (an S3 target with no bucket): asked, it would fail.
    config.write_text(text.replace('target = "local"', 'target = "s3"'), encoding="utf-8")
    ok(project, "build", "--week", SAMPLE_WEEK)
    assert number(project, SAMPLE_WEEK) == 3
    config.write_text(text.replace('target = "local"', 'target = "s3"').replace(
        'first_week = "2026-W46"\n', ""), encoding="utf-8")
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], project)
    assert result.returncode == 2 and "[archive] bucket" in result.stderr


@pytest.mark.subprocess  # run publishes, and publish runs Pagefind
def test_make_runs_redated_sample_is_no_1_in_a_fresh_archive_whatever_the_week(tmp_path):
    project = default_project(tmp_path / "p")
    redate = runpy.run_path(str(ROOT / "examples" / "redate.py"))["redate"]
    tz = load(project / "newsletter.toml", {}).issue.timezone
    moved = project / "feed.atom"
    moved.write_text(redate(SAMPLE_FEED.read_text(encoding="utf-8"), tz), encoding="utf-8")
    ok(project, "run", "--feed", str(moved))
    (week,) = [p.name for p in (project / "build" / "site" / "issues").iterdir()]
    assert number(project, week) == 1
    index = (project / "build" / "site" / "index.html").read_text(encoding="utf-8")
    assert "第 1 期" in index and "No. 1" in index and "第 3 期" not in index
