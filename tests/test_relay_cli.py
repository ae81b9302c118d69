"""What ``newsletter send`` and ``run`` say and exit with when a relay pushes back: the CLI in
process against the aiosmtpd sink on loopback, scripted as real relays behave (limits that
outlast the retries, refusals no rerun fixes, mailboxes that do not exist).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.commands import newsletter_main as newsletter
from support.commands import ok
from support.project import SAMPLE_WEEK, make_project, smtp_toml
from support.servers import NO_SUCH_USER, FakeTime, SmtpSink

from pipeline.stages import deliver
from pipeline.stages.send import MAX_ATTEMPTS, Sender
from subscribers.store.sqlite import SqliteStore

SECRET = "s" * 40
READERS = ["ann@example.org", "bob@example.org", "cy@example.org"]


def project(folder: Path, sink: SmtpSink, extra: str = "") -> Path:
    make_project(folder, extra=smtp_toml(sink.host, sink.port, extra))
    for reader in READERS:
        ok(newsletter(["subscribers", "add", reader, "--confirmed"], folder))
    ok(newsletter(["build", "--week", SAMPLE_WEEK], folder))
    return folder


def send(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return newsletter(["send", "--week", SAMPLE_WEEK, *args], folder, NEWSLETTER_SECRET=SECRET)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The error: one line (timestamped log lines about the retries aside), no traceback."""
    lines = [line for line in result.stderr.strip().splitlines()
             if not re.match(r"\d{4}-\d\d-\d\dT", line)]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def report(folder: Path) -> Any:
    path = folder / "build" / "issues" / SAMPLE_WEEK / "send-report.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_limit_that_outlasts_the_retries_exits_4_and_a_rerun_finishes(
        tmp_path: Path, smtp_server: SmtpSink, monkeypatch: pytest.MonkeyPatch) -> None:
    """Temporary failures left at the end are no success: counted apart and kept for the rerun."""
    waits = FakeTime()
    monkeypatch.setattr(deliver, "Sender", functools.partial(
        Sender, sleep=waits.sleep, monotonic=waits.clock))
    folder = project(tmp_path, smtp_server, "retry_seconds = 120\n")
    smtp_server.fail_next("bob@example.org", 452, "4.5.3 Error: too many recipients",
                          times=1000)

    first = send(folder)

    assert first.returncode == 4, first.stdout + first.stderr
    line = one_line(first)
    assert "1 recipient(s) still refused for now" in line
    assert "452 4.5.3" in line and "run the same command again" in line
    assert "bob@example.org" not in line  # the reason names no address
    assert "sent 2, skipped 0, failed 0, unconfirmed 0, temporary 1 (to retry)" in first.stdout
    kept = report(folder)
    assert (kept["sent"], kept["failed"], kept["temporary"], kept["bounced"], kept["stopped"]) \
        == (2, 0, 1, 0, None)
    assert "452 4.5.3" in kept["failures"][0]["reason"]
    assert "bob@example.org" not in json.dumps(kept)
    # Retried for no longer than allowed (the rounds wait up to a minute each).
    assert 60 <= kept["retried_for_s"] <= 120 and sum(waits.slept) <= 120 + 10
    assert MAX_ATTEMPTS + 2 <= smtp_server.attempts("bob@example.org") < MAX_ATTEMPTS + 20
    assert sorted(r.rcpt_tos for r in smtp_server.received) == [(READERS[0],), (READERS[2],)]
    with SqliteStore.open(folder / "data" / "subscribers.sqlite3") as store:
        bob = store.find("bob@example.org")
        assert bob is not None
        assert [(f["subscriber"], f["permanent"]) for f in kept["failures"]] == [(bob.id, False)]
        entry = store.ledger_entry(SAMPLE_WEEK, bob.id)
        assert entry is not None and entry.status == "failed" and not entry.permanent

    smtp_server.clear()
    again = ok(send(folder))

    assert "sent 1, skipped 2, failed 0, unconfirmed 0, temporary 0" in again.stdout
    assert [r.rcpt_tos for r in smtp_server.received] == [("bob@example.org",)]
    with SqliteStore.open(folder / "data" / "subscribers.sqlite3") as store:
        assert store.ledger_counts(SAMPLE_WEEK)["sent"] == 3


