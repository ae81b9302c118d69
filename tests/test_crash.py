"""A real ``newsletter send`` killed with SIGKILL mid-run, then run again.

The guarantee (README, "The delivery guarantee"): after the re-run every subscriber has the
issue exactly once, but those reported unconfirmed (0 or 1 copies until
``--resend-unconfirmed``; at most one per sending thread and kill), whom every report and
``status`` name. Each kill comes once the SMTP sink holds a final reply, never after a guessed
wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.commands import clean_env, newsletter_cmd, newsletter_main, ok
from support.project import SAMPLE_WEEK, make_project, smtp_toml
from support.servers import recipients

from pipeline.model import LAYOUTS
from subscribers.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from support.servers import SmtpSink

COUNT = 300
#: How many messages the sink must have before the first run is killed.
KILL_AFTER = 40
#: ``[delivery] concurrency``: the sending threads, so the most one kill can catch in flight.
CONCURRENCY = 4
SECRET = "crash-test-secret-0123456789abcdef"


@dataclass
class Project:
    folder: Path
    emails: list[str]

    @property
    def issue(self) -> Path:
        return self.folder / "build" / "issues" / SAMPLE_WEEK

    def newsletter(self, *args: str) -> subprocess.CompletedProcess[str]:
        return newsletter_main(list(args), self.folder, NEWSLETTER_SECRET=SECRET)

    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.issue / "send-report.json").read_text(
            encoding="utf-8"))
        return report

    def ledger(self) -> dict[str, str]:
        """Ledger status by address (the store opened after every process has ended)."""
        with SqliteStore.open(self.folder / "data" / "subscribers.sqlite3") as store:
            emails = {s.id: s.email.lower() for s in store.iter_subscribers()}
            return {emails[sid]: entry.status
                    for sid, entry in store.ledger(SAMPLE_WEEK).items()}

    def emails_of(self, subscriber_ids: Iterable[str]) -> set[str]:
        with SqliteStore.open(self.folder / "data" / "subscribers.sqlite3") as store:
            found = [store.get(sid) for sid in subscriber_ids]
        assert all(found)
        return {s.email.lower() for s in found if s}


@pytest.fixture
def project(tmp_path: Path, smtp_server: SmtpSink) -> Project:
    make_project(tmp_path, extra=smtp_toml("127.0.0.1", smtp_server.port,
                                           f"concurrency = {CONCURRENCY}\n"))
    emails = [f"reader{n:03d}@example.com" for n in range(COUNT)]
    csv = tmp_path / "list.csv"
    csv.write_text("email,layout\n" + "".join(
        f"{email},{LAYOUTS[n % len(LAYOUTS)]}\n" for n, email in enumerate(emails)),
        encoding="utf-8")
    made = Project(tmp_path, emails)
    ok(made.newsletter("subscribers", "import", str(csv), "--confirmed"))
    ok(made.newsletter("build", "--week", SAMPLE_WEEK))
    return made


def kill_mid_run(project: Project, sink: SmtpSink, kill_after: int = KILL_AFTER,
                 held: int = 1) -> int:
    """Start ``newsletter send`` and SIGKILL it once ``held`` messages after the sink's
    ``kill_after``-th wait for their final reply (arrived, unanswered); how many the sink had
    by then."""
    pauses = [sink.pause_next(after=kill_after) for _ in range(held)]
    with (project.folder / "first-run.log").open("w") as log:
        process = subprocess.Popen([*newsletter_cmd(), "send", "--week", SAMPLE_WEEK],
                                   cwd=project.folder,
                                   env=clean_env(NEWSLETTER_SECRET=SECRET), stdout=log,
                                   stderr=log)
        try:
            for pause in pauses:
                assert pause.wait(), (project.folder / "first-run.log").read_text()
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        finally:
            process.kill()  # no-op once it is dead; never leave it running on a failure
            process.wait(timeout=10)
            for pause in pauses:  # answered to a dead connection
                pause.release()
    assert process.returncode == -signal.SIGKILL
    got = len(sink.received)
    assert kill_after + held <= got < COUNT, f"killed after {got} messages: not mid-run"
    return got


def rerun_and_check(project: Project, earlier: Counter[str], sink: SmtpSink
                    ) -> tuple[set[str], Counter[str]]:
    """Run send again to the end and check the guarantee; (unconfirmed, copies by address)."""
    result = ok(project.newsletter("send", "--week", SAMPLE_WEEK))
    report = project.report()
    assert report["stopped"] is None
    unconfirmed = project.emails_of(report["unconfirmed_ids"])
    listed = result.stdout.partition("--resend-unconfirmed sends them again):\n")[2]
    shown = {line.strip().lower() for line in listed.splitlines() if line.startswith("  ")}
    assert shown == unconfirmed  # the operator is told who they are

    copies = earlier + recipients(sink.received)
    for email in project.emails:
        if email in unconfirmed:
            assert copies[email] in (0, 1), email
        else:
            assert copies[email] == 1, email
    assert set(copies) <= set(project.emails)
    ledger = project.ledger()
    assert set(ledger) == set(project.emails)
    assert {e for e, status in ledger.items() if status != "sent"} == unconfirmed
    assert {ledger[e] for e in unconfirmed} <= {"unconfirmed"}
    return unconfirmed, copies


def resend_unconfirmed(project: Project, earlier: Counter[str], sink: SmtpSink,
                       unconfirmed: set[str], before: Counter[str]) -> None:
    result = ok(project.newsletter("send", "--week", SAMPLE_WEEK, "--resend-unconfirmed"))
    assert f"sent {len(unconfirmed)}, skipped {COUNT - len(unconfirmed)}," in result.stdout
    after = earlier + recipients(sink.received)
    assert min(after[email] for email in project.emails) >= 1  # nobody is left without it
    for email in project.emails:  # one more copy for each unconfirmed reader, for them only
        assert after[email] == before[email] + (email in unconfirmed), email
    assert set(project.ledger().values()) == {"sent"}


@pytest.mark.subprocess  # a SIGKILL ends a real process: what it leaves behind is the point
@pytest.mark.parametrize("held", [1, CONCURRENCY], ids=["one-held", "every-thread-held"])
def test_killed_mid_run_then_rerun_sends_each_once(project: Project, smtp_server: SmtpSink,
                                                   held: int) -> None:
    """The kill comes while ``held`` messages have arrived and wait for their answer (the other
    threads wherever it finds them): each was delivered without the sender knowing it."""
    got = kill_mid_run(project, smtp_server, held=held)
    if held == CONCURRENCY:  # every thread was held: nothing else went out
        assert got == KILL_AFTER + CONCURRENCY
    earlier = recipients(smtp_server.received)
    caught = {r.rcpt_tos[0].lower() for r in smtp_server.received[KILL_AFTER:KILL_AFTER + held]}
    smtp_server.clear()  # what arrived is kept in `earlier`

    unconfirmed, copies = rerun_and_check(project, earlier, smtp_server)

    # Only the messages in the transport call can be caught: one per sending thread at most
    # (the claims the run keeps ahead of the transport are released, not withheld).
    assert caught <= unconfirmed and len(unconfirmed) <= CONCURRENCY
    assert all(copies[email] == 1 for email in caught)
    resend_unconfirmed(project, earlier, smtp_server, unconfirmed, copies)


@pytest.mark.slow  # five sending processes killed in turn, each followed by a rerun
@pytest.mark.subprocess
def test_five_kills_withhold_at_most_one_message_per_thread_each_and_name_them_all(
        project: Project, smtp_server: SmtpSink) -> None:
    withheld: list[int] = []
    held = [1 + kill % CONCURRENCY for kill in range(5)]  # 1, 2, 3, 4, 1 threads held
    for kill, holding in enumerate(held, start=1):
        kill_mid_run(project, smtp_server, kill_after=kill * 25, held=holding)
        # What the next run's start does: settle the claims the dead run left.
        with SqliteStore.open(project.folder / "data" / "subscribers.sqlite3") as store:
            withheld.append(store.expire_in_flight(SAMPLE_WEEK, datetime.now(UTC)))
    # Each kill withholds the messages it held, and at most one per thread.
    assert all(h <= n <= CONCURRENCY for h, n in zip(held, withheld, strict=True)), withheld
    earlier = recipients(smtp_server.received)
    smtp_server.clear()

    unconfirmed, _ = rerun_and_check(project, earlier, smtp_server)

    # The report of the last run names every kill's unconfirmed recipients, not its own only.
    assert len(unconfirmed) == sum(withheld) == project.report()["unconfirmed"]
    status = project.newsletter("status", "--week", SAMPLE_WEEK)
    # Not fully sent (4): the unconfirmed wait for a person's --resend-unconfirmed.
    assert status.returncode == 4, status.stdout + status.stderr
    assert "--resend-unconfirmed" in status.stdout
    for subscriber_id in project.report()["unconfirmed_ids"]:
        assert subscriber_id in status.stdout
