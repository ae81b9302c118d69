"""Sharded sending and the run lock, as real processes on one SQLite store and one SMTP sink:
N shard workers reach everyone exactly once, a competing worker for a shard is refused with
exit 5, two `run`s started together send once. The set-up, and `newsletter status` merging the
parts, where no second process is the point, run in this one (``newsletter_main``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from support.commands import clean_env, newsletter_cmd, newsletter_main, run_newsletter
from support.project import SAMPLE_WEEK, make_project, smtp_toml

SECRET = {"NEWSLETTER_SECRET": "x" * 32}
COUNT = 40


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*newsletter_cmd(), *args], cwd=cwd, env=clean_env(**SECRET),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


@pytest.fixture
def project(tmp_path: Path, smtp_server) -> Path:
    # Unpaced: where a process must still be sending, a held reply keeps it so.
    make_project(tmp_path, extra=smtp_toml(smtp_server.host, smtp_server.port))
    addresses = [f"reader{n:02d}@example.org" for n in range(COUNT)]
    (tmp_path / "list.csv").write_text("email,layout\n" + "".join(f"{a},\n" for a in addresses))
    imported = newsletter_main(["subscribers", "import", "list.csv", "--confirmed"], tmp_path,
                               **SECRET)
    assert imported.returncode == 0, imported.stderr
    built = newsletter_main(["build", "--week", SAMPLE_WEEK], tmp_path, **SECRET)
    assert built.returncode == 0, built.stderr
    return tmp_path


@pytest.mark.subprocess
def test_shards_reach_everyone_once_and_a_competing_worker_is_refused(project, smtp_server):
    pause = smtp_server.pause_next()
    first = start(["send", "--week", SAMPLE_WEEK, "--shard", "1/2"], project)
    try:
        # Its first message is in and its reply held: the first worker holds shard 1's lease
        # and is sending, for as long as the rival takes to be refused.
        assert pause.wait(60), "the first worker sent nothing"
        code, _, err = finish(start(["send", "--week", SAMPLE_WEEK, "--shard", "1/2"], project))
    finally:
        pause.release()
    assert code == 5, err
    assert "shard 1/2" in err and "holds its lock" in err and "Traceback" not in err
    second = start(["send", "--week", SAMPLE_WEEK, "--shard", "2/2"], project)
    results = {name: finish(p) for name, p in (("first", first), ("second", second))}
    assert results["first"][0] == 0, results["first"][2]
    assert results["second"][0] == 0, results["second"][2]

    received = smtp_server.wait_for(COUNT)
    by_recipient: dict[str, int] = {}
    for message in received:
        for rcpt in message.rcpt_tos:
            by_recipient[rcpt] = by_recipient.get(rcpt, 0) + 1
    assert len(by_recipient) == COUNT and set(by_recipient.values()) == {1}

    folder = project / "build" / "issues" / SAMPLE_WEEK
    parts = {p.name: json.loads(p.read_text()) for p in folder.glob("send-report.*.json")}
    assert set(parts) == {"send-report.shard-1-of-2.json", "send-report.shard-2-of-2.json"}
    assert sum(part["sent"] for part in parts.values()) == COUNT
    assert all(part["sent"] > 0 for part in parts.values())

    status = run_newsletter(["status", "--week", SAMPLE_WEEK], project, **SECRET)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"{SAMPLE_WEEK}: sent" in status.stdout
    assert f"sent {COUNT}, failed 0" in status.stdout


def test_status_waits_for_the_missing_shard(project):
    sent = newsletter_main(["send", "--week", SAMPLE_WEEK, "--shard", "1/3"], project, **SECRET)
    assert sent.returncode == 0, sent.stderr
    status = newsletter_main(["status", "--week", SAMPLE_WEEK], project, **SECRET)
    assert status.returncode == 4
    assert "not fully sent" in status.stdout and "2/3, 3/3" in status.stdout


@pytest.mark.subprocess
def test_two_runs_started_together_send_once(project, smtp_server):
    pause = smtp_server.pause_next()
    runs = [start(["run", "--week", SAMPLE_WEEK], project) for _ in range(2)]
    try:
        # One run holds the lock and is sending, held at its first reply until the other
        # has given up: the two overlap however fast this machine is.
        assert pause.wait(60), "neither run sent anything"
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in runs) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        pause.release()
    results = sorted((finish(p) for p in runs), key=lambda r: r[0])
    assert [code for code, _, _ in results] == [0, 5], [r[2] for r in results]
    assert "holds its lock" in results[1][2]
    received = smtp_server.wait_for(COUNT)
    assert sorted(r for m in received for r in m.rcpt_tos) == sorted(
        f"reader{n:02d}@example.org" for n in range(COUNT))


@pytest.mark.subprocess
def test_status_of_a_week_not_built(tmp_path):
    status = run_newsletter(["status", "--week", "2026-W10"], make_project(tmp_path), **SECRET)
    assert status.returncode == 6 and "2026-W10: not built" in status.stdout