def test_a_sender_the_relay_refuses_mid_run_is_exit_2_with_the_fix(
        tmp_path: Path, smtp_server: SmtpSink) -> None:
    """No rerun cures a refused MAIL FROM: exit 2, one line naming the fix, nobody failed."""
    folder = project(tmp_path, smtp_server)
    smtp_server.fail_next("weekly@example.org", 553,
                          "5.7.1 <weekly@example.org>: Sender address rejected: not owned by "
                          "user", at="MAIL", times=1000)

    result = send(folder)

    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line(result)
    assert "Sender address rejected" in line and "fix the configuration" in line
    kept = report(folder)
    assert (kept["sent"], kept["failed"], kept["stop_exit"]) == (0, 0, 2)
    assert smtp_server.received == []
    # What a scheduler gating on status hears: failed, exit 1; a rerun cannot cure it.
    status = newsletter(["status", "--week", SAMPLE_WEEK], folder)
    assert status.returncode == 1, status.stdout + status.stderr
    assert status.stdout.startswith(f"{SAMPLE_WEEK}: failed")
    assert "Sender address rejected" in status.stdout
    smtp_server.clear()  # the configuration fixed: the rerun's report replaces the stop
    ok(send(folder))
    assert newsletter(["status", "--week", SAMPLE_WEEK], folder).returncode == 0


def test_missing_mailboxes_are_bounces_the_list_goes_on_and_the_issue_is_sent(
        tmp_path: Path, smtp_server: SmtpSink) -> None:
    """Missing mailboxes are a result of the send, not a failure: status says sent (exit 0)."""
    folder = project(tmp_path, smtp_server)
    for gone in READERS[1:]:
        smtp_server.fail_next(gone, *NO_SUCH_USER)

    result = ok(send(folder))

    assert "sent 1, skipped 0, failed 2, unconfirmed 0, temporary 0" in result.stdout
    assert "bounced 2" in result.stdout
    listed = ok(newsletter(["subscribers", "list", "--status", "bounced"], folder)).stdout
    assert READERS[1] in listed and READERS[2] in listed
    status = newsletter(["status", "--week", SAMPLE_WEEK], folder)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.startswith(f"{SAMPLE_WEEK}: sent\n")
    assert "sent 1, failed 2 (+0 to retry)" in status.stdout


@pytest.mark.slow  # four sends, three status reads
def test_a_stopped_run_with_unconfirmed_recipients_is_resumable(
        tmp_path: Path, smtp_server: SmtpSink) -> None:
    """An unconfirmed claim, then the quota: status says stopped (exit 4); a rerun finishes."""
    from datetime import UTC, datetime

    folder = project(tmp_path, smtp_server)
    with SqliteStore.open(folder / "data" / "subscribers.sqlite3") as store:
        crashed = store.find(READERS[0])
        assert crashed is not None and store.claim(SAMPLE_WEEK, crashed.id, datetime.now(UTC))
        store.mark_handed_over(SAMPLE_WEEK, crashed.id)
    smtp_server.fail_next(READERS[1], *smtp_server.DAILY_QUOTA, times=1000)
    assert send(folder).returncode == 4

    status = newsletter(["status", "--week", SAMPLE_WEEK], folder)
    assert status.returncode == 4, status.stdout + status.stderr
    assert status.stdout.startswith(f"{SAMPLE_WEEK}: stopped (resumable)")
    assert "unconfirmed 1" in status.stdout
    smtp_server.clear()
    ok(send(folder))
    # Left: one recipient whose message may or may not have arrived; a person decides.
    status = newsletter(["status", "--week", SAMPLE_WEEK], folder)
    assert status.returncode == 4 and "--resend-unconfirmed" in status.stdout
    ok(send(folder, "--resend-unconfirmed"))
    assert newsletter(["status", "--week", SAMPLE_WEEK], folder).returncode == 0
