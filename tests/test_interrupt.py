"""Ctrl-C during a send: a clean, resumable stop (exit 4), and the re-run finishes the list."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SAMPLE_FEED, SAMPLE_WEEK, clean_env, newsletter_cmd

from subscribers.store.sqlite import SqliteStore

COUNT = 120


@pytest.mark.subprocess
def test_ctrl_c_stops_cleanly_and_a_rerun_finishes(tmp_path: Path):
    (tmp_path / "newsletter.toml").write_text(
        f'[feed]\nurls = ["{SAMPLE_FEED}"]\n[delivery]\nmax_rate = 20\nconcurrency = 2\n')
    csv = tmp_path / "list.csv"
    csv.write_text("email,layout\n" + "".join(f"r{i}@example.org,en\n" for i in range(COUNT)))
    env = clean_env()
    for args in (["subscribers", "import", str(csv), "--confirmed"],
                 ["build", "--week", SAMPLE_WEEK]):
        subprocess.run([*newsletter_cmd(), *args], cwd=tmp_path, env=env, check=True,
                       capture_output=True, timeout=60)
    outbox = tmp_path / "build" / "issues" / SAMPLE_WEEK / "outbox"
    process = subprocess.Popen([*newsletter_cmd(), "send", "--week", SAMPLE_WEEK],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(outbox.glob("*.eml"))) < 10:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 4, out + err
    assert "Traceback" not in err
    assert "interrupted" in out + err and "run the same command again" in err
    first = len(list(outbox.glob("*.eml")))
    assert 10 <= first < COUNT

    store = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    try:
        counts = store.ledger_counts(SAMPLE_WEEK)
        # Every claim was settled: in-flight messages finished, the rest were released.
        assert counts["sending"] == 0 and counts["unconfirmed"] == 0
        assert counts["sent"] == first
    finally:
        store.close()

    rerun = subprocess.run([*newsletter_cmd(), "send", "--week", SAMPLE_WEEK], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert f"sent {COUNT - first}, skipped {first}," in rerun.stdout
    assert len(list(outbox.glob("*.eml"))) == COUNT
