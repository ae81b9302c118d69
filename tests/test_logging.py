"""-v / -q and the log of a scheduled job, as the operator and the scheduler meet them.

What a command logs is checked in process (``newsletter_main``: stdout and stderr are streams
that are not terminals, as the pipes cron or systemd hand a job are); the operator's terminal
is a real process on a pseudo-terminal. A real HTTP server on loopback for the feed (200, then
304), a real aiosmtpd relay for the transport.
"""

from __future__ import annotations

import argparse
import logging
import os
import pty
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.commands import clean_env, newsletter_cmd, ok
from support.commands import newsletter_main as run
from support.http_server import Answer, HttpServer, Reply, Request
from support.project import SAMPLE_FEED, SAMPLE_WEEK, make_project

from pipeline.cli import parser
from pipeline.log import LineFormatter, safe_url

#: A line of the log when stderr is not a terminal: ISO 8601, UTC, milliseconds.
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S")
SECRET = "s" * 40
PASSWORD = "hunter2-smtp-password"
TOKEN = "feedtoken-0123456789"


def project(folder: Path, config: str = "", readers: int = 0) -> Path:
    """A project reading the sample feed, with ``readers`` confirmed subscribers."""
    make_project(folder, extra=config)
    if readers:
        csv = folder / "readers.csv"
        csv.write_text("email,layout\n" + "".join(f"reader{n}@example.org,en\n"
                                                  for n in range(readers)))
        ok(run(["subscribers", "import", str(csv), "--confirmed"], folder))
    return folder


# -- -q: results and errors only ------------------------------------------------------------


@pytest.mark.parametrize("args", [["-q", "build", "--week", SAMPLE_WEEK],
                                  ["build", "--week", SAMPLE_WEEK, "-q"],
                                  ["build", "--week", SAMPLE_WEEK]],
                         ids=["-q before", "-q after", "without -v"])
def test_a_build_prints_its_result_and_no_detail_unless_verbose(tmp_path, args):
    result = ok(run(args, project(tmp_path)))
    assert result.stdout.startswith(f"built {SAMPLE_WEEK}: ")
    assert "content_hash: " in result.stdout
    assert result.stderr == ""


def test_quiet_send_drops_notes_and_progress_but_keeps_the_summary(tmp_path):
    folder = project(tmp_path, readers=100)
    ok(run(["build", "--week", SAMPLE_WEEK], folder))
    result = ok(run(["-q", "send", "--week", SAMPLE_WEEK], folder))
    assert "sent 100, skipped 0, failed 0, unconfirmed 0" in result.stdout
    assert "NEWSLETTER_SECRET" not in result.stdout + result.stderr
    assert result.stderr == ""


def test_notes_and_progress_go_to_stderr_timestamped(tmp_path):
    """stdout holds only the run's results; notes and progress go to stderr, stamped for the log."""
    folder = project(tmp_path, readers=100)
    ok(run(["build", "--week", SAMPLE_WEEK], folder))
    result = ok(run(["send", "--week", SAMPLE_WEEK], folder))
    assert "sent 100," in result.stdout
    assert "NEWSLETTER_SECRET" not in result.stdout
    lines = result.stderr.splitlines()
    assert any(line.endswith("note: NEWSLETTER_SECRET is not set; links are signed with the "
                             "development key (fine for the local outbox, never for real "
                             "mail)") for line in lines), result.stderr
    assert any(" progress: 100/100 done, sent 100," in line for line in lines), result.stderr
    assert all(STAMPED.match(line) for line in lines), result.stderr


# -- -v: where the time and the bytes went --------------------------------------------------


def feed(request: Request) -> Reply:
    """The sample feed at /feed.atom (any query), 304 to a conditional request."""
    if not request.path.startswith("/feed.atom"):
        return Reply(404)
    if "if-none-match" in request.headers:
        return Reply(304, headers={"ETag": '"v1"'})
    return Reply(200, SAMPLE_FEED.read_bytes(),
                 {"Content-Type": "application/atom+xml", "ETag": '"v1"'})


@pytest.fixture
def feed_url(serve_http: Callable[[Answer], HttpServer]) -> str:
    return serve_http(feed).url("/feed.atom")


def test_verbose_build_names_the_config_each_fetch_and_the_stage_timings(tmp_path, feed_url):
    folder = project(tmp_path)
    url = f"{feed_url}?token={TOKEN}"
    first = ok(run(["-v", "build", "--week", SAMPLE_WEEK, "--feed", url], folder))
    second = ok(run(["build", "-v", "--week", SAMPLE_WEEK, "--feed", url], folder))
    for result in (first, second):
        assert f"debug: config: {(folder / 'newsletter.toml').resolve()}" in result.stderr
        for stage in ("read feeds", "rank", "render", "write", "build"):
            assert re.search(rf"debug: {stage} took \d+\.\d\d s$", result.stderr, re.M), \
                result.stderr
        assert TOKEN not in result.stderr  # a feed's token is no one's business in a log
        assert result.stdout.startswith(f"built {SAMPLE_WEEK}: ")
    assert f"debug: feed {feed_url}?…: HTTP 200, " in first.stderr
    assert f"debug: feed {feed_url}?…: HTTP 304, the cached copy" in second.stderr


