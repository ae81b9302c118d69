"""A sent week is frozen, as the editor and the operator meet it: no command puts another
issue under its name (exit 3), and a correction is explicit, approved, shown on the page,
said by ``status``, and what the readers not yet sent receive. In process on a real store
and archive, but where the process is the point (the printed approve command, ``make``).
"""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
from email import policy
from pathlib import Path

import pytest
from playwright.sync_api import Browser
from support.commands import clean_env, newsletter_cmd, ok
from support.commands import newsletter_main as run
from support.project import ROOT, SAMPLE_WEEK, make_project

SUBSCRIBERS = ROOT / "examples" / "subscribers.csv"
#: A PR of the sample the editor hides after the week went out.
HIDDEN = 56671
REASON = f"Hid #{HIDDEN}: its review was of another PR"


def issue_folder(project: Path) -> Path:
    return project / "build" / "issues" / SAMPLE_WEEK


def archive_objects(project: Path) -> dict[str, bytes]:
    """Every object the archive holds, by key."""
    site = project / "build" / "site"
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file()}


def outbox(project: Path) -> list[Path]:
    folder = issue_folder(project) / "outbox"
    return sorted(folder.glob("*.eml")) if folder.exists() else []


def hide(project: Path) -> None:
    editorial = project / "editorial"
    editorial.mkdir(exist_ok=True)
    (editorial / f"{SAMPLE_WEEK}.toml").write_text(f"[{HIDDEN}]\nhide = true\n")


def html_of(path: Path) -> str:
    """The HTML part of a message in the outbox, decoded."""
    body = email.message_from_bytes(path.read_bytes(), policy=policy.default).get_body(
        ("html",))
    assert body is not None
    return str(body.get_content())


def content_hash(project: Path) -> str:
    data = json.loads((issue_folder(project) / "issue.json").read_text(encoding="utf-8"))
    return str(data["content_hash"])


