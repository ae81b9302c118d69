"""Delivery through the command line, as an operator meets it: outbox, gates, approval."""

from __future__ import annotations

import email
import json
from email import policy
from pathlib import Path

import pytest
from support.commands import newsletter_main as run
from support.commands import ok
from support.feeds import Entry, atom
from support.project import ROOT, SAMPLE_FEED, SAMPLE_WEEK, make_project

SUBSCRIBERS = ROOT / "examples" / "subscribers.csv"


def with_readers(folder: Path) -> Path:
    """A project reading the sample feed, the sample subscribers confirmed."""
    ok(run(["subscribers", "import", str(SUBSCRIBERS), "--confirmed"], make_project(folder)))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ok(run(["build", "--week", SAMPLE_WEEK], with_readers(tmp_path)))
    return tmp_path


def outbox(project: Path) -> list[Path]:
    folder = project / "build" / "issues" / SAMPLE_WEEK / "outbox"
    return sorted(folder.glob("*.eml")) if folder.exists() else []


def subscriber_count() -> int:
    return len(SUBSCRIBERS.read_text().strip().splitlines()) - 1


def test_send_to_the_outbox_once(project):
    first = ok(run(["send", "--week", SAMPLE_WEEK], project))
    n = subscriber_count()
    assert f"sent {n}, skipped 0, failed 0, unconfirmed 0" in first.stdout
    files = outbox(project)
    assert len(files) == n
    layouts_by_address = {}
    for line in SUBSCRIBERS.read_text().strip().splitlines()[1:]:
        address, layout, *_ = line.split(",")  # email,layout[,areas]
        layouts_by_address[address] = layout or "zh-en"
    issue = json.loads((project / "build" / "issues" / SAMPLE_WEEK / "issue.json").read_text())
    for path in files:
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        layout = layouts_by_address[message["To"]]
        assert message["Subject"] == issue["subject"][layout]
    report = json.loads((project / "build" / "issues" / SAMPLE_WEEK / "send-report.json")
                        .read_text())
    assert report["sent"] == n and report["stopped"] is None
    assert "@" not in json.dumps(report["failures"])  # no addresses in the report
    again = ok(run(["send", "--week", SAMPLE_WEEK], project))
    assert f"sent 0, skipped {n}" in again.stdout
    assert outbox(project) == files


def test_dry_run_sends_nothing_and_a_limited_send_resumes(project):
    result = ok(run(["send", "--week", SAMPLE_WEEK, "--dry-run"], project))
    assert f"would send {subscriber_count()}" in result.stdout
    assert outbox(project) == []
    ok(run(["send", "--week", SAMPLE_WEEK, "--limit", "2"], project))
    assert len(outbox(project)) == 2
    result = ok(run(["send", "--week", SAMPLE_WEEK], project))
    assert f"sent {subscriber_count() - 2}, skipped 2" in result.stdout
    assert len(outbox(project)) == subscriber_count()


def test_test_copies_go_to_the_normalised_address_outside_the_ledger(project):
    result = ok(run(["send", "--week", SAMPLE_WEEK, "--to", " Editor@EXAMPLE.org ",
                     "--layout", "zh-en", "--layout", "en"], project))
    # Each layout asked for, and each interest variant of those layouts the build rendered.
    data = json.loads((project / "build" / "issues" / SAMPLE_WEEK / "issue.json").read_text())
    variants = sorted(v["key"] for v in data.get("variants", []) if v["layout"] in ("zh-en", "en"))
    assert variants  # the sample subscribers follow areas of the sample issue
    assert result.stdout.count("test copy") == 2 + len(variants)
    tests = [email.message_from_bytes(p.read_bytes(), policy=policy.default)
             for p in outbox(project)]
    assert {message["To"] for message in tests} == {"Editor@example.org"}
    subjects = sorted(message["Subject"] for message in tests)
    labels = sorted(s.split("]")[0].removeprefix("[TEST ") for s in subjects)
    assert labels == sorted(["en", "zh-en", *variants])
    # The real send still reaches everyone.
    assert f"sent {subscriber_count()}," in ok(run(["send", "--week", SAMPLE_WEEK],
                                                   project)).stdout


@pytest.mark.parametrize("address", [
    "editor", "editor@", "editor@example.org, other@example.org",
    "editor@example.org\r\nBcc: everyone@example.org", "editor@exa mple.org",
    "Editor <editor@example.org>", "",
], ids=["no-domain", "empty-domain", "two", "header-injection", "space", "display-name",
        "empty"])