@pytest.mark.subprocess  # its publish step runs Pagefind, a program of its own
def test_verbose_run_times_each_stage_and_names_the_transport(tmp_path):
    folder = project(tmp_path, readers=2)
    result = ok(run(["run", "--week", SAMPLE_WEEK, "--verbose"], folder))
    out = folder / "build" / "issues" / SAMPLE_WEEK / "outbox"
    assert f"debug: transport: outbox {out} opened; rate unlimited" in result.stderr
    for stage in ("build", "checks before publishing", "publish", "send"):
        assert re.search(rf"debug: {stage} took \d+\.\d\d s$", result.stderr, re.M), \
            result.stderr
    assert "reader0@example.org" not in result.stderr
    assert f"built {SAMPLE_WEEK}:" in result.stdout and "sent 2," in result.stdout


def test_no_secret_password_or_address_reaches_the_log(tmp_path, smtp_server_factory):
    sink = smtp_server_factory(users={"weekly": PASSWORD}, auth_require_tls=False)
    folder = project(tmp_path, '[site]\napp_url = "https://news.example.org/api"\n'
                     f'[delivery]\ntransport = "smtp"\n[smtp]\nhost = "{sink.host}"\n'
                     f'port = {sink.port}\nstarttls = false\nusername = "weekly"\n',
                     readers=2)
    ok(run(["build", "--week", SAMPLE_WEEK], folder))
    result = ok(run(["-v", "send", "--week", SAMPLE_WEEK], folder,
                    NEWSLETTER_SECRET=SECRET, NEWSLETTER_SMTP_PASSWORD=PASSWORD))
    assert "sent 2," in result.stdout and len(sink.received) == 2
    assert f"debug: transport: smtp 127.0.0.1:{sink.port} opened and probed" in result.stderr
    for secret in (SECRET, PASSWORD, "reader0@example.org", "reader1@example.org"):
        assert secret not in result.stderr


# -- where the log goes: a terminal or a scheduler's file ----------------------------------


@pytest.mark.subprocess
def test_no_timestamps_on_a_terminal(tmp_path):
    """stderr on a pseudo-terminal (the operator at the keyboard): plain lines."""
    folder = project(tmp_path)
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen([*newsletter_cmd(), "-v", "build", "--week", SAMPLE_WEEK],
                                   cwd=folder, env=clean_env(), stdout=subprocess.PIPE,
                                   stderr=follower, text=True)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        out = process.communicate(timeout=120)[0]
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert process.returncode == 0
    lines = b"".join(chunks).decode().splitlines()
    assert lines and lines[0] == f"debug: config: {(folder / 'newsletter.toml').resolve()}"
    assert not any(STAMPED.match(line) for line in lines), lines
    assert out.startswith(f"built {SAMPLE_WEEK}: ")


# -- errors stay one unprefixed line ---------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["-q"], ["-v"]], ids=["plain", "-q", "-v"])
def test_an_error_is_one_unprefixed_unstamped_line_after_any_debug_lines(tmp_path, flags):
    result = run([*flags, "build", "--week", "2026-W99"], project(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("newsletter: error: ") and "2026-W99" in lines[-1]
    assert len(lines) == 1 or flags == ["-v"], result.stderr
    assert all(STAMPED.match(line) for line in lines[:-1]), result.stderr
    assert "Traceback" not in result.stderr


def test_verbose_and_quiet_together_is_a_usage_error(tmp_path):
    result = run(["-v", "build", "-q"], project(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "newsletter: error: -v/--verbose and -q/--quiet contradict each other "
        "(see newsletter --help)"]


def test_every_command_takes_verbose_and_quiet():
    def walk(command, path):
        yield path, command
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])

    commands = list(walk(parser(), []))
    assert len(commands) > 15
    for path, command in commands:
        assert {"-v", "--verbose", "-q", "--quiet"} <= set(command._option_string_actions), path


# -- the formatter ---------------------------------------------------------------------------


def _record(level: int, message: str, *args: object) -> logging.LogRecord:
    record = logging.LogRecord("newsletter.x", level, __file__, 1, message, args, None)
    record.created = 1796286719.25  # 2026-12-03T08:31:59.250Z
    return record


def test_a_record_is_one_line_whatever_its_text():
    line = LineFormatter(timestamps=True).format(_record(logging.WARNING, "a %s", "b\nc\r\nd"))
    assert line == "2026-12-03T08:31:59.250Z newsletter: warning: a b c d"
    assert LineFormatter(timestamps=False).format(_record(logging.INFO, "note: x")) == "note: x"
    assert LineFormatter(timestamps=False).format(_record(logging.DEBUG, "x")) == "debug: x"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:pw@example.org:8443/feed.xml?token=t#f", "https://example.org:8443/feed.xml?…"),
    ("http://[::1]:8000/f", "http://[::1]:8000/f"),
    ("/srv/feeds/week.atom", "/srv/feeds/week.atom"),
])
def test_a_url_in_the_log_keeps_no_credentials(url, shown):
    assert safe_url(url) == shown
