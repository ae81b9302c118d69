"""Mail in: classify raw inbound mail, act on it once, move it aside.

The fixtures under tests/data/inbound/ are shaped as an SES receipt rule stores them in S3
(SES's headers on top, then the sender's); ``{{token}}`` is where a test puts a token it
signs. The real SQLite store and outbox throughout; the S3 inbox talks to a moto server.
"""

from __future__ import annotations

import argparse
import email
import logging
import os
from dataclasses import replace
from datetime import UTC, datetime
from email import policy
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipeline.cli import inbox as inbox_command
from pipeline.config import Settings
from pipeline.core.mail_in.inbound import ACTIONS, classify, mask_address
from pipeline.inbox import SETUP_NOTIFICATION, InboundMail, InboxError, mail_key
from pipeline.inbox.local import LocalInbox
from pipeline.inbox.s3 import S3Inbox
from pipeline.stages.inbox import process
from pipeline.wiring import OUTBOX_DIR, open_inbox, open_store, open_subscriptions
from subscribers.tokens import Keys, make_token

if TYPE_CHECKING:
    from support.servers import MotoServer

INBOUND = Path(__file__).resolve().parent / "data" / "inbound"
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
BUCKET = "weekly-inbound"
PREFIX = "inbound/"

#: Every fixture, and what classify must make of it: (action, reason, sender, layout).
EXPECTED = {
    "unsubscribe.eml": ("unsubscribe", "token", "carol@example.com", None),
    "subscribe-subject.eml": ("subscribe", "subject", "alice@example.com", None),
    "subscribe-first-line.eml": ("subscribe", "first-line", "bob@example.net", "zh"),
    "subscribe-chinese.eml": ("subscribe", "subject", "zhang.san@example.cn", "en"),
    "subscribe-reply.eml": ("subscribe", "subject", "dave@example.com", None),
    "forwarded-dkim-pass.eml": ("subscribe", "subject", "frank@example.com", None),
    # the <title>subscribe</title> and the style sheet are not the first line
    "html-only.eml": ("subscribe", "first-line", "grace@example.org.uk", "en-zh"),
    "spam.eml": ("ignored", "spam", "eve@spam.example", None),
    "virus.eml": ("ignored", "virus", "mallory@virus.example", None),
    "spf-dkim-fail.eml": ("ignored", "spf-fail", "ceo@example.com", None),
    "dmarc-fail.eml": ("ignored", "dmarc-fail", "support@example.com", None),
    # SES's FAIL on top, the sender's forged PASS lower down
    "forged-verdict.eml": ("ignored", "spam", "trent@forger.example", None),
    "bad-token.eml": ("unsubscribe", "token", "heidi@example.com", None),
    "unknown-command.eml": ("unrecognised", "no-command", "ivan@example.com", None),
    "garbage.eml": ("unrecognised", "no-command", None, None),
}
#: The subscribe mails of the fixtures: address → layout asked for.
REQUESTED = {"alice@example.com": "zh-en", "bob@example.net": "zh",
             "zhang.san@example.cn": "en", "dave@example.com": "zh-en",
             "frank@example.com": "zh-en", "grace@example.org.uk": "en-zh"}
PROCESSED = {"unsubscribe.eml", "subscribe-subject.eml", "subscribe-first-line.eml",
             "subscribe-chinese.eml", "subscribe-reply.eml", "forwarded-dkim-pass.eml",
             "html-only.eml"}
IGNORED = set(EXPECTED) - PROCESSED
#: What processing every fixture comes to.
COUNTS = {"unsubscribed": 1, "subscribe": 6, "ignored": 5, "unrecognised": 2, "bad-token": 1}

# What SES puts on top of a mail that passed everything.
SES_PASS = {
    "X-SES-Spam-Verdict": "PASS",
    "X-SES-Virus-Verdict": "PASS",
    "Received-SPF": "pass (spfCheck: domain of example.com designates 192.0.2.1 as permitted "
                    "sender) client-ip=192.0.2.1;",
    "Authentication-Results": "amazonses.com; spf=pass (spfCheck: ...) client-ip=192.0.2.1; "
                              "dkim=pass header.i=@example.com; dmarc=pass "
                              "header.from=example.com;",
}


