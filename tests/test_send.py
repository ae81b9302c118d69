"""The send loop against the real SQLite store and real transports on loopback (an aiosmtpd
sink, a moto server): what the server received and what the ledger says. Backoff and pacing
waits are recorded, never slept.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

import pytest
from support.project import SAMPLE_WEEK, sample_settings
from support.servers import FakeTime, recipients

from pipeline.config import Settings
from pipeline.core.email.message import Messages
from pipeline.errors import BlockedError, SendingMisconfigured
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from pipeline.stages.preflight import send_rate
from pipeline.stages.send import MAX_ATTEMPTS, Sender, SendOptions, check_gates, send_tests
from pipeline.stages.send_report import SendReport, stop_error
from pipeline.transport import Outgoing, Transport
from pipeline.transport.ses import SesTransport
from pipeline.transport.smtp import SmtpTransport
from subscribers.model import Subscriber
from subscribers.store.sqlite import SqliteStore
from subscribers.tokens import Keys, verify_token

if TYPE_CHECKING:
    from support.servers import MotoServer, SmtpSink

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
APP_URL = "https://news.example.org/app"
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "send-loop-test-secret-0123456789"})
GET_ACCOUNT = {
    "SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0, "SentLast24Hours": 0.0},
    "SendingEnabled": True,
    "ProductionAccessEnabled": True,
    "EnforcementStatus": "HEALTHY",
    "DedicatedIpAutoWarmupEnabled": False,
}


# -- set-up ------------------------------------------------------------------------------------


def configure(folder: Path, extra: str = "") -> Settings:
    """Settings read from a newsletter.toml in ``folder``: the sample feed, an https app."""
    return sample_settings(folder, extra=f'[site]\napp_url = "{APP_URL}"\n{extra}')


def build_issue(settings: Settings, out: Path) -> BuiltIssue:
    return load_built(build(settings, week_id=SAMPLE_WEEK, out=out).out_dir)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return configure(tmp_path)


@pytest.fixture
def to_send(settings: Settings, tmp_path: Path) -> BuiltIssue:
    """The sample week built for this test alone (a send writes beside it)."""
    return build_issue(settings, tmp_path / "issue")


@pytest.fixture
def messages(to_send: BuiltIssue, settings: Settings) -> Messages:
    return Messages(to_send, settings.site, settings.delivery, KEYS)


@pytest.fixture
def store(tmp_path: Path):
    opened = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    yield opened
    opened.close()


#: :func:`run` on this test's issue, store and messages: ``send(transport, **options)``.
Send = Callable[..., SendReport]


@pytest.fixture
def send(to_send: BuiltIssue, store: SqliteStore, messages: Messages) -> Send:
    return partial(run, to_send, store, messages)


@pytest.fixture
def smtp(smtp_server: SmtpSink):
    transport = SmtpTransport(smtp_server.settings(), None, timeout=10.0)
    yield transport
    transport.close()


@pytest.fixture
def ses(moto_server: MotoServer):
    transport = SesTransport("")
    yield transport
    transport.close()


def subscribe(store: SqliteStore, count: int, *, status: str = "active",
              prefix: str = "reader") -> list[Subscriber]:
    """``count`` subscribers, layouts taken in turn, sorted by id (the order send walks)."""
    made = []
    for n in range(count):
        initial = "pending" if status == "pending" else "active"
        added = store.add(f"{prefix}{n}@example.com", LAYOUTS[n % len(LAYOUTS)],
                          status=initial, source="test", now=NOW).subscriber
        assert added is not None
        if status not in ("pending", "active"):
            added = store.set_status(added.id, status, NOW)
        made.append(added)
    return sorted(made, key=lambda s: s.id)


def hooked(transport: SmtpTransport, before: Callable[[Outgoing], None]) -> SmtpTransport:
    """``transport``, running ``before(message)`` just before each message is handed over."""
    send = transport.send

    def send_after(message: Outgoing) -> str:
        before(message)
        return send(message)

    transport.send = send_after  # type: ignore[method-assign]
    return transport


def run(to_send: BuiltIssue, store: SqliteStore, messages: Messages, transport: Transport, *,
        concurrency: int = 4, rate: float | None = None, sleep: Callable[[float], None] | None
        = None, time: FakeTime | None = None, retry_seconds: float = 600.0,
        **options: Any) -> SendReport:
    """One run of the send loop on a :class:`FakeTime`; each wait also goes to ``sleep``."""
    fake = time or FakeTime()

    def waits(seconds: float) -> None:
        if sleep is not None:
            sleep(seconds)
        fake.sleep(seconds)

    sender = Sender(to_send, store, transport, messages, rate=rate, concurrency=concurrency,
                    sleep=waits, monotonic=fake.clock, retry_seconds=retry_seconds)
    return sender.run(SendOptions(**options))


def once_each(subscribers: Iterable[Subscriber]) -> Counter[str]:
    return Counter({s.email.lower(): 1 for s in subscribers})


def token_of(url: str, path: str) -> str:
    parsed = urlparse(url)
    assert parsed.scheme == "https" and f"{parsed.scheme}://{parsed.netloc}" + \
        parsed.path == f"{APP_URL}/{path}", url
    (token,) = parse_qs(parsed.query)["token"]
    return token


# -- SMTP ----------------------------------------------------------------------------------------


def test_each_active_subscriber_gets_one_message_in_their_layout(
        smtp_server: SmtpSink, smtp: SmtpTransport, to_send: BuiltIssue, store: SqliteStore,
        send: Send) -> None:
    active = subscribe(store, 30)
    others = (subscribe(store, 3, status="pending", prefix="pending")
              + subscribe(store, 3, status="unsubscribed", prefix="gone"))
    subjects = json.loads((to_send.folder / "issue.json").read_text(encoding="utf-8"))["subject"]

    report = send(smtp)

    assert (report.sent, report.skipped, report.failed, report.unconfirmed) == (30, 0, 0, 0)
    assert report.stopped is None
    received = smtp_server.received
    assert recipients(received) == once_each(active)
    by_email = {s.email.lower(): s for s in active}
    unsubscribe_links = set()
    queue_ids = {}
    for record in received:
        subscriber = by_email[record.rcpt_tos[0].lower()]
        queue_ids[subscriber.id] = record.queue_id
        message = record.message()
        assert message["To"] == subscriber.email
        assert message["Subject"] == subjects[subscriber.layout]
        assert record.mail_from == "weekly@example.org"
        parts = {part.get_content_type(): part.get_content() for part in message.iter_parts()}
        assert set(parts) == {"text/plain", "text/html"}
        assert all(body.strip() for body in parts.values())

        header = str(message["List-Unsubscribe"])
        assert header.startswith("<") and header.endswith(">") and "," not in header
        url = header[1:-1]
        assert verify_token(KEYS, token_of(url, "unsubscribe"), "unsubscribe", NOW) \
            == subscriber.id
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        # The same link is visible in both parts, and the preferences link is this reader's.
        assert url in parts["text/plain"] and f'href="{url}"' in parts["text/html"]
        (preferences,) = set(re.findall(rf"{re.escape(APP_URL)}/preferences\?token=[a-z2-7]+",
                                        parts["text/plain"]))
        assert verify_token(KEYS, token_of(preferences, "preferences"), "preferences", NOW) \
            == subscriber.id
        unsubscribe_links.add(url)
    assert len(unsubscribe_links) == 30  # every reader has their own link

    ledger = store.ledger(SAMPLE_WEEK)
    assert set(ledger) == {s.id for s in active}
    assert not {s.id for s in others} & set(ledger)
    assert {entry.status for entry in ledger.values()} == {"sent"}
    assert {sid: entry.message_id for sid, entry in ledger.items()} == queue_ids

    for rerun in (send(smtp), send(smtp, resend_unconfirmed=True)):  # nothing left to send
        assert (rerun.sent, rerun.skipped, rerun.failed, rerun.unconfirmed) == (0, 30, 0, 0)
    assert recipients(smtp_server.received) == once_each(active)


def test_throttling_is_retried_with_growing_backoff_and_none_twice(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    subscribers = subscribe(store, 12)
    throttled = subscribers[::3]
    for subscriber in throttled:
        smtp_server.fail_next(subscriber.email, *smtp_server.THROTTLED, times=2)
    clock = FakeTime()

    report = send(smtp, concurrency=1, time=clock)

    assert (report.sent, report.failed, report.temporary, report.unconfirmed) == (12, 0, 0, 0)
    assert recipients(smtp_server.received) == once_each(subscribers)
    for subscriber in subscribers:
        assert smtp_server.attempts(subscriber.email) == (3 if subscriber in throttled else 1)
    # Two waits per throttled reader, none for the others; all positive. A success ends
    # the streak, so each reader's waits start again small: the second at least the first.
    waits = clock.slept
    assert len(waits) == 2 * len(throttled) and all(s > 0 for s in waits)
    assert all(second >= first for first, second in zip(waits[::2], waits[1::2], strict=True))
    assert max(waits[::2]) <= 1.0 < min(waits[1::2]) * 2  # 0.5-1 s, then 1-2 s
    assert {e.status for e in store.ledger(SAMPLE_WEEK).values()} == {"sent"}


def test_a_throttled_message_waits_for_its_retry_as_not_handed_over(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, tmp_path: Path,
        send: Send) -> None:
    """A 454 sent nothing: a crash during its backoff must release the claim, not withhold it."""
    (reader,) = subscribe(store, 1)
    smtp_server.fail_next(reader.email, *smtp_server.THROTTLED)
    seen: list[int] = []

    def sleep(seconds: float) -> None:  # the backoff: look at the file as a crash would
        conn = sqlite3.connect(tmp_path / "data" / "subscribers.sqlite3")
        try:
            ((status, handed),) = conn.execute("SELECT status, handed_over FROM ledger")
        finally:
            conn.close()
        assert status == "sending"
        seen.append(handed)

    report = send(smtp, concurrency=1, sleep=sleep)

    assert seen == [0] and report.sent == 1
    assert smtp_server.attempts(reader.email) == 2


def test_a_reader_throttled_past_the_walk_is_retried_after_it_and_delivered_once(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    """After MAX_ATTEMPTS, a refused message is retried in the rounds after the shared cooldown."""
    subscribers = subscribe(store, 5)
    victim = subscribers[2]
    smtp_server.fail_next(victim.email, *smtp_server.THROTTLED, times=MAX_ATTEMPTS + 1)

    report = send(smtp, concurrency=2)

    assert (report.sent, report.failed, report.temporary) == (5, 0, 0)
    assert report.failures == [] and report.retried_for_s > 0
    assert smtp_server.attempts(victim.email) == MAX_ATTEMPTS + 2
    assert recipients(smtp_server.received) == once_each(subscribers)
    assert stop_error(report) is None


def test_a_relay_that_refuses_everything_stops_the_walk_resumably(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    """No crawl through the list a minute a message: it stops once past retry_seconds."""
    subscribers = subscribe(store, 40)
    smtp_server.refuse_connections(times=100_000)
    clock = FakeTime()

    report = send(smtp, concurrency=2, time=clock, retry_seconds=120)

    assert report.stopped is not None and "refused every message" in report.stopped
    assert "421 4.3.2" in report.stopped and report.stop_exit == 4
    assert report.sent == 0 and report.failed == 0
    tried = report.temporary + report.released
    assert 0 < tried < 12  # a few claims, not the whole list marked failed
    assert sum(clock.slept) < 120 + 2 * 60  # stopped about when the limit passed
    ledger = store.ledger(SAMPLE_WEEK)
    assert {e.status for e in ledger.values()} <= {"failed"}
    assert not any(e.permanent for e in ledger.values())
    error = stop_error(report)
    assert error is not None and error.exit_code == 4

    smtp_server.clear()
    again = send(smtp, concurrency=2)

    assert (again.sent, again.failed, again.temporary, again.stopped) == (40, 0, 0, None)
    assert recipients(smtp_server.received) == once_each(subscribers)


def test_a_refusal_no_rerun_can_cure_stops_with_exit_2_and_fails_nobody(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    subscribers = subscribe(store, 6)
    handed: list[str] = []

    def refuse_from_the_third(message: Outgoing) -> None:
        handed.append(message.recipient)
        if len(handed) >= 3:
            raise SendingMisconfigured("smtp relay: login as 'weekly' refused: 535 5.7.8 "
                                       "Authentication failed; check [smtp] username")

    report = send(hooked(smtp, refuse_from_the_third), concurrency=1)

    assert report.stop_exit == 2 and "535 5.7.8" in (report.stopped or "")
    assert (report.sent, report.failed, report.temporary) == (2, 0, 0)
    error = stop_error(report)
    assert error is not None and error.exit_code == 2
    assert "fix the configuration" in str(error)
    # The refused claim was released: the ledger holds only what was sent.
    assert {e.status for e in store.ledger(SAMPLE_WEEK).values()} == {"sent"}
    assert len(store.ledger(SAMPLE_WEEK)) == 2 < len(subscribers)


#: Relay limits as Postfix enforces them (the sink's options), the readers and the workers.
RELAY_LIMITS: dict[str, tuple[dict[str, Any], int, int]] = {
    # smtpd_client_message_rate_limit: 4 messages per 2 s. Retrying a message a few times a
    # second apart cannot outlast the window; the shared cooldown and the rounds can.
    "message rate": ({"message_rate": (4, 2.0)}, 10, 3),
    # smtpd_client_connection_count_limit = 2 against 4 workers, and [smtp] max_connections
    # set to match, as docs/operations.md tells the operator: no connection is refused.
    "connection count": ({"max_connections": 2}, 16, 4),
}


@pytest.mark.parametrize("limit", sorted(RELAY_LIMITS))
def test_a_relay_limit_is_waited_out_and_everyone_gets_one_copy(
        smtp_server_factory: Callable[..., SmtpSink], to_send: BuiltIssue, store: SqliteStore,
        messages: Messages, limit: str) -> None:
    """The relay's rate window runs on a clock shared with the sender, moved only by its waits."""
    options, readers, workers = RELAY_LIMITS[limit]
    waits: dict[str, Any] = {}
    if "message_rate" in options:
        fake = FakeTime()
        options = {**options, "clock": fake.clock}
        waits = {"sleep": fake.sleep, "monotonic": fake.clock}
    sink = smtp_server_factory(**options)
    subscribers = subscribe(store, readers)
    transport = SmtpTransport(sink.settings(max_connections=options.get("max_connections", 0)),
                              None, timeout=10.0)
    try:
        sender = Sender(to_send, store, transport, messages, rate=None, concurrency=workers,
                        retry_seconds=120, **waits)
        report = sender.run(SendOptions())
    finally:
        transport.close()

    # The rate limit refuses some and is waited out; the capped pool is never refused, and
    # never opens more connections than the relay allows.
    assert (sink.limited > 0) == ("message_rate" in options)
    assert len(sink.peers) <= options.get("max_connections", workers)
    assert (report.sent, report.failed, report.temporary, report.stopped) \
        == (readers, 0, 0, None)
    assert recipients(sink.received) == once_each(subscribers)