def refused(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refusal of a changed issue says; asserted to say why and how."""
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    (line,) = [line for line in lines if line.startswith("newsletter: ")]  # notes aside
    assert line == lines[-1]
    assert f"{SAMPLE_WEEK} went out on " in line and "is never replaced silently" in line
    assert f"preview --week {SAMPLE_WEEK}" in line and "--correct REASON" in line
    return line


@pytest.fixture
def sent(tmp_path: Path) -> Path:
    """A project whose sample week ``run`` built, published and sent to its six readers."""
    ok(run(["subscribers", "import", str(SUBSCRIBERS), "--confirmed"], make_project(tmp_path)))
    assert "sent 6," in ok(run(["run", "--week", SAMPLE_WEEK], tmp_path)).stdout
    return tmp_path


@pytest.mark.subprocess  # the publish runs Pagefind
@pytest.mark.slow  # a run (build, publish with Pagefind, send), then six refused commands
def test_no_command_replaces_a_sent_issue_and_the_archive_is_left_alone(sent):
    before, mails, sent_as = archive_objects(sent), outbox(sent), content_hash(sent)
    # Unchanged, the week previews as the issue that went out: nothing to approve.
    same = ok(run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"], sent))
    assert same.stdout.strip().splitlines()[-1] == (
        f"{SAMPLE_WEEK} went out as {sent_as[:12]}: it is sent, there is nothing to approve")
    page = (issue_folder(sent) / "preview" / "index.html").read_text(encoding="utf-8")
    assert "Sent: this is the issue that went out" in page and "Ready to approve" not in page
    assert " approve --week" not in page
    folder = {p.name: p.read_bytes() for p in issue_folder(sent).glob("*.*")}
    hide(sent)
    refused(run(["build", "--week", SAMPLE_WEEK], sent))
    line = refused(run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"],
                       sent))
    assert "--force" not in line  # forcing is no way past a sent week
    refused(run(["build", "--week", SAMPLE_WEEK, "--force"], sent))
    assert {p.name: p.read_bytes() for p in issue_folder(sent).glob("*.*")} == folder
    # A folder holding another issue, built where the store was not asked (another machine,
    # an older version): approve, publish, send and run refuse it alike.
    store = sent / "data" / "subscribers.sqlite3"
    store.rename(store.with_suffix(".away"))
    ok(run(["build", "--week", SAMPLE_WEEK], sent))
    store.with_suffix(".away").rename(store)
    assert content_hash(sent) != sent_as
    ok(run(["subscribers", "add", "late@example.org", "--confirmed"], sent))
    for command in (["approve"], ["publish"], ["send"], ["send", "--dry-run"], ["run"]):
        refused(run([*command, "--week", SAMPLE_WEEK], sent))
    assert not (issue_folder(sent) / "approval.json").exists()
    status = run(["status", "--week", SAMPLE_WEEK], sent)
    assert status.returncode == 3 and status.stdout.startswith(f"{SAMPLE_WEEK}: blocked\n")
    assert (f"went out   as built, {sent_as[:12]}, from " in status.stdout
            and f"the issue built here ({content_hash(sent)[:12]}) differs" in status.stdout)
    assert archive_objects(sent) == before
    assert outbox(sent) == mails


@pytest.mark.subprocess  # the publish runs Pagefind
@pytest.mark.slow  # two runs, then a third on a fresh runner's empty build/ folder
def test_run_finishes_a_sent_week_with_the_issue_that_went_out(sent):
    sent_as = content_hash(sent)
    ok(run(["subscribers", "add", "late@example.org", "--layout", "en", "--confirmed"], sent))
    again = ok(run(["run", "--week", SAMPLE_WEEK], sent))
    assert f"using the issue that went out ({sent_as[:12]})" in again.stdout
    assert "sent 1, skipped 6" in again.stdout
    # A fresh runner (no build/issues) rebuilds the same issue from the same input...
    shutil.rmtree(issue_folder(sent))
    ok(run(["subscribers", "add", "later@example.org", "--layout", "en", "--confirmed"], sent))
    fresh = ok(run(["run", "--week", SAMPLE_WEEK], sent))
    assert "sent 1, skipped 7" in fresh.stdout and content_hash(sent) == sent_as
    # ...and refuses it once the input changed, sending nothing.
    shutil.rmtree(issue_folder(sent))
    hide(sent)
    ok(run(["subscribers", "add", "last@example.org", "--layout", "en", "--confirmed"], sent))
    refused(run(["run", "--week", SAMPLE_WEEK], sent))
    assert not issue_folder(sent).exists()


@pytest.mark.subprocess  # the publish runs Pagefind
@pytest.mark.slow  # a run, a corrected preview, two more runs, the page in Chromium
def test_a_correction_is_explicit_approved_shown_and_sent_to_the_rest(sent, browser: Browser):
    first_mails, sent_as = outbox(sent), content_hash(sent)
    assert all(f"/pull/{HIDDEN}" in html_of(p) for p in first_mails)
    hide(sent)
    args = ["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"]
    preview = ok(run([*args, "--correct", REASON], sent))
    last = preview.stdout.strip().splitlines()[-1]
    assert last.startswith(f"to approve the correction of {SAMPLE_WEEK} as ")
    page = (issue_folder(sent) / "preview" / "index.html").read_text(encoding="utf-8")
    assert "A correction of the issue that went out on" in page and REASON in page
    ok(run(["subscribers", "add", "late@example.org", "--layout", "en", "--confirmed"], sent))
    # Not approved yet: run neither rebuilds over it nor sends it.
    waiting = run(["run", "--week", SAMPLE_WEEK], sent)
    assert waiting.returncode == 3 and "is not approved" in waiting.stderr
    assert "approve --week" in waiting.stderr and outbox(sent) == first_mails
    ok(run(["approve", "--week", SAMPLE_WEEK], sent))
    corrected = ok(run(["run", "--week", SAMPLE_WEEK], sent))
    assert "sent 1, skipped 6" in corrected.stdout
    (late,) = set(outbox(sent)) - set(first_mails)
    assert f"/pull/{HIDDEN}" not in html_of(late)
    assert email.message_from_bytes(late.read_bytes(), policy=policy.default)["To"] == \
        "late@example.org"

    data = json.loads((issue_folder(sent) / "issue.json").read_text(encoding="utf-8"))
    day = data["correction"]["on"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", day) and data["correction"]["reason"] == REASON
    status = run(["status", "--week", SAMPLE_WEEK], sent)
    assert status.returncode == 0, status.stdout + status.stderr
    assert (f"went out   corrected on {day}: {REASON} (now {data['content_hash'][:12]}; "
            f"first sent as {sent_as[:12]}") in status.stdout
    facts = json.loads(run(["status", "--week", SAMPLE_WEEK, "--json"], sent).stdout)
    assert facts["went_out"]["as"] == "corrected"
    assert facts["went_out"]["first_hash"] == sent_as

    site = sent / "build" / "site" / "issues" / SAMPLE_WEEK
    context = browser.new_context()
    try:
        tab = context.new_page()
        for name, words in (("index.html", ("更正于", "Corrected on")), ("zh.html", ("更正于",)),
                            ("en.html", ("Corrected on",))):
            tab.goto((site / name).as_uri())
            note = tab.locator("p.correction")
            assert note.is_visible(), name
            text = note.inner_text()
            assert all(f"{word} {day}" in text for word in words) and REASON in text, text
            assert tab.locator(f"#pr-{HIDDEN}").count() == 0
    finally:
        context.close()
    # A plain rebuild of the corrected week carries its correction: the same issue.
    ok(run(["build", "--week", SAMPLE_WEEK], sent))
    assert content_hash(sent) == data["content_hash"]


@pytest.mark.parametrize(("reason", "words"), [
    ("a typo", "has not gone out: there is nothing to correct"),
    ("", "one line of 1 to 200 characters"), ("   ", "one line of 1 to 200 characters"),
    ("x" * 201, "one line of 1 to 200 characters")])
def test_a_correction_needs_a_one_line_reason_and_a_week_that_went_out(tmp_path, reason, words):
    result = run(["build", "--week", SAMPLE_WEEK, "--correct", reason], make_project(tmp_path))
    assert result.returncode == 2 and words in result.stderr
    assert not issue_folder(tmp_path).exists()


@pytest.mark.subprocess
def test_the_approve_command_printed_by_preview_runs_as_printed(tmp_path):
    """Started as ``make preview`` starts it, the printed command runs pasted into a shell."""
    script = Path(newsletter_cmd()[0])
    if script.name != "newsletter":
        pytest.fail("this test needs the installed console script (make install)")
    env = clean_env(NEWSLETTER_PATHS_BUILD_DIR=str(tmp_path / "build"),
                    NEWSLETTER_PATHS_DATA_DIR=str(tmp_path / "data"))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != script.parent.resolve())
    assert shutil.which("newsletter", path=env["PATH"]) is None
    started = os.path.relpath(script, ROOT)  # .venv/bin/newsletter, as make starts it
    preview = subprocess.run([started, "preview", "--week", SAMPLE_WEEK, "--no-serve",
                              "--no-screenshots"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    printed = re.fullmatch(f"to approve {SAMPLE_WEEK} as [0-9a-f]{{12}}: (.+)",
                           preview.stdout.strip().splitlines()[-1])
    assert printed is not None, preview.stdout
    page = (issue_folder(tmp_path) / "preview" / "index.html").read_text(encoding="utf-8")
    assert printed[1] in page
    # A shell, as the person pasting the printed line uses: the boundary being checked.
    approved = subprocess.run(printed[1], shell=True, cwd=ROOT, env=env,  # noqa: S602
                              capture_output=True, text=True, timeout=120, check=False)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert approved.stdout.startswith(f"approved {SAMPLE_WEEK} as ")
    assert (issue_folder(tmp_path) / "approval.json").is_file()


@pytest.mark.subprocess
def test_make_approve_approves_the_week(tmp_path):
    paths = {"NEWSLETTER_PATHS_BUILD_DIR": str(tmp_path / "build"),
             "NEWSLETTER_PATHS_DATA_DIR": str(tmp_path / "data")}
    ok(run(["build", "--week", SAMPLE_WEEK], ROOT, **paths))  # make approve is the boundary
    venv = Path(newsletter_cmd()[0]).parents[1]
    made = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "-o", "install",
                           f"VENV={venv}", "approve", f"WEEK={SAMPLE_WEEK}"],
                          env=clean_env(**paths), capture_output=True, text=True, timeout=120,
                          check=False)
    assert made.returncode == 0, made.stdout + made.stderr
    assert f"approved {SAMPLE_WEEK} as " in made.stdout
    assert (tmp_path / "build" / "issues" / SAMPLE_WEEK / "approval.json").is_file()