def fixture(name: str, token: str | None = None) -> bytes:
    """The raw mail of fixture ``name`` (``spam.eml`` is stored as ``spam.mail``: build
    output ``*.eml`` is never tracked, test data is)."""
    raw = (INBOUND / name).with_suffix(".mail").read_bytes()
    return raw.replace(b"{{token}}", token.encode()) if token else raw


def mail(*, top: dict[str, str] | None = None, subject: str | None = "subscribe",
         sender: str | None = "Alice <alice@example.com>", to: str = "subscribe@example.org",
         extra: str = "", body: str = "hello\n") -> bytes:
    """A small mail: ``top`` headers (SES's) first, then the sender's."""
    lines = [f"{name}: {value}" for name, value in (top or {}).items()]
    if sender is not None:
        lines.append(f"From: {sender}")
    lines.append(f"To: {to}")
    if subject is not None:
        lines.append(f"Subject: {subject}")
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append('Content-Type: text/plain; charset="utf-8"')
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def token_for(subscriber_id: str, keys: Keys | None = None) -> str:
    return make_token(keys or Keys.development(), "unsubscribe", subscriber_id, None)


@pytest.fixture
def carol(settings: Settings) -> tuple[str, str]:
    """An active subscriber in the real store, and her unsubscribe token."""
    with open_store(settings) as store:
        result = store.add("carol@example.com", "en", status="active", source="cli", now=NOW)
    assert result.subscriber is not None
    return result.subscriber.id, token_for(result.subscriber.id)


def inbox_folder(settings: Settings) -> Path:
    return settings.resolve(settings.inbox.dir)


def outbox(settings: Settings) -> list[email.message.EmailMessage]:
    folder = settings.resolve(settings.paths.build_dir) / OUTBOX_DIR
    paths = sorted(folder.glob("*.eml")) if folder.is_dir() else []
    return [email.message_from_bytes(p.read_bytes(), policy=policy.default)
            for p in paths]