def test_a_mailbox_that_does_not_exist_is_marked_bounced_and_gets_no_later_issue(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    """550 5.1.1 at RCPT is a bounce; a 550 5.7.1 policy refusal fails this message only, for
    good, and the run goes on."""
    subscribers = subscribe(store, 4)
    gone, refused = subscribers[1], subscribers[2]
    smtp_server.fail_next(gone.email, *smtp_server.NO_SUCH_USER)
    smtp_server.fail_next(refused.email, 550, "5.7.1 Message rejected by policy")

    report = send(smtp, concurrency=2)

    assert (report.sent, report.failed, report.bounced, report.temporary, report.unconfirmed,
            report.stopped) == (2, 2, 1, 0, 0, None)
    assert recipients(smtp_server.received) == once_each(
        s for s in subscribers if s not in (gone, refused))
    by_id = {f["subscriber"]: f for f in report.failures}
    assert by_id[gone.id]["bounced"] and by_id[gone.id]["permanent"]
    assert not by_id[refused.id]["bounced"] and by_id[refused.id]["permanent"]
    gone_now, refused_now = store.get(gone.id), store.get(refused.id)
    assert gone_now is not None and gone_now.status == "bounced"
    assert refused_now is not None and refused_now.status == "active"
    assert store.feedback_counts(SAMPLE_WEEK)["bounce"] == 1  # in the issue's bounce rate
    assert "bounced 1 (of the failed)" in report.summary()
    # send-report.json "may be shared": NO_SUCH_USER quotes the address; the report does not.
    assert "550" in by_id[gone.id]["reason"] and "550" in by_id[refused.id]["reason"]
    assert gone.email.lower() not in report.to_json().decode().lower()
    assert stop_error(report) is None  # the list went through

    # The next week's issue goes to everyone still active, not to the dead mailbox.
    active = {s.id for s in store.iter_subscribers(status="active")}
    assert gone.id not in active and refused.id in active
    entry = store.ledger_entry(SAMPLE_WEEK, refused.id)
    assert entry is not None and entry.status == "failed" and entry.permanent

    again = send(smtp)

    assert (again.sent, again.skipped, again.failed) == (0, 3, 0)
    assert smtp_server.attempts(refused.email) == 1  # never asked again
    entry = store.ledger_entry(SAMPLE_WEEK, refused.id)
    assert entry is not None and entry.status == "failed"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_daily_quota_stops_resumably_and_a_rerun_finishes_the_list(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, concurrency: int,
        send: Send) -> None:
    subscribers = subscribe(store, 20)
    for subscriber in subscribers[8:]:  # the day's quota runs out after 8 messages
        smtp_server.fail_next(subscriber.email, *smtp_server.DAILY_QUOTA)

    report = send(smtp, concurrency=concurrency)

    assert report.stopped is not None and "Daily message quota exceeded" in report.stopped
    assert report.failed == 0 and report.unconfirmed == 0
    # The refused one (and any claimed meanwhile) was let go: counted, not lost.
    assert report.released >= 1 and "released" in report.summary()
    first = smtp_server.received
    delivered = recipients(first)
    assert 0 < report.sent == len(first) < 20
    if concurrency == 1:
        assert delivered == once_each(subscribers[:8])
    # No claim is left behind: only what went out is in the ledger.
    ledger = store.ledger(SAMPLE_WEEK)
    assert store.ledger_counts(SAMPLE_WEEK)["sending"] == 0
    assert {e.status for e in ledger.values()} == {"sent"}
    by_id = {s.id: s.email.lower() for s in subscribers}
    assert {by_id[sid] for sid in ledger} == set(delivered)

    smtp_server.clear()  # the quota is lifted (a new day)
    again = send(smtp, concurrency=concurrency)

    assert again.stopped is None
    assert (again.sent, again.skipped, again.failed) == (20 - report.sent, report.sent, 0)
    assert delivered + recipients(smtp_server.received) == once_each(subscribers)
    assert {e.status for e in store.ledger(SAMPLE_WEEK).values()} == {"sent"}
    assert len(store.ledger(SAMPLE_WEEK)) == 20


def test_an_unsubscribe_during_the_run_is_honoured(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    subscribers = subscribe(store, 10)
    first = subscribers[0]
    # The next reader (most likely claimed already) and the last one (still ahead in the
    # list the run read at its start) unsubscribe while the first message goes.
    leaving = [subscribers[1], subscribers[-1]]

    def unsubscribe_them(message: Outgoing) -> None:
        if message.recipient == first.email:
            for subscriber in leaving:
                store.set_status(subscriber.id, "unsubscribed", NOW)

    report = send(hooked(smtp, unsubscribe_them), concurrency=1)

    # Neither was done by an earlier run: they left the list, which is not "skipped".
    assert (report.sent, report.skipped, report.left, report.failed) == (8, 0, 2, 0)
    assert "left the list 2" in report.summary()
    for subscriber in leaving:
        assert smtp_server.for_recipient(subscriber.email) == []
        assert store.ledger_entry(SAMPLE_WEEK, subscriber.id) is None
    assert recipients(smtp_server.received) == once_each(
        s for s in subscribers if s not in leaving)


@pytest.mark.slow  # its first run waits out a reply timeout
def test_no_answer_after_the_data_is_unconfirmed_named_by_every_run_and_resent_only_when_asked(
        smtp_server: SmtpSink, store: SqliteStore, send: Send) -> None:
    subscribers = subscribe(store, 4)
    slow = subscribers[1]
    pause = smtp_server.pause_next(slow.email)  # answered only after the client gave up
    transport = SmtpTransport(smtp_server.settings(), None, timeout=0.5)
    try:
        report = send(transport, concurrency=1)
        pause.release()
        assert (report.sent, report.unconfirmed, report.failed) == (3, 1, 0)
        assert report.unconfirmed_ids == [slow.id]
        entry = store.ledger_entry(SAMPLE_WEEK, slow.id)
        assert entry is not None and entry.status == "unconfirmed"
        assert "may have accepted" in (entry.reason or "")
        smtp_server.wait_for(4)
        # The server did keep it: that is why it is not sent again by itself. The transport
        # recovered: the readers after it went out.
        assert recipients(smtp_server.received) == once_each(subscribers)
        assert smtp_server.attempts(slow.email) == 1
        subscribe(store, 2, prefix="new")

        dry = send(transport, dry_run=True)
        asked = send(transport, dry_run=True, resend_unconfirmed=True)

        assert (dry.sent, dry.skipped, dry.unconfirmed, dry.unconfirmed_ids) \
            == (2, 3, 1, [slow.id])
        assert (asked.sent, asked.skipped, asked.unconfirmed) == (3, 3, 0)

        plain = send(transport, concurrency=1)

        # Not sent again, not forgotten: still named, counted once (not also as skipped).
        assert plain.unconfirmed_ids == [slow.id]
        assert (plain.sent, plain.skipped, plain.failed, plain.unconfirmed) == (2, 3, 0, 1)
        assert json.loads(plain.to_json())["unconfirmed_ids"] == [slow.id]
        assert len(smtp_server.for_recipient(slow.email)) == 1
        entry = store.ledger_entry(SAMPLE_WEEK, slow.id)
        assert entry is not None and entry.status == "unconfirmed"

        resend = send(transport, concurrency=1, resend_unconfirmed=True)

        assert (resend.sent, resend.skipped, resend.unconfirmed, resend.unconfirmed_ids) \
            == (1, 5, 0, [])
        assert len(smtp_server.for_recipient(slow.email)) == 2  # knowingly, once more
        entry = store.ledger_entry(SAMPLE_WEEK, slow.id)
        assert entry is not None and entry.status == "sent"
        assert send(transport, resend_unconfirmed=True).sent == 0
        assert len(smtp_server.received) == 7
    finally:
        transport.close()


def test_a_claim_left_in_flight_is_unconfirmed_and_one_left_before_the_transport_is_sent(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    subscribers = subscribe(store, 5)
    caught, waiting = subscribers[2], subscribers[3]
    assert store.claim(SAMPLE_WEEK, caught.id, NOW)  # an earlier run died holding it...
    store.mark_handed_over(SAMPLE_WEEK, caught.id)  # ...in the transport call
    assert store.claim(SAMPLE_WEEK, waiting.id, NOW)  # ...and this one ahead of it: never left

    report = send(smtp)

    assert (report.sent, report.failed, report.skipped) == (4, 0, 0)
    assert smtp_server.for_recipient(caught.email) == []
    assert recipients(smtp_server.received) == once_each(s for s in subscribers if s != caught)
    entry = store.ledger_entry(SAMPLE_WEEK, caught.id)
    assert entry is not None and entry.status == "unconfirmed"
    assert "in flight" in (entry.reason or "")
    entry = store.ledger_entry(SAMPLE_WEEK, waiting.id)
    assert entry is not None and entry.status == "sent"
    # It is listed (the operator decides), counted once, as unconfirmed.
    assert (report.unconfirmed, report.unconfirmed_ids) == (1, [caught.id])

    resend = send(smtp, resend_unconfirmed=True)

    assert (resend.sent, resend.skipped) == (1, 4)
    assert recipients(smtp_server.received) == once_each(subscribers)


def test_the_rate_is_kept_on_the_injected_clock(
        smtp_server: SmtpSink, smtp: SmtpTransport, store: SqliteStore, send: Send) -> None:
    """The rate keeps the Sender's one clock, moved here only by sleeps: measured, not timed."""
    fake = FakeTime()
    subscribers = subscribe(store, 20)

    report = send(smtp, concurrency=1, rate=20, time=fake)

    assert report.sent == 20
    assert recipients(smtp_server.received) == once_each(subscribers)
    # The first message goes at once, each of the other 19 waits 1/20 s.
    assert fake.now >= 0.9
    assert sum(fake.slept) == pytest.approx(19 / 20)


# -- SES -------------------------------------------------------------------------------------


def test_ses_delivers_each_once_and_the_ledger_keeps_the_message_ids(
        moto_server: MotoServer, ses: SesTransport, to_send: BuiltIssue, store: SqliteStore,
        send: Send) -> None:
    subscribers = subscribe(store, 5)

    report = send(ses, concurrency=2)

    assert (report.sent, report.failed, report.unconfirmed) == (5, 0, 0)
    sent = moto_server.sent()
    assert Counter(record["destinations"][0].lower() for record in sent) \
        == once_each(subscribers)
    by_email = {s.email.lower(): s for s in subscribers}
    ledger = store.ledger(SAMPLE_WEEK)
    for record in sent:
        subscriber = by_email[record["destinations"][0].lower()]
        assert {d.lower() for d in record["destinations"]} == {subscriber.email.lower()}
        assert record["source"] == "weekly@example.org"
        assert ledger[subscriber.id].status == "sent"
        assert ledger[subscriber.id].message_id == record["id"]
        assert moto_server.parse(record)["Subject"] == to_send.data["subject"][subscriber.layout]


def test_ses_rate_comes_from_get_account_unless_max_rate_is_set(
        moto_server: MotoServer, ses: SesTransport, to_send: BuiltIssue, store: SqliteStore,
        messages: Messages, tmp_path: Path) -> None:
    wire = moto_server.inject(ses.client, {"GetAccount": GET_ACCOUNT})
    capped = configure(tmp_path / "capped", "[delivery]\nmax_rate = 5\n")

    accounts = ses.probe()
    assert accounts == 14.0 and wire.calls["GetAccount"] == 1
    assert send_rate(capped, accounts) == 5
    rate = send_rate(configure(tmp_path / "account"), accounts)
    assert rate == 14.0

    sender = Sender(to_send, store, ses, messages, rate=rate, concurrency=4, sleep=FakeTime().sleep)
    assert sender.bucket.rate == 14.0


# -- gates and test copies ------------------------------------------------------------------


def test_a_blocking_problem_is_refused_even_with_missing_translations_allowed(
        tmp_path: Path) -> None:
    settings = configure(tmp_path, "[issue]\nsize_budget_kb = 1\n")
    to_send = build_issue(settings, tmp_path / "issue")
    with pytest.raises(BlockedError, match="over-size-limit"):
        check_gates(to_send, settings)
    with pytest.raises(BlockedError, match="over-size-limit"):
        check_gates(to_send, settings, allow_missing_translations=True)


def test_test_copies_of_every_layout_go_outside_the_ledger(
        smtp_server: SmtpSink, smtp: SmtpTransport, to_send: BuiltIssue, store: SqliteStore,
        messages: Messages, send: Send) -> None:
    subscribers = subscribe(store, 3)

    sent = send_tests(to_send, messages, smtp, "editor@example.org")

    assert [layout for layout, _ in sent] == list(LAYOUTS)
    received = smtp_server.received
    assert recipients(received) == Counter({"editor@example.org": 4})
    assert sorted(r.queue_id for r in received) == sorted(mid for _, mid in sent)
    subjects = sorted(str(r.message()["Subject"]) for r in received)
    assert subjects == sorted(f"[TEST {layout}] {to_send.data['subject'][layout]}"
                              for layout in LAYOUTS)
    assert all(r.message()["List-Unsubscribe-Post"] for r in received)
    assert store.ledger(SAMPLE_WEEK) == {}

    report = send(smtp)  # the real send still reaches everyone

    assert report.sent == 3
    assert recipients(smtp_server.for_recipient(s.email)[0] for s in subscribers) \
        == once_each(subscribers)
