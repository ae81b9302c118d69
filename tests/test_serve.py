"""``newsletter serve`` as an operator starts it: a real process on 127.0.0.1."""

from __future__ import annotations

import re
import socket
import sys
import time
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest
from support.app_server import free_port, let_go, request, serve_process
from support.commands import clean_env, newsletter_cmd, run_newsletter
from support.project import ROOT, make_project

from pipeline.web.serve import served_app_url


def project(folder: Path, app_url: str) -> Path:
    return make_project(
        folder, extra=f'[site]\nbase_url = "http://127.0.0.1:8000"\napp_url = "{app_url}"\n')


@pytest.mark.subprocess
def test_a_taken_port_is_one_line_and_exit_2_and_never_listening(tmp_path):
    folder = project(tmp_path, "http://127.0.0.1:8001")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_newsletter(["serve", "--port", str(port)], folder)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0]
    assert "listening" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.subprocess
def test_serve_port_puts_the_port_served_in_the_links(tmp_path):
    """The confirmation link must lead to the port that answers, not app_url's."""
    folder = project(tmp_path, "http://127.0.0.1:8001")
    port = let_go(free_port())  # for the `newsletter serve` process to bind
    with serve_process([*newsletter_cmd(), "serve", "--port", str(port)], port, cwd=folder,
                       env=clean_env()) as served:
        health = request("GET", f"http://127.0.0.1:{port}/healthz")
        assert (health.status, health.body) == (200, "ok")
        answer = request("POST", f"http://127.0.0.1:{port}/subscribe",
                         form={"email": "reader@example.org", "layout": "en"},
                         headers={"Origin": "http://127.0.0.1:8000"})
        assert answer.status == 200, answer.body
        outbox = folder / "build" / "outbox"
        deadline = time.monotonic() + 20  # the confirmation may leave after the answer
        while not list(outbox.glob("*.eml")) and time.monotonic() < deadline:
            time.sleep(0.1)
    err = served.err
    assert served.process.returncode == 0, err  # SIGTERM ends it cleanly
    assert "development key" in err and "Traceback" not in err
    assert f"http://127.0.0.1:{port}/subscribe (listening on 127.0.0.1:{port}" in err
    assert "links name the port served" in err
    [mail] = outbox.glob("*.eml")
    # Where the confirmation went, as a file to open; never its token, never the address.
    logged = re.search(r"confirm mail: (\S+\.eml)$", err, re.M)
    assert logged is not None, err
    assert Path(logged.group(1)).samefile(mail)
    assert "token=" not in err and "reader@" not in err
    text = BytesParser(policy=policy.default).parsebytes(mail.read_bytes())
    plain = text.get_body(("plain",))
    assert plain is not None
    body = plain.get_content()
    link_match = re.search(r"http://\S+/confirm\?token=\S+", body)
    assert link_match is not None, body
    link = link_match.group(0)
    assert link.startswith(f"http://127.0.0.1:{port}/confirm?token=")
    assert link.split("token=")[1] not in err


@pytest.mark.subprocess
def test_make_serve_serves_on_serve_port_and_says_what_else_links_to_app_url(tmp_path):
    """Form and mails link to P, and a note names what still links to app_url's 8001."""
    port = let_go(free_port())
    env = clean_env(NEWSLETTER_PATHS_BUILD_DIR=str(tmp_path / "build"),
                    NEWSLETTER_PATHS_DATA_DIR=str(tmp_path / "data"))
    make = ["make", "--no-print-directory", "-C", str(ROOT), "-o", "install",
            f"VENV={sys.prefix}", "serve", f"SERVE_PORT={port}"]
    with serve_process(make, port, env=env) as served:  # SIGTERM to make and its newsletter
        form = request("GET", f"http://127.0.0.1:{port}/subscribe")
        assert f'<form method="post" action="http://127.0.0.1:{port}/subscribe">' in form.body
    assert f"listening on 127.0.0.1:{port}" in served.err, served.err
    assert "[site] app_url names another port (http://127.0.0.1:8001)" in served.err
    assert f"NEWSLETTER_SITE_APP_URL=http://127.0.0.1:{port}" in served.err


@pytest.mark.parametrize(("app_url", "port", "expected"), [
    ("http://127.0.0.1:8001", 8001, "http://127.0.0.1:8001"),
    ("http://127.0.0.1:8001", 9000, "http://127.0.0.1:9000"),
    ("http://localhost:8001/api", 9000, "http://localhost:9000/api"),
    ("http://127.0.0.1", 80, "http://127.0.0.1"),
    ("http://127.0.0.1", 8001, "http://127.0.0.1:8001"),
    ("http://[::1]:8001/", 9000, "http://[::1]:9000/"),
    # A public address is what a proxy forwards to this port: never rewritten.
    ("https://news.example.org/api", 8001, "https://news.example.org/api"),
    ("http://10.0.0.5:8001", 9000, "http://10.0.0.5:8001"),
    ("", 9000, ""),
])
def test_served_app_url(app_url, port, expected):
    assert served_app_url(app_url, port) == expected