def drop(folder: Path, names: list[str], token: str | None = None) -> None:
    """Put fixture mails in ``folder``, each a second older than the next."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(names):
        path = folder / name
        path.write_bytes(fixture(name, token))
        stamp = 1_795_900_000 + n
        os.utime(path, (stamp, stamp))


def run(settings: Settings, inbox=None, **options):
    with open_subscriptions(settings, {}) as subscriptions:
        return process(inbox or open_inbox(settings), subscriptions, NOW, **options)


#: An unsubscribe token of ours, for the classify tests (no subscriber needed).
TOKEN = token_for("0123456789abcdef01234567")


def status_of(settings: Settings, address: str):
    with open_store(settings) as store:
        return store.find(address)


# -- classify --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_classify_each_fixture(name):
    verdict = classify(fixture(name, TOKEN))
    action, reason, sender, layout = EXPECTED[name]
    assert (verdict.action, verdict.reason, verdict.sender, verdict.layout) == (
        action, reason, sender, layout)
    if name == "unsubscribe.eml":  # the part after the plus
        assert verdict.token == TOKEN
    elif action == "unsubscribe":
        assert verdict.token is not None and len(verdict.token) == 56
    else:
        assert verdict.token is None


@pytest.mark.parametrize("header", ["To", "Cc", "Delivered-To", "X-Original-To"])
def test_the_token_is_found_in_any_recipient_header_in_any_case(header):
    raw = mail(subject="unsubscribe", to="undisclosed-recipients:;",
               extra=f"{header}: <UNSUB+{TOKEN.upper()}@EXAMPLE.ORG>")
    verdict = classify(raw)
    assert (verdict.action, verdict.token) == ("unsubscribe", TOKEN)


def test_the_token_is_found_in_the_envelope_recipient_of_ses_received_header():
    received = ("from mail.example.com (mail.example.com [192.0.2.1]) by "
                "inbound-smtp.us-east-1.amazonaws.com with SMTP id abc "
                f"for unsub+{TOKEN}@example.org; Mon, 30 Nov 2026 02:14:07 +0000 (UTC)")
    verdict = classify(mail(top={"Received": received, **SES_PASS}, subject="unsubscribe",
                            to="Undisclosed recipients:;"))
    assert (verdict.action, verdict.token) == ("unsubscribe", TOKEN)


#: Small mails and what classify makes of them: (action, reason, layout).
VERDICTS = {
    # no token without exactly 56 base32 characters ('1' and '8' are not base32)
    "55 characters": (mail(subject="hi", to=f"unsub+{'a' * 55}@example.org"),
                      ("unrecognised", "no-command", None)),
    "not base32": (mail(subject="hi", to=f"unsub+{'1' * 56}@example.org"),
                   ("unrecognised", "no-command", None)),
    "unsubscribe wins": (mail(subject="subscribe", to=f"unsub+{TOKEN}@example.org"),
                         ("unsubscribe", "token", None)),
    "unsubscribe, no token": (mail(subject="unsubscribe"), ("unrecognised", "no-command", None)),
    # the first non-empty line counts when the subject is no command, and only that line
    "first line": (mail(subject="Hello there", body="\n\n   \n订阅 中文\nthanks\n"),
                   ("subscribe", "first-line", "zh")),
    "second line": (mail(subject="Hello", body="Hi!\nsubscribe\n"),
                    ("unrecognised", "no-command", None)),
    "unknown charset read as UTF-8": (
        b"From: a@example.com\nSubject: hi\n"
        b"Content-Type: text/plain; charset=x-no-such-charset\n\n\xe8\xae\xa2\xe9\x98\x85\n",
        ("subscribe", "first-line", None)),
    "raw UTF-8 subject": ("From: a@example.com\nSubject: 订阅 英文\n\nhi\n".encode(),
                          ("subscribe", "subject", "en")),
    "no sender": (mail(sender=None), ("ignored", "no-sender", None)),
    "no address": (mail(sender="undisclosed-recipients:;"), ("ignored", "no-sender", None)),
    "auto-reply": (mail(extra="Auto-Submitted: auto-replied"),
                   ("ignored", "auto-submitted", None)),
    "not automatic": (mail(extra="Auto-Submitted: no"), ("subscribe", "subject", None)),
}


@pytest.mark.parametrize("case", VERDICTS)
def test_what_a_mail_says(case):
    raw, expected = VERDICTS[case]
    verdict = classify(raw)
    assert (verdict.action, verdict.reason, verdict.layout) == expected
    if expected[1] == "no-sender":
        assert verdict.sender is None


@pytest.mark.parametrize(("subject", "layout"), [
    ("subscribe", None),
    ("SUBSCRIBE", None),
    ("  Subscribe  ", None),
    ("subscribe.", None),
    ("Subscribe EN", "en"),
    ("subscribe zh", "zh"),
    ("subscribe en-zh", "en-zh"),
    ("subscribe ZH-EN", "zh-en"),
    ("subscribe English", "en"),
    ("subscribe bilingual", "zh-en"),
    ("订阅", None),
    ("订阅 中文", "zh"),
    ("订阅　英文", "en"),  # an ideographic space
    ("订阅英文", "en"),
    ("订阅 双语", "zh-en"),
    ("Re: subscribe", None),
    ("RE: Fwd: subscribe zh", "zh"),
    ("Fw: subscribe", None),
    ("回复：订阅 en", "en"),
    ("AW: subscribe", None),
])
def test_subscribe_commands(subject, layout):
    verdict = classify(mail(top=SES_PASS, subject=subject))
    assert (verdict.action, verdict.reason, verdict.layout) == ("subscribe", "subject", layout)
    assert verdict.sender == "alice@example.com"


@pytest.mark.parametrize("subject", [
    "subscribe me please", "subscribe fr", "subscribe zh en", "subscribed", "subscriber",
    "please subscribe", "unsubscribe", "订阅吧", "Re: hello", "",
])
def test_anything_else_is_not_a_command(subject):
    verdict = classify(mail(top=SES_PASS, subject=subject, body="Hi,\nthanks\n"))
    assert (verdict.action, verdict.reason) == ("unrecognised", "no-command")


@pytest.mark.parametrize(("headers", "expected"), [
    # SES's verdict headers
    ({"X-SES-Spam-Verdict": "FAIL"}, "spam"),
    ({"X-SES-Virus-Verdict": "FAIL"}, "virus"),
    ({"X-SES-Spam-Verdict": "GRAY"}, None),
    ({"X-SES-Virus-Verdict": "PROCESSING_FAILED"}, None),
    # SPF and DKIM: ignored only when one failed and neither passed
    ({"Authentication-Results": "amazonses.com; spf=fail (x) client-ip=1.2.3.4; "
      "dkim=fail header.i=@example.com; dmarc=none;"}, "spf-fail"),
    ({"Authentication-Results": "amazonses.com; spf=fail (x); dkim=pass header.i=@x.com"},
     None),
    ({"Authentication-Results": "amazonses.com; spf=softfail (x); dkim=none;"}, "spf-fail"),
    ({"Authentication-Results": "amazonses.com; spf=permerror (x); dkim=none;"}, "spf-fail"),
    ({"Authentication-Results": "amazonses.com; spf=pass (x); dkim=fail header.i=@x.com;"},
     None),
    ({"Authentication-Results": "amazonses.com; spf=none (x); dkim=fail header.i=@x.com;"},
     "dkim-fail"),
    ({"Authentication-Results": "amazonses.com; spf=neutral (x); dkim=none;"}, None),
    ({"Authentication-Results": "amazonses.com; spf=temperror (x); dkim=none;"}, None),
    # a comment that looks like a result changes nothing
    ({"Authentication-Results": "amazonses.com; spf=pass (spf=fail; dkim=fail) x=y;"}, None),
    # DMARC failing is enough
    ({"Authentication-Results": "amazonses.com; spf=pass (x); dkim=pass header.i=@x.com; "
      "dmarc=fail (p=REJECT sp=REJECT pct=100) header.from=x.com;"}, "dmarc-fail"),
    # Received-SPF when Authentication-Results has no SPF result
    ({"Received-SPF": "fail (spfCheck: ...) client-ip=1.2.3.4;"}, "spf-fail"),
    ({"Received-SPF": "fail (x)", "Authentication-Results": "amazonses.com; dkim=pass"}, None),
    # nothing at all (a hand-dropped file): no failure
    ({}, None),
])
def test_which_checks_make_a_mail_ignored(headers, expected):
    verdict = classify(mail(top=headers))
    if expected is None:
        assert verdict.action == "subscribe"
    else:
        assert (verdict.action, verdict.reason) == ("ignored", expected)


def test_only_the_topmost_verdict_counts():
    """A FAIL the sender wrote below SES's PASS changes nothing (the other way round: the
    forged-verdict.eml fixture)."""
    forged_fail = ("X-SES-Spam-Verdict: FAIL\nX-SES-Virus-Verdict: FAIL\n"
                   "Authentication-Results: amazonses.com; spf=fail; dkim=fail; dmarc=fail")
    verdict = classify(mail(top=SES_PASS, extra=forged_fail))
    assert verdict.action == "subscribe"


@pytest.mark.parametrize("raw", [
    b"",
    b"   \r\n",
    b"\x00\x01\x02\xff\xfe",
    b"From: <<<@@>>>, ;;\nSubject: =?utf-8?q?=E8=AE?= =?x-unknown?b?!!!?=\n\nsubscribe",
    b"From: a@example.com\nContent-Type: multipart/mixed; boundary=x\n\n--x\n"
    b"Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\n!!!!\n",
    b"Subject: subscribe\nFrom: =?utf-8?b?AAAA?= <\x80\x81@\xff>\n\n",
    b"\n\n\nsubscribe\n",
    bytes(range(256)) * 8,
])
def test_broken_mail_never_raises(raw):
    verdict = classify(raw)
    assert verdict.action in ACTIONS
    assert verdict.action != "unsubscribe"
    if raw in (b"", b"\x00\x01\x02\xff\xfe"):  # garbage bytes
        assert verdict.action == "unrecognised"


def test_mask_address():
    assert mask_address("alice@example.org") == "a***@example.org"
    assert mask_address("z@example.cn") == "z***@example.cn"
    assert mask_address("nonsense") == "***"
    assert mask_address(None) == "-"


# -- the local inbox ---------------------------------------------------------------------------


def test_local_inbox_lists_waiting_mail_oldest_first_and_skips_the_rest(tmp_path):
    folder = tmp_path / "inbox"
    (folder / "processed").mkdir(parents=True)
    (folder / "processed" / "old.eml").write_bytes(b"Subject: subscribe\n\n")
    for name in (".hidden", "partial.tmp", "copying.part", "notes~", SETUP_NOTIFICATION):
        (folder / name).write_bytes(b"Subject: subscribe\n\n")
    # written newest first: the order comes from the modification times, not the names
    for name, age in (("c-newest", 9), ("a-oldest", 0), ("b-middle", 5)):
        (folder / name).write_bytes(name.encode())
        os.utime(folder / name, (1_700_000_000 + age,) * 2)
    mails = list(LocalInbox(folder).pending())
    assert [m.key for m in mails] == ["a-oldest", "b-middle", "c-newest"]
    assert mails[0] == InboundMail("a-oldest", b"a-oldest")


def test_local_inbox_moves_aside_once(tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "one.eml").write_bytes(b"1")
    (folder / "two.eml").write_bytes(b"2")
    inbox = LocalInbox(folder)
    inbox.move_aside("one.eml", "processed")
    inbox.move_aside("two.eml", "ignored")
    inbox.move_aside("one.eml", "processed")  # already moved: fine
    assert (folder / "processed" / "one.eml").read_bytes() == b"1"
    assert (folder / "ignored" / "two.eml").read_bytes() == b"2"
    assert list(inbox.pending()) == []
    with pytest.raises(ValueError, match="outcome"):
        inbox.move_aside("x.eml", "deleted")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        inbox.move_aside("../escape.eml", "processed")


# -- process, end to end -----------------------------------------------------------------------


def test_process_every_kind_of_mail(settings, carol):
    subscriber_id, token = carol
    folder = inbox_folder(settings)
    drop(folder, sorted(EXPECTED), token)

    report = run(settings)

    assert dict(report.counts) == COUNTS
    assert dict(report.ignored) == {"spam": 2, "virus": 1, "spf-fail": 1, "dmarc-fail": 1}
    assert dict(report.requests) == {"confirmation-sent": 6}
    assert report.total == len(EXPECTED)
    with open_store(settings) as store:
        carol_now = store.get(subscriber_id)
        assert carol_now is not None and carol_now.status == "unsubscribed"
        # the subscribe requests: pending, in the layout asked for, from "mail"
        for address, layout in REQUESTED.items():
            found = store.find(address)
            assert found is not None, address
            assert (found.status, found.layout, found.consent_source) == (
                "pending", layout, "mail")
        # nothing for the mails that were ignored
        for address in ("eve@spam.example", "ceo@example.com", "support@example.com",
                        "trent@forger.example", "ivan@example.com", "heidi@example.com"):
            assert store.find(address) is None, address
    sent = outbox(settings)
    assert sorted(str(m["To"]) for m in sent) == sorted(REQUESTED)
    for message in sent:
        body = message.get_body(preferencelist=("plain",))
        assert body is not None
        assert "/confirm?token=" in body.get_content()
    # every mail moved aside, to the right place
    assert sorted(p.name for p in (folder / "processed").iterdir()) == sorted(PROCESSED)
    assert sorted(p.name for p in (folder / "ignored").iterdir()) == sorted(IGNORED)
    assert [p.name for p in folder.iterdir() if p.is_file()] == []
    # the summary counts without naming anyone
    summary = report.summary()
    assert summary == (
        f"inbox {folder}: 15 mails: 1 unsubscribed, 6 subscribe requests "
        "(confirmation-sent 6), 5 ignored (dmarc-fail 1, spam 2, spf-fail 1, virus 1), "
        "2 unrecognised, 1 with a bad token")
    assert token not in summary and "@" not in summary
    again = run(settings)
    assert again.summary() == f"inbox {folder}: no mail waiting"
    assert len(outbox(settings)) == len(sent)


def test_a_mail_handled_before_a_crash_is_only_moved_aside(settings):
    folder = inbox_folder(settings)
    drop(folder, ["subscribe-subject.eml"])
    inbox = LocalInbox(folder)
    # the earlier run recorded the key, acted, and died before moving the mail
    with open_store(settings) as store:
        assert store.first_time(mail_key(inbox.describe(), "subscribe-subject.eml"), NOW)

    report = run(settings, inbox)

    assert dict(report.counts) == {"duplicate": 1}
    assert "1 duplicate" in report.summary()
    assert (folder / "processed" / "subscribe-subject.eml").exists()
    assert not (folder / "subscribe-subject.eml").exists()
    assert outbox(settings) == []  # no second confirmation mail
    assert status_of(settings, "alice@example.com") is None


def test_the_once_only_key_is_taken_for_the_mails_acted_on(settings):
    folder = inbox_folder(settings)
    drop(folder, ["subscribe-subject.eml", "spam.eml"])
    inbox = LocalInbox(folder)
    run(settings, inbox)
    with open_store(settings) as store:
        # taken (and kept) for the subscribe mail: first_time is now False for it
        assert not store.first_time(mail_key(inbox.describe(), "subscribe-subject.eml"), NOW)
        # an ignored mail does nothing, so it needs no key
        assert store.first_time(mail_key(inbox.describe(), "spam.eml"), NOW)


def run_smtp(settings: Settings, sink):
    relayed = replace(settings, delivery=replace(settings.delivery, transport="smtp"),
                      smtp=sink.settings())
    with open_subscriptions(relayed, {"NEWSLETTER_SECRET": "s" * 32}) as subscriptions:
        return process(open_inbox(settings), subscriptions, NOW)


def test_a_confirmation_that_cannot_be_sent_now_leaves_the_mail_for_the_next_run(
        settings, smtp_server):
    folder = inbox_folder(settings)
    drop(folder, ["subscribe-subject.eml", "spam.eml"])
    smtp_server.fail_next("alice@example.com", 451, "4.3.0 try again later")

    report = run_smtp(settings, smtp_server)

    assert dict(report.counts) == {"retry-later": 1, "ignored": 1}
    assert "1 left for the next run" in report.summary()
    assert (folder / "subscribe-subject.eml").exists()  # left in place
    assert (folder / "ignored" / "spam.eml").exists()  # the rest went on

    again = run_smtp(settings, smtp_server)

    assert dict(again.counts) == {"subscribe": 1}  # the key was forgotten: acted on now
    assert [r.rcpt_tos for r in smtp_server.wait_for(1)] == [("alice@example.com",)]
    assert (folder / "processed" / "subscribe-subject.eml").exists()


def test_an_address_that_refuses_the_confirmation_is_not_retried(settings, smtp_server):
    folder = inbox_folder(settings)
    drop(folder, ["subscribe-subject.eml"])
    smtp_server.fail_next("alice@example.com", 550, "5.1.1 no such user")

    report = run_smtp(settings, smtp_server)

    assert dict(report.counts) == {"ignored": 1} and dict(report.ignored) == {
        "undeliverable": 1}
    assert (folder / "ignored" / "subscribe-subject.eml").exists()
    assert dict(run_smtp(settings, smtp_server).counts) == {}  # nothing left to retry


def test_an_unsubscribe_is_honoured_even_when_ses_calls_the_mail_spam(settings):
    with open_store(settings) as store:
        sub = store.add("bob@example.com", status="active", source="t", now=NOW).subscriber
    assert sub is not None
    token = make_token(Keys.development(), "unsubscribe", sub.id, None)
    folder = inbox_folder(settings)
    folder.mkdir(parents=True)
    (folder / "spammy.eml").write_bytes(mail(
        top={"X-SES-Spam-Verdict": "FAIL", "Authentication-Results":
             "amazonses.com; spf=fail; dkim=fail; dmarc=fail"},
        to=f"unsub+{token}@example.org", subject="unsubscribe"))
    report = run(settings)
    assert dict(report.counts) == {"unsubscribed": 1}
    assert status_of(settings, "bob@example.com").status == "unsubscribed"


def test_a_sender_that_is_no_address_is_ignored(settings):
    folder = inbox_folder(settings)
    folder.mkdir(parents=True)
    (folder / "local.eml").write_bytes(mail(sender="root@localhost"))

    report = run(settings)

    assert dict(report.counts) == {"ignored": 1}
    assert dict(report.ignored) == {"invalid-address": 1}
    assert (folder / "ignored" / "local.eml").exists()
    assert outbox(settings) == []


def test_unsubscribing_a_removed_subscriber_is_fine(settings):
    with open_store(settings) as store:
        result = store.add("gone@example.com", status="active", source="cli", now=NOW)
        assert result.subscriber is not None
        store.remove("gone@example.com", NOW)
    folder = inbox_folder(settings)
    drop(folder, ["unsubscribe.eml"], token_for(result.subscriber.id))

    report = run(settings)

    assert dict(report.counts) == {"unsubscribed": 1}
    assert (folder / "processed" / "unsubscribe.eml").exists()
    assert status_of(settings, "gone@example.com") is None


def test_a_token_signed_by_another_key_unsubscribes_nobody(settings, carol):
    subscriber_id, _ = carol
    stranger = token_for(subscriber_id, Keys(signing=b"somebody else's signing key!!"))
    folder = inbox_folder(settings)
    drop(folder, ["unsubscribe.eml"], stranger)

    report = run(settings)

    assert dict(report.counts) == {"bad-token": 1}
    assert (folder / "ignored" / "unsubscribe.eml").exists()
    with open_store(settings) as store:
        found = store.get(subscriber_id)
        assert found is not None and found.status == "active"


# -- the S3 inbox (moto) -----------------------------------------------------------------------


def s3_settings(settings: Settings, prefix: str = PREFIX) -> Settings:
    return replace(settings, inbox=replace(settings.inbox, source="s3", bucket=BUCKET,
                                           prefix=prefix))


def s3_keys(moto_server: MotoServer) -> set[str]:
    client = moto_server.client("s3")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return {item["Key"] for page in pages for item in page.get("Contents", ())}


def test_s3_inbox_end_to_end(settings, carol, moto_server):
    _, token = carol
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    setup = b"Amazon SES has successfully set up this bucket for receiving mail."
    s3.put_object(Bucket=BUCKET, Key=PREFIX + SETUP_NOTIFICATION, Body=setup)
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "processed/older-mail", Body=b"handled before")
    s3.put_object(Bucket=BUCKET, Key="elsewhere/subscribe", Body=mail())
    names = {name: f"{n:02d}ses{n:04d}message" for n, name in enumerate(sorted(EXPECTED))}
    for name, key in names.items():  # as SES stores them: CRLF line endings
        s3.put_object(Bucket=BUCKET, Key=PREFIX + key,
                      Body=fixture(name, token).replace(b"\n", b"\r\n"))
    configured = s3_settings(settings)

    report = run(configured)

    assert dict(report.counts) == COUNTS
    assert report.inbox == f"s3://{BUCKET}/{PREFIX}"
    expected = {PREFIX + SETUP_NOTIFICATION, PREFIX + "processed/older-mail",
                "elsewhere/subscribe"}
    expected |= {f"{PREFIX}processed/{names[n]}" for n in PROCESSED}
    expected |= {f"{PREFIX}ignored/{names[n]}" for n in IGNORED}
    assert s3_keys(moto_server) == expected
    # the setup notification and the earlier mail are untouched
    body = s3.get_object(Bucket=BUCKET, Key=PREFIX + SETUP_NOTIFICATION)["Body"].read()
    assert body == setup
    moved = s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}processed/{names['html-only.eml']}")
    assert moved["Body"].read() == fixture("html-only.eml").replace(b"\n", b"\r\n")
    assert sorted(str(m["To"]) for m in outbox(settings)) == sorted(REQUESTED)

    assert run(configured).total == 0  # nothing left waiting
    assert len(outbox(settings)) == len(REQUESTED)


def test_s3_inbox_reads_every_page(settings, moto_server):
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    for n in range(5):
        s3.put_object(Bucket=BUCKET, Key=f"in/mail-{n}", Body=b"x%d" % n)
    import boto3

    client = boto3.session.Session().client("s3")
    inbox = S3Inbox(BUCKET, "/in", client, page_size=2)
    assert inbox.describe() == f"s3://{BUCKET}/in/"
    assert sorted(m.key for m in inbox.pending()) == [f"mail-{n}" for n in range(5)]
    inbox.move_aside("mail-3", "ignored")
    inbox.move_aside("mail-3", "ignored")  # already moved: fine
    assert sorted(m.key for m in inbox.pending()) == [f"mail-{n}" for n in (0, 1, 2, 4)]
    assert "in/ignored/mail-3" in s3_keys(moto_server)


def test_a_missing_bucket_is_one_line(settings, moto_server):
    inbox = open_inbox(s3_settings(settings))
    try:
        with pytest.raises(InboxError) as caught:
            list(inbox.pending())
    finally:
        inbox.close()
    assert str(caught.value) == (f"inbox s3://{BUCKET}/{PREFIX}: cannot list the waiting "
                                 f"mails: bucket {BUCKET} does not exist")
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 1


# -- the command -------------------------------------------------------------------------------


def command(settings: Settings, *argv: str) -> int:
    """``newsletter inbox …`` through the command's own parser, under a stand-in parent."""
    top = argparse.ArgumentParser(prog="newsletter")
    inbox_command.add_parser(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["inbox", *argv])
    code: int = args.handler(args, settings)
    return code


