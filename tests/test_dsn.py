"""Delivery status notifications read as bounces (pipeline/core/mail_in/dsn.py, inbox process).

The samples under tests/data/dsn/ are shaped as Postfix, Exim and Gmail write them, each
returning (``{{returned-headers}}`` or ``{{returned-message}}``) a message the pipeline really
built for a subscriber of a real SQLite store, so its token verifies with the inbox's keys.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.commands import newsletter_main
from support.project import SAMPLE_WEEK
from test_inbox import NOW, command, inbox_folder, run

from pipeline.config import Settings
from pipeline.core.email.message import Messages
from pipeline.core.mail_in.bounces import bounce_kind
from pipeline.core.mail_in.dsn import issue_of, read_report
from pipeline.core.mail_in.inbound import classify
from pipeline.stages.inbox import bounce_key
from pipeline.wiring import open_store
from subscribers.tokens import Keys, make_token

DSN = Path(__file__).resolve().parent / "data" / "dsn"
ADDRESS = "reader@example.net"
SID = "0123456789abcdef01234567"
#: The unsubscribe token of the message sent to :data:`SID`.
TOKEN = make_token(Keys.development(), "unsubscribe", SID, None)

#: Each sample, and what classify makes of it when it returns one of our messages.
EXPECTED = {
    "postfix-user-unknown": ("bounce", "bounce-permanent"),
    "gmail-not-found": ("bounce", "bounce-permanent"),
    "exim-no-such-user": ("bounce", "bounce-permanent"),
    "exim-policy": ("bounce", "bounce-transient"),
    "postfix-delayed": ("ignored", "dsn-not-failed"),
}


def sent_message(settings: Settings, built, subscriber_id: str, *,
                 keys: Keys | None = None) -> bytes:
    """The raw message the pipeline sends this subscriber (both unsubscribe forms)."""
    delivery = replace(settings.delivery, unsubscribe_mailto="unsub@example.org")
    messages = Messages(built, settings.site, delivery, keys or Keys.development())
    return messages.build(ADDRESS, subscriber_id, "zh-en", NOW).raw


def dsn(name: str, returned: bytes) -> bytes:
    """Sample ``name`` returning the message ``returned`` (whole, or its headers)."""
    text = returned.replace(b"\r\n", b"\n")
    headers = text.split(b"\n\n", 1)[0] + b"\n"
    message_id = next((line.split(b":", 1)[1].strip() for line in headers.splitlines()
                       if line.lower().startswith(b"message-id:")), b"<none@example.org>")
    raw = (DSN / f"{name}.mail").read_bytes()
    return (raw.replace(b"{{returned-headers}}", headers)
            .replace(b"{{returned-message}}", text).replace(b"{{message-id}}", message_id))


def bounced(settings: Settings, built, subscriber_id: str = SID,
            name: str = "postfix-user-unknown") -> bytes:
    """Sample ``name`` returning the message sent to ``subscriber_id``."""
    return dsn(name, sent_message(settings, built, subscriber_id))


def forged_message() -> bytes:
    """A message that looks like an issue but carries no token of ours."""
    return (b"From: vLLM PR Weekly <weekly@example.org>\nTo: reader@example.net\n"
            b"Subject: hello\nMessage-ID: <forged.1@example.org>\n"
            b"List-Unsubscribe: <https://elsewhere.example/u?id=42>\n\nhi\n")


@pytest.fixture
def reader(settings: Settings) -> str:
    """An active subscriber in the real store: its id."""
    with open_store(settings) as store:
        result = store.add(ADDRESS, "zh-en", status="active", source="cli", now=NOW)
    assert result.subscriber is not None
    return result.subscriber.id


def drop(settings: Settings, mails: dict[str, bytes]) -> Path:
    folder = inbox_folder(settings)
    folder.mkdir(parents=True, exist_ok=True)
    for n, (name, raw) in enumerate(mails.items()):
        (folder / name).write_bytes(raw)
        os.utime(folder / name, (1_795_900_000 + n, 1_795_900_000 + n))
    return folder


def subscriber(settings: Settings, subscriber_id: str):
    with open_store(settings) as store:
        return store.get(subscriber_id)


# -- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_sample_is_read(settings, built, name):
    returned = sent_message(settings, built, SID)
    report = read_report(dsn(name, returned))
    assert report is not None
    assert len(report.recipients) == 1
    assert report.tokens == (TOKEN,)  # the URL's and the mailto tag's: the same one
    assert report.message_id and report.message_id.startswith(f"<{SAMPLE_WEEK}.")
    verdict = classify(dsn(name, returned))
    assert (verdict.action, verdict.reason) == EXPECTED[name]
    assert verdict.token == (TOKEN if verdict.action == "bounce" else None)


def test_postfix_fields(settings, built):
    report = read_report(bounced(settings, built))
    assert report is not None
    (recipient,) = report.recipients
    assert (recipient.action, recipient.status) == ("failed", "5.1.1")
    assert recipient.diagnostic.startswith("smtp; 550 5.1.1 <reader@example.net>: Recipient "
                                           "address rejected: User unknown")
    assert recipient.bounce == "bounce-permanent"
    assert ADDRESS not in repr(report)  # the diagnostic names the address: not in a repr


@pytest.mark.parametrize(("status", "text", "kind"), [
    ("5.1.1", "smtp; 550 5.1.1 User unknown", "bounce-permanent"),
    ("5.7.1", "smtp; 550 5.7.1 rejected by policy", "bounce-transient"),
    ("5.2.2", "smtp; 552 5.2.2 Mailbox full", "bounce-transient"),
    ("4.2.2", "smtp; 452 4.2.2 Mailbox full", None),
    # Exim's generic 5.0.0: the reply decides, by its code or else its words
    ("5.0.0", "smtp; 550 5.1.1 <x@example.com>: Recipient address rejected", "bounce-permanent"),
    ("5.0.0", "smtp; 550 No such user here", "bounce-permanent"),
    ("5.0.0", "smtp; 550 5.7.1 Message rejected due to local policy", "bounce-transient"),
    ("5.0.0", "smtp; 550 Message rejected", "bounce-transient"),
    ("", "smtp; 550 5.1.1 User unknown", None),
])
def test_bounce_kind(status, text, kind):
    assert bounce_kind(status, text) == kind


@pytest.mark.parametrize(("field", "value", "reason"), [
    (b"Status: 5.1.1", b"Status: 4.4.7", "dsn-temporary"),
    *[(b"Action: failed", b"Action: " + action, "dsn-not-failed")
      for action in (b"delivered", b"relayed", b"expanded", b"delayed")],
], ids=["temporary-status", "delivered", "relayed", "expanded", "delayed"])
def test_only_a_failed_recipient_with_a_permanent_status_counts(settings, built, field, value,
                                                                 reason):
    raw = bounced(settings, built).replace(field, value)
    assert (classify(raw).action, classify(raw).reason) == ("ignored", reason)


def test_a_forged_dsn_without_our_token_is_ignored():
    for name in EXPECTED:
        verdict = classify(dsn(name, forged_message()))
        assert verdict.action == "ignored", name
        assert verdict.token is None
    assert classify(dsn("postfix-user-unknown", forged_message())).reason == \
        "dsn-unknown-message"


def test_a_token_outside_the_returned_message_does_not_count(settings, built):
    # the attacker's own List-Unsubscribe, or an address in the report's text: not ours
    raw = dsn("postfix-user-unknown", forged_message())
    raw = raw.replace(b"MIME-Version: 1.0\n",
                      f"MIME-Version: 1.0\nList-Unsubscribe: <mailto:unsub+{TOKEN}"
                      f"@example.org>\n".encode(), 1)
    raw = raw.replace(b"Final-Recipient: rfc822; reader@example.net",
                      f"Final-Recipient: rfc822; unsub+{TOKEN}@example.org".encode())
    assert classify(raw).reason == "dsn-unknown-message"


def test_two_different_tokens_are_ignored(settings, built):
    other = make_token(Keys.development(), "unsubscribe", "76543210fedcba9876543210", None)
    returned = sent_message(settings, built, SID).replace(
        f"unsub+{TOKEN}".encode(), f"unsub+{other}".encode())
    assert classify(dsn("postfix-user-unknown", returned)).reason == "dsn-several-tokens"


def test_ses_verdicts_do_not_stop_a_dsn(settings, built):
    raw = bounced(settings, built)
    top = (b"X-SES-Spam-Verdict: FAIL\nX-SES-Virus-Verdict: PASS\nReceived-SPF: none\n"
           b"Authentication-Results: amazonses.com; spf=fail; dkim=none; dmarc=fail\n")
    assert classify(top + raw).action == "bounce"


@pytest.mark.parametrize("raw", [
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\n\n--x\n"
    b"Content-Type: message/delivery-status\n\nReporting-MTA: dns; x\n\n--x--\n",
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\n\n",
    b"Content-Type: multipart/report; report-type=delivery-status\n\n\xff\xfe garbage",
    b"Content-Type: multipart/report; report-type=\"delivery-status\"; boundary=\"\x00\"\n\n--",
])
def test_a_broken_report_is_unrecognised(raw):
    assert (classify(raw).action, classify(raw).reason) == ("unrecognised", "dsn-unreadable")


@pytest.mark.parametrize("raw", [b"", b"\x00" * 10, b"Subject: hi\n\nhello\n",
                                 b"Content-Type: multipart/report; report-type=disposition-"
                                 b"notification; boundary=x\n\n--x--\n"])
def test_no_dsn_is_no_report(raw):
    assert read_report(raw) is None


def test_a_report_in_text_form_is_read_too(settings, built):
    # a delivery-status part with a transfer encoding is left as text by the parser
    raw = bounced(settings, built)
    raw = raw.replace(b"Content-Type: message/delivery-status\n",
                      b"Content-Type: message/delivery-status\nContent-Transfer-Encoding: "
                      b"7bit\n")
    report = read_report(raw)
    assert report is not None and report.bounce == "bounce-permanent"


# -- applying ----------------------------------------------------------------------------------


def test_transient_bounces_count_and_too_many_bounce(settings, built, reader):
    """Three different messages refused by policy, each its own notification."""
    drop(settings, {f"exim-{n}.eml": bounced(settings, built, reader, "exim-policy")
                    for n in range(2)})
    report = run(settings)
    assert dict(report.bounces) == {"transient": 2}
    after_two = subscriber(settings, reader)
    assert (after_two.status, after_two.transient_bounces) == ("active", 2)
    drop(settings, {"exim-2.eml": bounced(settings, built, reader, "exim-policy")})
    run(settings)
    assert subscriber(settings, reader).status == "bounced"  # the limit is 3 in a row


def test_the_same_notification_twice_counts_once(settings, built, reader):
    raw = bounced(settings, built, reader, "exim-policy")
    folder = drop(settings, {"first.eml": raw, "again.eml": raw})
    report = run(settings)
    assert dict(report.counts) == {"bounce": 1, "duplicate": 1}
    assert subscriber(settings, reader).transient_bounces == 1
    assert sorted(p.name for p in (folder / "processed").iterdir()) == ["again.eml",
                                                                        "first.eml"]


@pytest.mark.parametrize("message_id", [True, False], ids=["by-message-id", "by-the-mail"])
def test_a_dsn_handled_before_a_crash_is_not_counted_again(settings, built, reader, message_id):
    """Acted on, never moved aside: a duplicate next time, keyed by the returned Message-ID or,
    when the returned headers have none, by the mail."""
    returned = sent_message(settings, built, reader)
    if not message_id:
        returned = b"\n".join(line for line in returned.split(b"\r\n")
                              if not line.lower().startswith(b"message-id:"))
    raw = dsn("exim-policy", returned)
    assert (classify(raw).reference is not None) == message_id
    if not message_id:
        assert bounce_key(classify(raw).token or "", None) is None
    folder = drop(settings, {"dsn.eml": raw})
    run(settings)
    shutil.copy(folder / "processed" / "dsn.eml", folder / "dsn.eml")
    assert dict(run(settings).counts) == {"duplicate": 1}
    assert subscriber(settings, reader).transient_bounces == 1


def test_a_token_signed_by_another_key_bounces_nobody(settings, built, reader):
    other = Keys.from_environ({"NEWSLETTER_SECRET": "another-secret-of-at-least-32-bytes!!"})
    folder = drop(settings, {"dsn.eml": dsn("postfix-user-unknown",
                                            sent_message(settings, built, reader, keys=other))})
    report = run(settings)
    assert dict(report.counts) == {"bad-token": 1}
    assert subscriber(settings, reader).status == "active"
    assert [p.name for p in (folder / "ignored").iterdir()] == ["dsn.eml"]


def test_a_removed_subscriber_is_fine(settings, built, reader):
    raw = bounced(settings, built, reader)
    with open_store(settings) as store:
        assert store.remove(ADDRESS, NOW)
    folder = drop(settings, {"dsn.eml": raw})
    report = run(settings)
    assert dict(report.counts) == {"ignored": 1}
    assert dict(report.ignored) == {"dsn-no-subscriber": 1}
    assert [p.name for p in (folder / "ignored").iterdir()] == ["dsn.eml"]


def test_an_unsubscribed_address_stays_unsubscribed(settings, built, reader):
    with open_store(settings) as store:
        store.set_status(reader, "unsubscribed", NOW)
    drop(settings, {"dsn.eml": bounced(settings, built, reader, "gmail-not-found")})
    assert dict(run(settings).bounces) == {"permanent": 1}
    assert subscriber(settings, reader).status == "unsubscribed"


def test_a_delayed_or_forged_dsn_changes_nothing(settings, built, reader):
    folder = drop(settings, {
        "delayed.eml": bounced(settings, built, reader, "postfix-delayed"),
        "forged.eml": dsn("postfix-user-unknown", forged_message()),
    })
    report = run(settings)
    assert dict(report.ignored) == {"dsn-not-failed": 1, "dsn-unknown-message": 1}
    state = subscriber(settings, reader)
    assert (state.status, state.transient_bounces) == ("active", 0)
    assert sorted(p.name for p in (folder / "ignored").iterdir()) == ["delayed.eml",
                                                                      "forged.eml"]


def test_inbox_process_applies_a_dsn_end_to_end(settings, built, reader, tmp_path):
    folder = drop(settings, {"bounce.eml": bounced(settings, built, reader)})
    result = newsletter_main(["inbox", "process"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"inbox {folder}: 1 mail: 1 bounce (permanent 1)"
    assert ADDRESS not in result.stdout + result.stderr
    assert subscriber(settings, reader).status == "bounced"
    assert [p.name for p in (folder / "processed").iterdir()] == ["bounce.eml"]
    assert not (folder / "bounce.eml").exists()


def test_the_dry_run_names_the_bounce_and_acts_on_nothing(settings, built, reader, capsys):
    folder = drop(settings, {"dsn.eml": bounced(settings, built, reader)})
    assert command(settings, "process", "--dry-run") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "dsn.eml: bounce (bounce-permanent) M***@mail.example.org"
    assert subscriber(settings, reader).status == "active"
    assert (folder / "dsn.eml").exists()


def test_a_dead_mailbox_our_reader_forwards_to_is_not_their_bounce(settings, built, reader):
    """The mailbox that refused a forwarded copy is not theirs: a transient bounce, not bounced."""
    raw = bounced(settings, built, reader)
    forwarded = raw.replace(b"Final-Recipient: rfc822; reader@example.net",
                            b"Final-Recipient: rfc822; old-self@elsewhere.example")
    assert forwarded != raw
    drop(settings, {"forwarded.eml": forwarded})

    report = run(settings)

    assert dict(report.bounces) == {"transient": 1}
    found = subscriber(settings, reader)
    assert found.status == "active" and found.transient_bounces == 1


def test_the_refusing_mailbox_matches_whatever_its_case_or_domain_form(settings, built, reader):
    raw = bounced(settings, built, reader)
    shouted = raw.replace(b"Final-Recipient: rfc822; reader@example.net",
                          b"Final-Recipient: rfc822; <Reader@EXAMPLE.net>")
    drop(settings, {"shouted.eml": shouted})

    assert dict(run(settings).bounces) == {"permanent": 1}
    assert subscriber(settings, reader).status == "bounced"


def test_a_report_inside_the_returned_message_is_not_read(settings, built):
    """A DSN about a DSN: only the outer report's recipients count."""
    inner = bounced(settings, built, "a" * 24)
    outer = dsn("postfix-delayed", inner)
    report = read_report(outer)
    assert report is not None and report.bounce is None
    assert {r.action for r in report.recipients} == {"delayed"}


def test_our_message_id_names_the_issue(settings, built):
    raw = sent_message(settings, built, "a" * 24)
    message_id = next(line.split(":", 1)[1].strip() for line in raw.decode().splitlines()
                      if line.lower().startswith("message-id:"))
    assert issue_of(message_id) == built.id == SAMPLE_WEEK
    assert issue_of("<2026-W48.0123@elsewhere>") is None and issue_of(None) is None


def test_a_permanent_bounce_counts_in_its_issues_bounce_rate(settings, built, reader):
    """The returned Message-ID names the issue: the bounce goes on that ledger row, as SES's do."""
    with open_store(settings) as store:
        assert store.claim(SAMPLE_WEEK, reader, NOW)
        store.mark_sent(SAMPLE_WEEK, reader, "queued-1", NOW)
    drop(settings, {"dsn.eml": bounced(settings, built, reader)})

    run(settings)

    with open_store(settings) as store:
        assert store.feedback_counts(SAMPLE_WEEK) == {"bounce": 1, "complaint": 0}
        entry = store.ledger_entry(SAMPLE_WEEK, reader)
        assert entry is not None and entry.status == "sent"
