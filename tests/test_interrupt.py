"""Ctrl-C during a send: a clean, resumable stop (exit 4), and the re-run finishes the list.
SIGINT comes once the SMTP sink holds the 11th and 12th replies (every thread mid-message).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.commands import clean_env, newsletter_cmd, newsletter_main, ok
from support.project import SAMPLE_WEEK, make_project, smtp_toml

from subscribers.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from support.servers import SmtpSink

COUNT = 120
#: Sent before the signal.
BEFORE = 10
CONCURRENCY = 2
SECRET = "interrupt-test-secret-0123456789abcdef"


@pytest.mark.subprocess  # the signal reaches a real process, whose handler is the point
def test_ctrl_c_stops_cleanly_and_a_rerun_finishes(tmp_path: Path, smtp_server: SmtpSink):
    make_project(tmp_path, extra=smtp_toml("127.0.0.1", smtp_server.port,
                                           f"concurrency = {CONCURRENCY}\n"))
    csv = tmp_path / "list.csv"
    csv.write_text("email,layout\n" + "".join(f"r{i}@example.org,en\n" for i in range(COUNT)))
    env = {"NEWSLETTER_SECRET": SECRET}
    ok(newsletter_main(["subscribers", "import", str(csv), "--confirmed"], tmp_path, **env))
    ok(newsletter_main(["build", "--week", SAMPLE_WEEK], tmp_path, **env))
    held = [smtp_server.pause_next(after=BEFORE) for _ in range(CONCURRENCY)]

    process = subprocess.Popen([*newsletter_cmd(), "send", "--week", SAMPLE_WEEK],
                               cwd=tmp_path, env=clean_env(**env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert all(pause.wait() for pause in held), "the send never reached the 11th message"
        process.send_signal(signal.SIGINT)
    finally:
        for pause in held:
            pause.release()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 4, out + err
    assert "Traceback" not in err
    assert "interrupted" in out + err and "run the same command again" in err
    first = len(smtp_server.received)
    # The held messages finish; the claims queued behind them (two per thread) may be sent
    # before the stop is seen; nothing after them is.
    assert BEFORE + CONCURRENCY <= first <= BEFORE + 2 * CONCURRENCY

    with SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3") as store:
        counts = store.ledger_counts(SAMPLE_WEEK)
    # Every claim was settled: in-flight messages finished, the rest were released.
    assert counts["sending"] == 0 and counts["unconfirmed"] == 0
    assert counts["sent"] == first

    rerun = ok(newsletter_main(["send", "--week", SAMPLE_WEEK], tmp_path, **env))
    assert f"sent {COUNT - first}, skipped {first}," in rerun.stdout
    assert len(smtp_server.received) == COUNT
    assert len({r.rcpt_tos for r in smtp_server.received}) == COUNT  # each once
