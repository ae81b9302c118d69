"""The subscription app over real HTTP: uvicorn on 127.0.0.1, the real SQLite store, the
real outbox. What a subscriber, a mail provider and an attacker each meet."""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.app_server import App, free_port, let_go, project_settings, request, serve_app
from support.commands import run_newsletter
from support.project import SAMPLE_WEEK

from pipeline.web.mail_queue import MailQueue
from subscribers.model import Subscriber
from subscribers.subscriptions import Policy
from subscribers.tokens import Keys, Purpose, make_token

BASE = "http://127.0.0.1:8000"
FROM_ARCHIVE = {"Origin": BASE}


class Clock:
    """A clock the test moves; the app reads it for every request."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


def relayed(tmp_path, smtp_port: int):
    """Settings whose mail goes to the relay on ``smtp_port`` (https links: a real
    transport's, RFC 8058; the app itself is served over http)."""
    port = free_port()
    settings = project_settings(tmp_path, port, (
        f'[delivery]\ntransport = "smtp"\n'
        f'[smtp]\nhost = "127.0.0.1"\nport = {smtp_port}\nstarttls = false\n'))
    return replace(settings, site=replace(settings.site, app_url=f"https://127.0.0.1:{port}"))


@pytest.fixture
def settings_for(tmp_path):
    def make(extra: str = ""):
        return project_settings(tmp_path, free_port(), extra)

    return make


@pytest.fixture
def app(settings_for):
    with serve_app(settings_for()) as served:
        yield served


def confirm_url(message) -> str:
    text = message.get_body(("plain",)).get_content()
    found = re.search(r"http://\S+/confirm\?token=[a-z2-7]{56}", text)
    assert found is not None, text
    return found.group(0)


def token_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def reader(app: App, address: str, **fields: Any) -> Subscriber:
    """An active subscriber, as the tests store one."""
    added: Subscriber = app.store.add(address, status="active", source="test",
                                      now=datetime.now(UTC), **fields).subscriber
    return added


def link(app: App, purpose: Purpose, subscriber_id: str) -> str:
    """The path of a signed ``purpose`` link that does not expire."""
    return f"/{purpose}?token={make_token(app.subscriptions.keys, purpose, subscriber_id, None)}"


def subscribe(app: App, address: str, layout: str = "zh-en", headers=None, *,
              settle: bool = True):
    return app.request("POST", "/subscribe", form={"email": address, "layout": layout},
                       headers=FROM_ARCHIVE if headers is None else headers, settle=settle)


# -- the whole way: subscribe → confirm → an issue → one-click unsubscribe ------------------------

@pytest.mark.subprocess
def test_subscribe_confirm_receive_an_issue_then_unsubscribe_in_one_click(tmp_path, app):
    form = app.request("GET", "/subscribe")
    assert form.status == 200 and 'name="email"' in form.body and 'name="website"' in form.body

    answer = subscribe(app, "Reader@Example.org", "en")
    assert answer.status == 200 and "Check your inbox" in answer.body
    [mail] = app.outbox()
    assert mail["To"] == "Reader@example.org"
    assert "Confirm your subscription" in str(mail["Subject"])
    assert mail["List-Unsubscribe"] is None  # not on the list yet
    link = confirm_url(mail)
    assert app.store.find("reader@example.org").status == "pending"

    # A scanner fetching the link confirms nothing; the page has one button.
    page = request("GET", link)
    assert page.status == 200 and "Confirm subscription" in page.body
    assert app.store.find("reader@example.org").status == "pending"
    assert re.search(r'<form method="post" action="[^"]+/confirm">', page.body)

    done = app.request("POST", "/confirm", form={"token": token_of(link)})
    assert done.status == 200 and "Thank you for confirming" in done.body
    reader = app.store.find("reader@example.org")
    assert reader.status == "active" and reader.layout == "en"
    assert reader.consent_source == "web" and reader.consent_ip == "127.0.0.1"
    assert reader.consent_at is not None

    # The weekly job, as the operator runs it, in another process on the same store.
    for args in (["build", "--week", SAMPLE_WEEK], ["send", "--week", SAMPLE_WEEK]):
        result = run_newsletter(args, tmp_path)
        assert result.returncode == 0, result.stderr
    [issue_mail] = (tmp_path / "build" / "issues" / SAMPLE_WEEK / "outbox").glob("*.eml")
    from email import message_from_bytes, policy

    issue = message_from_bytes(issue_mail.read_bytes(), policy=policy.default)
    assert issue["To"] == "Reader@example.org"
    assert issue["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    one_click_match = re.match(r"<([^>]+)>", issue["List-Unsubscribe"])
    assert one_click_match is not None
    one_click = one_click_match.group(1)
    assert one_click.startswith(app.url + "/unsubscribe?token=")

    # RFC 8058: the provider POSTs to that URL; no Origin, no cookies, no next step.
    gone = request("POST", one_click, body=b"List-Unsubscribe=One-Click",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert gone.status == 200 and "You are unsubscribed" in gone.body
    assert app.store.find("reader@example.org").status == "unsubscribed"
    # Twice is harmless.
    assert request("POST", one_click, body=b"List-Unsubscribe=One-Click",
                   headers={"Content-Type": "application/x-www-form-urlencoded"}).status == 200


@pytest.mark.parametrize(("body", "content_type"), [
    (b'--xYzZy\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\n'
     b"One-Click\r\n--xYzZy--\r\n", "multipart/form-data; boundary=xYzZy"),
    (b"List-Unsubscribe=One", "multipart/form-data"),  # no boundary: broken
], ids=["multipart", "broken"])
def test_one_click_unsubscribe_accepts_multipart_and_a_broken_body(app, body, content_type):
    sub = reader(app, "m@example.org")
    answer = app.request("POST", link(app, "unsubscribe", sub.id), body=body,
                         headers={"Content-Type": content_type})
    assert answer.status == 200
    assert app.store.get(sub.id).status == "unsubscribed"


def test_unsubscribe_page_asks_first_and_its_button_unsubscribes(app):
    sub = reader(app, "u@example.org")
    page = app.request("GET", link(app, "unsubscribe", sub.id))
    assert page.status == 200 and 'name="List-Unsubscribe" value="One-Click"' in page.body
    assert app.store.get(sub.id).status == "active"
    form = re.search(r'<form method="post" action="([^"]+)">', page.body)
    assert form is not None, page.body
    action = form.group(1)
    answer = request("POST", action.replace("&amp;", "&"),
                     form={"List-Unsubscribe": "One-Click"})
    assert answer.status == 200
    assert app.store.get(sub.id).status == "unsubscribed"
    assert "You are unsubscribed" in app.request("GET", link(app, "unsubscribe", sub.id)).body


# -- no enumeration -------------------------------------------------------------------------------

#: Every state an address can be in when someone asks to subscribe it.
STATES = ("new", "pending", "active", "unsubscribed", "bounced", "complained", "removed")


def in_every_state(store) -> dict[str, str]:
    """An address per state of :data:`STATES`, stored so (state → address)."""
    now = datetime.now(UTC)
    addresses = {state: f"{state}@example.org" for state in STATES}
    store.add(addresses["pending"], source="test", now=now)
    for state in ("active", "unsubscribed", "bounced", "complained", "removed"):
        sub = store.add(addresses[state], status="active", source="test", now=now).subscriber
        if state in ("unsubscribed", "bounced", "complained"):
            store.set_status(sub.id, state, now)
    store.remove(addresses["removed"], now)
    return addresses


class RecordingStore:
    """The real store, with every call's method name recorded; calls to ``held`` methods
    wait until ``unblock`` is set, so a test can look at what ran before an answer. (Not
    ``release``: that would hide the store's own ``release``.)"""

    def __init__(self, store, held: set[str]) -> None:
        self._store, self._held = store, held
        self.calls: list[str] = []
        self.unblock = threading.Event()

    def __getattr__(self, name: str):
        attribute = getattr(self._store, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            if name in self._held:  # recorded once released: it did not run before
                assert self.unblock.wait(30), "never released"
            self.calls.append(name)
            return attribute(*args, **kwargs)

        return call


def work_per_state(app: App) -> dict[str, tuple[Any, ...]]:
    """For each state: (status, body, headers without Date, store calls made before the
    answer, jobs queued for it, store calls made after it)."""
    addresses = in_every_state(app.store)
    real = app.subscriptions.store
    assert app.mail_queue is not None  # serve_app makes one
    seen = {}
    try:
        for state, address in addresses.items():
            recorder = RecordingStore(real, held={"request_subscription"})
            app.subscriptions.store = recorder
            queued = app.mail_queue.queued
            answer = subscribe(app, address, settle=False)
            before = tuple(recorder.calls)  # the job is held at its first store call
            recorder.unblock.set()
            app.settle()
            headers = tuple(sorted(answer.headers.items() - {("date", answer.header("date"))}))
            seen[state] = (answer.status, answer.body, headers, before,
                           app.mail_queue.queued - queued,
                           tuple(recorder.calls[len(before):]))
    finally:
        app.subscriptions.store = real
    return seen


def test_every_address_state_gets_the_same_answer_after_the_same_work(app):
    """Every state answers alike after the same store calls, so timing tells no address's state."""
    seen = work_per_state(app)
    assert set(seen.values()) == {seen["new"]}, {
        state: (s[0], s[3], s[4], s[5]) for state, s in seen.items()}
    status, body, _, before, queued, after = seen["new"]
    assert status == 200 and "Check your inbox" in body
    assert before == ("take_quota",)  # the per-client limit: all the answer waits for
    assert queued == 1
    assert after == ("request_subscription", "take_quota")  # its allowance, then the mail

    by_recipient = {str(m["To"]): str(m["Subject"]) for m in app.outbox()}
    for state in ("new", "pending"):
        assert "Confirm" in by_recipient[f"{state}@example.org"]  # a new consent is due
    assert "Subscribe again" in by_recipient["unsubscribed@example.org"]
    assert "You are subscribed" in by_recipient["active@example.org"]
    for state in ("bounced", "complained", "removed"):  # no link could bring them back
        assert f"{state}@example.org" not in by_recipient
    assert app.store.find("removed@example.org") is None
    for state in ("active", "unsubscribed", "bounced", "complained"):  # asking changes none
        assert app.store.find(f"{state}@example.org").status == state


def test_with_the_transport_down_every_state_still_gets_the_same_answer(tmp_path, caplog):
    settings = relayed(tmp_path, free_port())  # nothing listens there
    caplog.set_level(logging.INFO, logger="newsletter.app")
    with serve_app(settings, environ={"NEWSLETTER_SECRET": "s" * 32},
                   mail_queue=MailQueue(retries=0)) as app:
        seen = work_per_state(app)
    assert {s[:5] for s in seen.values()} == {(*seen["new"][:4], 1)}
    assert seen["new"][0] == 200 and "Check your inbox" in seen["new"][1]
    # After the answer: the allowance of a mail that did not leave is given back.
    assert seen["new"][5] == ("request_subscription", "take_quota", "return_quota")
    for state in ("removed", "bounced", "complained"):  # nothing to send
        assert seen[state][5] == ("request_subscription", "take_quota")
    assert caplog.text.count("subscribe: not done: SendingStopped") == len(STATES) - 3


def test_an_active_subscribers_layout_cannot_be_changed_by_a_stranger(app):
    app.store.add("fixed@example.org", "zh", status="active", source="test",
                  now=datetime.now(UTC))
    subscribe(app, "fixed@example.org", "en")
    assert app.store.find("fixed@example.org").layout == "zh"


def test_an_invalid_address_is_said_so_and_nothing_is_stored(app):
    answer = subscribe(app, "not an address")
    assert answer.status == 400 and "does not look like an email address" in answer.body
    assert 'value="not an address"' in answer.body
    assert app.outbox() == []
    assert app.store.count_by_status()["pending"] == 0


# -- the form's defences --------------------------------------------------------------------------

@pytest.mark.parametrize(("headers", "status"), [
    ({"Origin": "https://evil.example"}, 403),
    ({"Origin": "null"}, 403),
    ({"Referer": "https://evil.example/page.html"}, 403),
    ({"Referer": "http://[bad"}, 403),  # does not parse: refused, not a crash
    ({"Origin": "{app}"}, 200),  # the app's own form
    ({"Referer": BASE + "/index.html"}, 200),  # the archive's
    ({}, 200),  # a client that sends neither
], ids=["other-origin", "null-origin", "other-referer", "broken-referer", "app", "archive",
        "neither"])
def test_only_a_form_from_another_site_is_refused(app, headers, status):
    sent = {name: value.format(app=app.url) for name, value in headers.items()}
    assert subscribe(app, "reader@example.org", headers=sent).status == status
    refused = status == 403
    assert len(app.outbox()) == (0 if refused else 1)
    assert (app.store.find("reader@example.org") is None) == refused


def test_the_honeypot_field_makes_the_request_do_nothing(app):
    answer = app.request("POST", "/subscribe", headers=FROM_ARCHIVE, form={
        "email": "bot@example.org", "layout": "zh-en", "website": "http://spam.example"})
    assert answer.status == 200 and "Check your inbox" in answer.body
    assert app.store.find("bot@example.org") is None and app.outbox() == []


def test_requests_are_limited_per_client_and_per_address(settings_for):
    with serve_app(settings_for(), policy=Policy(client_per_hour=3, address_per_day=2)) as app:
        assert subscribe(app, "x@example.org").status == 200
        assert subscribe(app, "x@example.org").status == 200
        third = subscribe(app, "x@example.org")
        assert third.status == 200  # the address limit answers the same page...
        assert len(app.outbox()) == 2  # ...and sends nothing more
        limited = subscribe(app, "y@example.org")
        assert limited.status == 429 and limited.header("retry-after") == "3600"
        assert app.store.find("y@example.org") is None


def test_the_address_limit_counts_per_mailbox_not_per_spelling(settings_for):
    """The limit is the mailbox's (no +tag, no dots at Gmail), not each spelling's three a day."""
    spellings = ("victim@gmail.com", "victim+1@gmail.com", "Victim+2@gmail.com",
                 "v.i.c.t.i.m@gmail.com", "vic.tim+news@googlemail.com")
    others = ("victim@example.org", "victim+1@example.org", "v.ictim@example.org")
    with serve_app(settings_for(), policy=Policy(address_per_day=2)) as app:
        answers = [subscribe(app, address) for address in (*spellings, *others)]
        assert {(a.status, a.body) for a in answers} == {(200, answers[0].body)}
        mailed = [str(m["To"]) for m in app.outbox()]
    # Two for the Gmail mailbox, two for victim@example.org; v.ictim@example.org is
    # another mailbox (dots count outside Gmail).
    assert mailed == ["victim@gmail.com", "victim+1@gmail.com", "victim@example.org",
                      "victim+1@example.org", "v.ictim@example.org"]


def test_too_large_a_form_is_refused_before_it_is_read(app):
    answer = app.request("POST", "/subscribe", headers={**FROM_ARCHIVE,
                         "Content-Type": "application/x-www-form-urlencoded"},
                         body=b"email=" + b"a" * 40_000)
    assert answer.status == 413


# -- tokens: nothing changes on a refusal ----------------------------------------------------------

@pytest.fixture
def pending(app):
    subscribe(app, "p@example.org")
    return app.store.find("p@example.org"), token_of(confirm_url(app.outbox()[-1]))


def flipped(token: str) -> str:
    return token[:20] + ("a" if token[20] != "a" else "b") + token[21:]


@pytest.mark.parametrize(("method", "path", "token"), [
    ("GET", "/confirm", "forged"),
    ("POST", "/confirm", "forged"),
    ("POST", "/confirm", "unsubscribe"),  # a token for another purpose
    ("POST", "/unsubscribe", "confirm"),
    ("GET", "/preferences", "confirm"),
    ("POST", "/confirm/resend", "confirm"),  # still valid: nothing to resend
    ("POST", "/confirm/resend", "forged"),
])
def test_a_refused_token_changes_nothing(app, pending, method, path, token):
    sub, confirm = pending
    tokens = {"confirm": confirm, "forged": flipped(confirm),
              "unsubscribe": make_token(app.subscriptions.keys, "unsubscribe", sub.id, None)}
    mails = len(app.outbox())
    if path == "/confirm/resend":  # its form carries the token
        answer = app.request(method, path, form={"token": tokens[token]})
    else:
        answer = app.request(method, f"{path}?token={tokens[token]}")
    assert answer.status == 400 and "This link does not work" in answer.body
    assert app.store.get(sub.id).status == "pending"
    assert len(app.outbox()) == mails


def test_confirming_twice_is_harmless_and_keeps_the_first_consent(app, pending):
    sub, token = pending
    assert app.request("POST", f"/confirm?token={token}").status == 200
    first = app.store.get(sub.id)
    assert first.status == "active"
    again = app.request("POST", f"/confirm?token={token}")
    assert again.status == 200 and "Thank you for confirming" in again.body
    assert app.store.get(sub.id) == first


def test_an_old_confirmation_link_never_undoes_leaving_and_tells_nothing(app):
    """Only a pending address is confirmed; the pages read alike whatever became of it."""
    now = datetime.now(UTC)
    pages, status = {}, {}
    for state in ("pending", "active", "unsubscribed", "bounced", "complained", "removed"):
        address = f"{state}@example.org"
        subscribe(app, address)
        token = token_of(confirm_url(app.outbox()[-1]))
        sid = app.store.find(address).id
        if state != "pending":
            assert app.request("POST", "/confirm", form={"token": token}).status == 200
        if state in ("unsubscribed", "bounced", "complained"):
            app.store.set_status(sid, state, now)
        elif state == "removed":
            app.store.remove(address, now)
        answers = (app.request("GET", f"/confirm?token={token}"),
                   app.request("POST", "/confirm", form={"token": token}))
        pages[state] = tuple((a.status, a.body.replace(token, "TOKEN")) for a in answers)
        status[state] = getattr(app.store.get(sid), "status", None)
    assert status == {"pending": "active", "active": "active", "unsubscribed": "unsubscribed",
                      "bounced": "bounced", "complained": "complained", "removed": None}
    assert set(pages.values()) == {pages["pending"]}
    (get_status, get_body), (post_status, post_body) = pages["pending"]
    assert (get_status, post_status) == (200, 200) and "Confirm subscription" in get_body
    assert "preferences?token=" not in post_body  # no link a stranger's old link could use


def test_who_unsubscribed_comes_back_by_the_mailed_preferences_link_not_a_confirmation(
        settings_for):
    clock = Clock()
    with serve_app(settings_for(), clock=clock) as app:
        subscribe(app, "back@example.org")
        old = token_of(confirm_url(app.outbox()[-1]))
        sid = app.store.find("back@example.org").id
        app.store.set_status(sid, "unsubscribed", clock.now)
        clock.now += timedelta(days=8)  # the old link expired: a new one is not sent
        assert app.request("POST", "/confirm/resend", form={"token": old}).status == 200
        subscribe(app, "back@example.org")
        mails = app.outbox()
        assert len(mails) == 2 and "Subscribe again" in str(mails[-1]["Subject"])
        plain = mails[-1].get_body(("plain",))
        assert plain is not None
        link = re.search(r"http://\S+/preferences\?token=[a-z2-7]{56}", plain.get_content())
        assert link is not None
        back = request("POST", link.group(0), form={"action": "resubscribe"})
        assert "Subscribed again" in back.body
        assert app.store.get(sid).status == "active"


def test_an_expired_link_offers_a_new_mail(settings_for):
    clock = Clock()
    with serve_app(settings_for(), clock=clock) as app:
        subscribe(app, "late@example.org")
        token = token_of(confirm_url(app.outbox()[-1]))
        clock.now += timedelta(days=8)
        page = app.request("GET", f"/confirm?token={token}")
        assert page.status == 410 and "expired" in page.body
        assert app.request("POST", f"/confirm?token={token}").status == 410
        assert app.store.find("late@example.org").status == "pending"
        resend = re.search(r'action="([^"]+/confirm/resend)"', page.body)
        assert resend is not None, page.body
        action = resend.group(1)
        resent = request("POST", action, form={"token": token})
        assert resent.status == 200 and "new confirmation mail" in resent.body
        new_link = confirm_url(app.outbox()[-1])
        assert token_of(new_link) != token
        assert app.request("POST", f"/confirm?token={token_of(new_link)}").status == 200
        assert app.store.find("late@example.org").status == "active"


def test_links_signed_before_a_key_rotation_keep_working(settings_for):
    old, new = "o" * 32, "n" * 32
    settings = settings_for()
    with serve_app(settings, environ={"NEWSLETTER_SECRET": old}) as app:
        sub = reader(app, "r@example.org")
    old_token = make_token(Keys(signing=old.encode()), "unsubscribe", sub.id, None)
    stranger = make_token(Keys(signing=b"s" * 32), "unsubscribe", sub.id, None)
    rotated = {"NEWSLETTER_SECRET": new, "NEWSLETTER_SECRET_PREVIOUS": old}
    with serve_app(settings, environ=rotated) as app:
        assert app.request("POST", f"/unsubscribe?token={stranger}").status == 400
        assert app.store.get(sub.id).status == "active"
        assert app.request("POST", f"/unsubscribe?token={old_token}").status == 200
        assert app.store.get(sub.id).status == "unsubscribed"
    with serve_app(settings, environ={"NEWSLETTER_SECRET": new}) as app:  # old key retired
        app.store.set_status(sub.id, "active", datetime.now(UTC))
        assert app.request("POST", f"/unsubscribe?token={old_token}").status == 400
        assert app.store.get(sub.id).status == "active"


def test_a_removed_subscribers_links_say_so(app):
    now = datetime.now(UTC)
    sub = reader(app, "bye@example.org")
    app.store.remove("bye@example.org", now)
    assert app.request("GET", link(app, "preferences", sub.id)).status == 410
    assert app.request("POST", link(app, "unsubscribe", sub.id)).status == 200
    assert app.store.find("bye@example.org") is None


# -- preferences ----------------------------------------------------------------------------------

def test_preferences_change_the_layout_unsubscribe_and_subscribe_again(app):
    sub = reader(app, "pref@example.org")
    url = link(app, "preferences", sub.id)
    page = app.request("GET", url)
    assert page.status == 200 and "pref@example.org" in page.body
    assert re.search(r'value="zh-en" checked', page.body)
    saved = app.request("POST", url, form={"action": "layout", "layout": "en"})
    assert saved.status == 200 and "Saved" in saved.body
    assert app.store.get(sub.id).layout == "en"
    assert app.request("POST", url, form={"action": "layout", "layout": "xx"}).status == 400
    left = app.request("POST", url, form={"action": "unsubscribe"})
    assert "Unsubscribed" in left.body and app.store.get(sub.id).status == "unsubscribed"
    assert 'value="resubscribe"' in left.body
    back = app.request("POST", url, form={"action": "resubscribe"})
    assert "Subscribed again" in back.body
    again = app.store.get(sub.id)
    assert again.status == "active" and again.consent_source == "preferences"


def test_preferences_do_not_bring_back_a_complaint(app):
    now = datetime.now(UTC)
    sub = reader(app, "c@example.org")
    app.store.set_status(sub.id, "complained", now)
    url = link(app, "preferences", sub.id)
    page = app.request("GET", url)
    assert "marked our mail as spam" in page.body and 'value="resubscribe"' not in page.body
    app.request("POST", url, form={"action": "resubscribe"})
    assert app.store.get(sub.id).status == "complained"


@pytest.mark.parametrize(("read_as", "write"), [
    ("unsubscribed", lambda subs, read, now: subs.resubscribe(read, client=None, now=now)),
    ("active", lambda subs, read, now: subs.leave(read, now)),
], ids=["resubscribe", "leave"])
def test_a_complaint_that_lands_after_the_read_is_kept(app, read_as, write):
    """Resubscribing and leaving are judged in the store's write, not on the status read."""
    now = datetime.now(UTC)
    sub = reader(app, "race@example.org")
    read = app.store.set_status(sub.id, read_as, now)
    app.store.set_status(sub.id, "complained", now)  # lands between the read and the write
    assert write(app.subscriptions, read, now).status == "complained"
    assert app.store.get(sub.id).status == "complained"


# -- pages: small, bilingual, safe ----------------------------------------------------------------

def test_every_page_carries_the_security_headers_and_both_languages(app, pending):
    _, token = pending
    for method, path in [("GET", "/subscribe"), ("GET", f"/confirm?token={token}"),
                         ("GET", "/confirm?token=nope"), ("GET", "/nowhere")]:
        answer = app.request(method, path)
        csp = answer.header("content-security-policy")
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "script-src" not in csp  # no script is allowed at all
        # Token pages never leak their address; the form page must keep its Origin.
        expected = "same-origin" if path == "/subscribe" else "no-referrer"
        assert answer.header("referrer-policy") == expected
        assert answer.header("x-content-type-options") == "nosniff"
        assert answer.header("cache-control") == "no-store"
        assert answer.header("server") is None
        assert 'lang="zh-CN"' in answer.body and 'lang="en"' in answer.body
        assert "<script" not in answer.body
    assert app.request("GET", "/nowhere").status == 404
    wrong = app.request("DELETE", "/subscribe")
    assert wrong.status == 405 and "GET" in wrong.header("allow")


def test_the_inline_stylesheet_is_the_one_the_policy_allows(app):
    import base64
    import hashlib

    answer = app.request("GET", "/subscribe")
    style = re.search(r"<style>(.*?)</style>", answer.body, re.S)
    assert style is not None, answer.body
    css = style.group(1)
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in answer.header("content-security-policy")


def test_no_token_reaches_the_log(app, pending, caplog):
    sub, token = pending
    caplog.set_level(logging.DEBUG)
    app.request("GET", f"/confirm?token={token}")
    app.request("POST", f"/confirm?token={token}")
    unsubscribe = make_token(app.subscriptions.keys, "unsubscribe", sub.id, None)
    app.request("POST", f"/unsubscribe?token={unsubscribe}")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert token not in text and unsubscribe not in text and "p@example.org" not in text


def test_the_app_can_live_under_a_path(tmp_path):
    port = free_port()
    settings = project_settings(tmp_path, port)
    settings = replace(settings, site=replace(settings.site,
                                              app_url=f"http://127.0.0.1:{port}/api"))
    with serve_app(settings) as app:
        assert app.request("GET", "/subscribe").status == 200  # app.url ends in /api
        assert request("GET", f"http://127.0.0.1:{port}/subscribe").status == 404
        subscribe(app, "api@example.org", headers={"Origin": f"http://127.0.0.1:{port}"})
        assert f"127.0.0.1:{port}/api/confirm?token=" in confirm_url(app.outbox()[-1])


# -- the command ----------------------------------------------------------------------------------

@pytest.mark.subprocess
def test_serve_refuses_a_real_transport_without_a_secret(tmp_path):
    project_settings(tmp_path, let_go(free_port()), '[delivery]\ntransport = "ses"\n')
    result = run_newsletter(["serve"], tmp_path)
    assert result.returncode == 2
    assert "NEWSLETTER_SECRET" in result.stderr and "Traceback" not in result.stderr


# -- through a real SMTP server -----------------------------------------------------------------

def test_the_confirmation_goes_through_smtp_and_a_failed_send_costs_no_allowance(
        tmp_path, smtp_server):
    settings = project_settings(tmp_path, free_port(), (
        f'[delivery]\ntransport = "smtp"\n'
        f'[smtp]\nhost = "{smtp_server.host}"\nport = {smtp_server.port}\nstarttls = false\n'))
    with serve_app(settings, environ={"NEWSLETTER_SECRET": "s" * 32},
                   policy=Policy(address_per_day=1), mail_queue=MailQueue(retries=0)) as app:
        smtp_server.fail_next("smtp@example.org", 451, "4.3.0 try again later")
        failed = subscribe(app, "smtp@example.org")  # answered first, mailed after
        assert failed.status == 200 and "Check your inbox" in failed.body
        assert smtp_server.received == []

        assert subscribe(app, "smtp@example.org").status == 200  # the allowance was returned
        [received] = smtp_server.wait_for(1)
        assert received.rcpt_tos == ("smtp@example.org",)
        link = confirm_url(received.message())
        assert app.request("POST", f"/confirm?token={token_of(link)}").status == 200
        assert app.store.find("smtp@example.org").status == "active"

        assert subscribe(app, "smtp@example.org").status == 200  # now over the allowance
        assert len(smtp_server.received) == 1


# -- areas: the repeated ``areas`` field of the subscribe form and the preferences -----------------

def post_pairs(app: App, path: str, pairs: list[tuple[str, str]], headers=None):
    """A form POST with repeated fields (``request``'s ``form`` holds one value a name)."""
    from urllib.parse import urlencode

    return app.request("POST", path, body=urlencode(pairs).encode("utf-8"), headers={
        "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})


def area_boxes(body: str) -> dict[str, bool]:
    """The area checkboxes of a page: value → checked (values unescaped)."""
    import html

    return {html.unescape(value): bool(checked) for value, checked in re.findall(
        r'<input type="checkbox" name="areas" value="([^"]*)"( checked)?>', body)}


def test_no_catalog_no_fieldset_and_a_form_without_areas_follows_none(app):
    form = app.request("GET", "/subscribe")
    assert form.status == 200 and 'name="areas"' not in form.body and "<fieldset" not in form.body
    subscribe(app, "plain@example.org")
    assert app.store.find("plain@example.org").areas == ()


def test_the_subscribe_form_offers_the_catalog_and_keeps_the_pick_through_confirm(app):
    app.store.note_areas(["rocm", "kv-connector", "multimodal"])
    form = app.request("GET", "/subscribe")
    assert area_boxes(form.body) == {"kv-connector": False, "multimodal": False,
                                     "rocm": False}
    assert re.search(r"<fieldset class=\"areas\"[^>]*>\s*<legend>", form.body)
    answer = post_pairs(app, "/subscribe", [
        ("email", "Fan@Example.org"), ("layout", "en"), ("areas", "ROCm"),
        ("areas", "kv-connector"), ("areas", "rocm"), ("areas", "")], FROM_ARCHIVE)
    assert answer.status == 200 and "Check your inbox" in answer.body
    pending = app.store.find("fan@example.org")
    assert pending.status == "pending" and pending.areas == ("kv-connector", "rocm")
    [mail] = app.outbox()
    done = app.request("POST", "/confirm", form={"token": token_of(confirm_url(mail))})
    assert done.status == 200
    reader = app.store.find("fan@example.org")
    assert reader.status == "active" and reader.areas == ("kv-connector", "rocm")
    assert app.store.variant_choices() == [("en", ("kv-connector", "rocm"))]


@pytest.mark.parametrize("hostile", ["tpu", "../x", "<script>alert(1)</script>",
                                     "%%unsubscribe_url%%", "x" * 500, "a\u0000b"])
def test_an_area_not_on_the_list_is_refused_with_the_form_again(app, hostile):
    app.store.note_areas(["rocm", "multimodal"])
    answer = post_pairs(app, "/subscribe", [
        ("email", "h@example.org"), ("areas", "rocm"), ("areas", hostile)], FROM_ARCHIVE)
    assert answer.status == 400
    assert "Some areas are not on the list" in answer.body and "有的领域不在列表中" in answer.body
    assert area_boxes(answer.body) == {"multimodal": False, "rocm": True}  # the pick kept
    assert hostile not in answer.body and "<script>alert" not in answer.body
    assert 'value="h@example.org"' in answer.body
    assert app.store.find("h@example.org") is None and app.outbox() == []


def test_more_areas_than_one_may_follow_are_refused_and_the_largest_pick_is_accepted(app):
    """At most MAX_AREAS areas; so many, each name at its longest, is not too large a form."""
    from subscribers.areas import MAX_AREA_LENGTH, MAX_AREAS

    names = [f"{n:02}" + "領" * (MAX_AREA_LENGTH - 2) for n in range(MAX_AREAS + 1)]
    app.store.note_areas(names)

    def pick(count: int):
        return post_pairs(app, "/subscribe", [("email", "many@example.org"), ("layout", "zh"),
                                              *[("areas", name) for name in names[:count]]],
                          FROM_ARCHIVE)

    answer = pick(MAX_AREAS + 1)
    assert answer.status == 400 and "Too many areas" in answer.body
    assert f"at most {MAX_AREAS} areas" in answer.body and f"{MAX_AREAS} 个" in answer.body
    assert app.store.find("many@example.org") is None
    assert pick(MAX_AREAS).status == 200
    assert app.store.find("many@example.org").areas == tuple(sorted(names[:-1]))


def test_preferences_show_the_catalog_and_the_readers_own_areas(app):
    app.store.note_areas(["rocm", "multimodal", "<b>bold</b>"])
    sub = reader(app, "pick@example.org", areas=["tpu", "rocm"])
    url = link(app, "preferences", sub.id)
    page = app.request("GET", url)
    # tpu is no longer in the catalog, but it is theirs: still shown, still checked.
    assert area_boxes(page.body) == {"<b>bold</b>": False, "multimodal": False, "rocm": True,
                                     "tpu": True}
    assert "<b>bold</b>" not in page.body and "&lt;b&gt;bold&lt;/b&gt;" in page.body
    assert 'name="areas_shown" value="1"' in page.body

    saved = post_pairs(app, url, [("action", "layout"), ("layout", "en"), ("areas_shown", "1"),
                                  ("areas", "tpu"), ("areas", "multimodal")])
    assert saved.status == 200 and "Saved" in saved.body
    now = app.store.get(sub.id)
    assert (now.layout, now.areas) == ("en", ("multimodal", "tpu"))
    assert area_boxes(saved.body)["multimodal"] and not area_boxes(saved.body)["rocm"]

    refused = post_pairs(app, url, [("action", "layout"), ("layout", "zh"),
                                    ("areas_shown", "1"), ("areas", "cuda")])
    assert refused.status == 400 and "Not saved" in refused.body and "cuda" not in refused.body
    assert app.store.get(sub.id) == now  # nothing changed, the layout neither

    none = post_pairs(app, url, [("action", "layout"), ("layout", "en"), ("areas_shown", "1")])
    assert none.status == 200 and app.store.get(sub.id).areas == ()
    # Once given up, an area out of the catalog is gone from the list, and refused.
    assert "tpu" not in area_boxes(none.body)
    assert post_pairs(app, url, [("action", "layout"), ("layout", "en"),
                                 ("areas_shown", "1"), ("areas", "tpu")]).status == 400


def test_a_layout_form_that_did_not_show_the_areas_keeps_them(app):
    sub = reader(app, "keep@example.org", areas=["rocm"])
    url = link(app, "preferences", sub.id)
    assert app.request("POST", url, form={"action": "layout", "layout": "zh"}).status == 200
    assert app.store.get(sub.id).areas == ("rocm",) and app.store.get(sub.id).layout == "zh"


def test_area_fields_need_the_token_and_the_same_site_as_every_form(app):
    app.store.note_areas(["rocm"])
    sub = reader(app, "tok@example.org")
    forged = post_pairs(app, "/preferences?token=" + "a" * 56,
                        [("action", "layout"), ("layout", "en"), ("areas_shown", "1"),
                         ("areas", "rocm")])
    assert forged.status == 400 and app.store.get(sub.id).areas == ()
    elsewhere = post_pairs(app, "/subscribe", [("email", "x@example.org"), ("areas", "rocm")],
                           {"Origin": "https://evil.example"})
    assert elsewhere.status == 403 and app.store.find("x@example.org") is None


def test_every_page_names_the_sender_as_the_email_does(settings_for):
    """A form asking for an address says who asks: the publisher and postal address, escaped."""
    settings = settings_for('[delivery]\npublisher = "vLLM 周报 <i>team</i>"\n'
                            'postal_address = "1 Example Road, Shanghai"\n')
    with serve_app(settings) as app:
        for path in ("/subscribe", "/confirm?token=nonsense", "/no-such-page"):
            page = app.request("GET", path).body
            foot = page[page.index("<footer>"):]
            assert "Sent by" in foot and "vLLM 周报 &lt;i&gt;team&lt;/i&gt;" in foot, path
            assert "1 Example Road, Shanghai" in foot, path