def test_command_with_no_mail_waiting(settings, capsys):
    assert not inbox_folder(settings).exists()  # a missing folder is an empty inbox
    assert command(settings, "process") == 0
    assert capsys.readouterr().out.splitlines()[0] == \
        f"inbox {inbox_folder(settings)}: no mail waiting"


def test_command_processes_and_prints_the_summary(settings, carol, capsys, monkeypatch,
                                                  caplog):
    monkeypatch.delenv("NEWSLETTER_SECRET", raising=False)
    caplog.set_level(logging.INFO, logger="newsletter")  # the note is logged, not printed
    _, token = carol
    folder = inbox_folder(settings)
    drop(folder, ["unsubscribe.eml", "subscribe-subject.eml", "spam.eml"], token)

    assert command(settings, "process") == 0

    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"inbox {folder}: 3 mails: 1 unsubscribed, 1 subscribe request "
        "(confirmation-sent 1), 1 ignored (spam 1)")
    assert "development key" in caplog.text
    assert token not in out + caplog.text and "alice@" not in out + caplog.text
    assert sorted(p.name for p in (folder / "processed").iterdir()) == [
        "subscribe-subject.eml", "unsubscribe.eml"]
    assert status_of(settings, "carol@example.com").status == "unsubscribed"


def test_command_dry_run_acts_on_nothing(settings, carol, capsys):
    _, token = carol
    folder = inbox_folder(settings)
    names = ["unsubscribe.eml", "subscribe-chinese.eml", "spam.eml", "garbage.eml"]
    drop(folder, names, token)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    assert command(settings, "process", "--dry-run") == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "unsubscribe.eml: unsubscribe (token) c***@example.com",
        "subscribe-chinese.eml: subscribe (subject) z***@example.cn layout=en",
        "spam.eml: ignored (spam) e***@spam.example",
        "garbage.eml: unrecognised (no-command)",
        f"inbox {folder}: 4 mails waiting (dry run: nothing done, nothing moved)",
    ]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert outbox(settings) == []
    assert status_of(settings, "carol@example.com").status == "active"
    assert status_of(settings, "zhang.san@example.cn") is None


def test_command_reports_an_unreadable_inbox_as_its_error(settings):
    folder = inbox_folder(settings)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder")
    with pytest.raises(InboxError, match="cannot list") as caught:
        command(settings, "process")
    assert caught.value.exit_code == 1


def test_command_help_names_the_action(settings, capsys):
    with pytest.raises(SystemExit) as done:
        command(settings, "process", "--help")
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--dry-run" in out and "订阅" in out


def test_fixtures_are_present():
    # guards the parametrised tests above against a renamed or missing fixture
    assert sorted(p.stem + ".eml" for p in INBOUND.glob("*.mail")) == sorted(EXPECTED)