def test_a_test_copy_address_is_validated_like_an_import(project, address):
    """``--to ""`` included: it is not "no test copy" (which would send to everyone)."""
    result = run(["send", "--week", SAMPLE_WEEK, "--to", address], project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("newsletter: error: --to: invalid address")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert outbox(project) == [] and "sent" not in result.stdout
    preview = run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--to", address], project)
    assert preview.returncode == 2 and "--to: invalid address" in preview.stderr


@pytest.mark.subprocess  # publishing runs Pagefind
def test_require_approval_gate_and_run_reuses_the_approved_issue(project, tmp_path):
    env = {"NEWSLETTER_ISSUE_REQUIRE_APPROVAL": "true"}
    refused = run(["send", "--week", SAMPLE_WEEK], project, **env)
    assert refused.returncode == 3 and "not approved" in refused.stderr
    assert outbox(project) == []
    unpublished = run(["publish", "--week", SAMPLE_WEEK], project, **env)
    assert unpublished.returncode == 3 and "not approved" in unpublished.stderr
    assert not (project / "build" / "site").exists()
    approved = ok(run(["approve", "--week", SAMPLE_WEEK], project))
    assert "approved 2026-W48 as " in approved.stdout
    ok(run(["publish", "--week", SAMPLE_WEEK], project, **env))
    assert (project / "build" / "site" / "issues" / SAMPLE_WEEK / "index.html").exists()
    late = tmp_path / "late.atom"  # a review after the approval: run sends what was approved
    late.write_bytes(atom([Entry(pr=99999, body="值得一读。")]))
    result = ok(run(["run", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED),
                     "--feed", str(late)], project, **env))
    assert "using the approved issue" in result.stdout
    assert len(outbox(project)) == subscriber_count()
    issue = json.loads((project / "build" / "issues" / SAMPLE_WEEK / "issue.json").read_text())
    assert 99999 not in [item["pr"] for item in issue["items"]]


def test_build_keeps_an_approved_issue_unless_forced(project, tmp_path):
    ok(run(["approve", "--week", SAMPLE_WEEK], project))
    ok(run(["build", "--week", SAMPLE_WEEK], project))  # same content: fine
    extra = tmp_path / "extra.atom"
    extra.write_bytes(atom([Entry(pr=99999, body="值得一读。", lang="zh-CN")]))
    changed = run(["build", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED),
                   "--feed", str(extra)], project)
    assert changed.returncode == 3 and "--force" in changed.stderr
    folder = project / "build" / "issues" / SAMPLE_WEEK
    assert (folder / "approval.json").exists()
    forced = run(["build", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED), "--feed",
                  str(extra), "--force"], project)
    ok(forced)
    assert not (folder / "approval.json").exists()


def test_an_approval_that_cannot_be_written_is_one_line(project):
    folder = project / "build" / "issues" / SAMPLE_WEEK
    (folder / "approval.json").mkdir()  # in the way: not a file the approval may replace
    result = run(["approve", "--week", SAMPLE_WEEK], project)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("newsletter: error: cannot record the approval in ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_changed_artifact_is_refused(project):
    html = project / "build" / "issues" / SAMPLE_WEEK / "email-en.html"
    html.write_text(html.read_text().replace("vLLM", "vLLM!"))
    result = run(["send", "--week", SAMPLE_WEEK], project)
    assert result.returncode == 3 and "changed since it was built" in result.stderr


def test_missing_language_blocks_unless_allowed(project, tmp_path):
    feed = tmp_path / "zh-only.atom"
    feed.write_bytes(atom([Entry(pr=1, body="值得精读。")]))
    ok(run(["build", "--week", SAMPLE_WEEK, "--feed", str(feed)], project))
    blocked = run(["send", "--week", SAMPLE_WEEK], project)
    assert blocked.returncode == 3 and "missing-language" in blocked.stderr
    assert "--allow-missing-translations" in blocked.stderr
    ok(run(["send", "--week", SAMPLE_WEEK, "--allow-missing-translations"], project))


def test_send_without_a_build_is_a_clear_error(project):
    result = run(["send", "--week", "2026-W40"], project)
    assert result.returncode == 2 and "newsletter build --week 2026-W40" in result.stderr


@pytest.mark.parametrize("transport", ["smtp", "ses"])
def test_real_transports_need_the_secret(project, transport):
    result = run(["send", "--week", SAMPLE_WEEK], project,
                 NEWSLETTER_DELIVERY_TRANSPORT=transport)
    assert result.returncode == 2 and "NEWSLETTER_SECRET" in result.stderr


@pytest.mark.subprocess  # publishing runs Pagefind
def test_run_builds_publishes_then_sends_and_does_nothing_when_blocked(tmp_path):
    with_readers(tmp_path)
    zh_only = tmp_path / "zh-only.atom"
    zh_only.write_bytes(atom([Entry(pr=1, body="值得精读。")]))
    blocked = run(["run", "--week", SAMPLE_WEEK, "--feed", str(zh_only)], tmp_path)
    assert blocked.returncode == 3 and "missing-language" in blocked.stderr
    assert not (tmp_path / "build" / "site").exists()
    assert outbox(tmp_path) == []
    done = ok(run(["run", "--week", SAMPLE_WEEK], tmp_path))
    assert "built 2026-W48" in done.stdout and f"sent {subscriber_count()}," in done.stdout
    assert done.stdout.index("published 2026-W48") < done.stdout.index("sent ")
    site = tmp_path / "build" / "site"
    assert (site / "issues" / SAMPLE_WEEK / "index.html").exists()
    # The email's archive link points at the page just published.
    issue = json.loads((tmp_path / "build" / "issues" / SAMPLE_WEEK / "issue.json").read_text())
    page = issue["archive_url"].split("/issues/", 1)[1]
    assert (site / "issues" / page).is_file()
    assert "sent 0," in ok(run(["run", "--week", SAMPLE_WEEK], tmp_path)).stdout
