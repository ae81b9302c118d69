"""Sign-ups through a real SMTP relay (aiosmtpd on 127.0.0.1): the confirmation mail a person
was promised leaves, or its loss is said out loud (pipeline/web/mail_queue.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest
from support.app_server import App, serve_app
from support.event_loop import run_apart
from test_app import Clock, relayed

from pipeline.errors import TemporaryFailure
from pipeline.web.mail_queue import MailQueue
from pipeline.week import iso_z

if TYPE_CHECKING:
    from support.servers import SmtpSink

SECRET = {"NEWSLETTER_SECRET": "s" * 32}


def quick() -> MailQueue:
    """Tries again at once, nearly: the test waits for the outcome, not for the clock."""
    return MailQueue(retries=3, first_wait=0.01)


def subscribe(app: App, address: str, *, settle: bool = True) -> None:
    answer = app.request("POST", "/subscribe", form={"email": address, "layout": "en"},
                         headers={"Origin": "http://127.0.0.1:8000"}, settle=settle)
    assert answer.status == 200 and "Check your inbox" in answer.body


def test_sign_ups_after_the_relay_dropped_its_idle_connections_all_get_their_mail(
        tmp_path, smtp_server_factory, caplog) -> None:
    sink: SmtpSink = smtp_server_factory(idle_timeout=0.2)
    caplog.set_level(logging.INFO, logger="newsletter.app")
    with serve_app(relayed(tmp_path, sink.port), environ=SECRET) as app:
        held = []
        for n in range(2):  # each holds its connection, so the burst pools three
            held.append(sink.pause_next(f"burst{n}@example.org"))
            subscribe(app, f"burst{n}@example.org", settle=False)
            assert held[-1].wait()
        subscribe(app, "burst2@example.org", settle=False)
        assert len(sink.wait_for(3)) == 3  # the two held ones are in: the third is too
        for pause in held:
            pause.release()
        app.settle()
        assert len(sink.peers) == 3
        for peer in sink.peers:
            assert sink.wait_closed(peer)
        for n in range(4):
            subscribe(app, f"after{n}@example.org")
    assert len(sink.received) == 7
    assert "not done" not in caplog.text


def test_a_sign_up_whose_relay_is_busy_is_tried_again_until_its_mail_leaves(
        tmp_path, smtp_server, caplog) -> None:
    smtp_server.refuse_connections("421 4.3.2 sink.test busy, try again later", times=2)
    caplog.set_level(logging.INFO, logger="newsletter.app")
    with serve_app(relayed(tmp_path, smtp_server.port), environ=SECRET,
                   mail_queue=quick()) as app:
        subscribe(app, "patient@example.org")
    (mail,) = smtp_server.received
    assert mail.rcpt_tos == ("patient@example.org",)
    assert caplog.text.count("subscribe: not done: TemporaryFailure") == 2
    assert "given up" not in caplog.text


def test_a_sign_up_whose_mail_never_leaves_is_an_error_naming_when_it_was_asked(
        tmp_path, unused_port, caplog) -> None:
    """...by its time (``subscribers export``'s created_at): an address is never logged."""
    clock = Clock()
    with serve_app(relayed(tmp_path, unused_port), environ=SECRET, mail_queue=quick(),
                   clock=clock) as app:
        subscribe(app, "lost@example.org")
        created = app.store.find("lost@example.org").created_at
    (given_up,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert given_up.getMessage() == (
        f"subscribe (asked at {iso_z(clock.now)}): given up after 4 tries: the person was "
        "told to check their inbox and got nothing; they stay pending until they ask again")
    assert created == clock.now
    assert caplog.text.count("subscribe: not done: SendingStopped") == 4
    assert "lost@" not in caplog.text


@pytest.mark.parametrize("code", [550, 553])
def test_a_mail_refused_for_good_is_not_tried_again(tmp_path, smtp_server, caplog,
                                                     code: int) -> None:
    smtp_server.fail_next("gone@example.org", code, "5.1.1 no such mailbox", at="RCPT")
    caplog.set_level(logging.INFO, logger="newsletter.app")
    with serve_app(relayed(tmp_path, smtp_server.port), environ=SECRET,
                   mail_queue=quick()) as app:
        subscribe(app, "gone@example.org")
    assert smtp_server.attempts("gone@example.org") == 1
    assert "refused for good" in caplog.text and "not done" not in caplog.text


def test_a_stopping_server_waits_for_no_retry_and_gives_up_out_loud(caplog) -> None:
    """``serve`` waits for this work on stop, and a container dies ten seconds after SIGTERM."""
    queue, tries = MailQueue(retries=4, first_wait=3600), []

    def job() -> object:
        tries.append(1)
        raise TemporaryFailure("relay down")

    async def stop_while_it_waits() -> None:
        running = asyncio.ensure_future(queue.put(job, "subscribe", "asked at T")())
        while not tries:
            await asyncio.sleep(0.01)
        queue.stop_waiting()
        await asyncio.wait_for(running, 30)

    run_apart(stop_while_it_waits())
    assert len(tries) == 2  # the first, then one more once told to stop
    (given_up,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert given_up.startswith("subscribe (asked at T): given up after 2 tries (the app "
                               "stopped): ")
