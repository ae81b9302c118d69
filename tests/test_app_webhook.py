"""POST /webhooks/ses over real HTTP: SNS messages signed with a test key whose certificate a
real HTTPS server on 127.0.0.1 serves (the verifier's allowed host points at it only here),
carrying SES events in both documented shapes (payloads from tests/test_ses_events.py)."""

from __future__ import annotations

import copy
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from support.app_server import App, free_port, project_settings, serve_app
from support.sns_support import (
    TOPIC,
    CertServer,
    Route,
    body,
    cert_server,
    confirmation,
    new_signer,
    notification,
    sign,
)
from test_app import reader
from test_ses_events import (
    BOUNCE_WITH_DSN,
    COMPLAINT_WITH_REPORT,
    DELIVERY,
    EVENT_BOUNCE,
    EVENT_COMPLAINT,
)

from pipeline.web.sns import CertificateSource, SnsVerifier

LOOPBACK = re.compile(r"^127\.0\.0\.1$")
STRANGER = "arn:aws:sns:us-east-1:999999999999:not-ours"
SNS_HEADERS = {"Content-Type": "text/plain; charset=UTF-8",
               "x-amz-sns-message-type": "Notification"}


@pytest.fixture(scope="module")
def signer():
    return new_signer()


@pytest.fixture
def certs(tls, signer):
    with cert_server(tls.server, {
            "/SimpleNotificationService-test.pem": Route(signer.pem),
            "/confirm": Route(b"<ConfirmSubscriptionResponse/>")}) as server:
        yield server


@pytest.fixture
def app(tmp_path, tls):
    verifier = SnsVerifier(CertificateSource(host_pattern=LOOPBACK, ssl_context=tls.client),
                           [TOPIC])
    with serve_app(project_settings(tmp_path, free_port()), verifier=verifier) as served:
        yield served


def ses_message(document: dict[str, Any], address: str, *, message_id: str | None = None,
                **changes) -> str:
    """An SES payload (as AWS documents it) about ``address``, ``changes`` made in its
    bounce, complaint or delivery."""
    doc = copy.deepcopy(document)
    for part, key in (("bounce", "bouncedRecipients"), ("complaint", "complainedRecipients")):
        if part in doc:
            doc[part][key] = [{**doc[part][key][0], "emailAddress": address}]
            doc[part].update(changes)
    if "delivery" in doc:
        doc["delivery"]["recipients"] = [address]
        doc["delivery"].update(changes)
    doc["mail"]["destination"] = [address]
    if message_id is not None:
        doc["mail"]["messageId"] = message_id
    return json.dumps(doc)


def post(app: App, certs: CertServer, signer, message: str, *, topic: str = TOPIC,
         message_id: str | None = None, version: str = "1", tamper: bool = False):
    fields = notification(certs.url("/SimpleNotificationService-test.pem"), topic=topic,
                          message=message, when=datetime.now(UTC))
    fields["MessageId"] = message_id or str(uuid.uuid4())
    signed = sign(fields, signer, version)
    if tamper:
        signed["Message"] = signed["Message"].replace("Permanent", "Transient")
    return app.request("POST", "/webhooks/ses", body=body(signed), headers=SNS_HEADERS)


@pytest.mark.parametrize(("document", "changes", "status"), [
    (BOUNCE_WITH_DSN, {}, "bounced"),
    (EVENT_BOUNCE, {}, "bounced"),
    (COMPLAINT_WITH_REPORT, {}, "complained"),
    (EVENT_COMPLAINT, {}, "complained"),
    (COMPLAINT_WITH_REPORT, {"complaintFeedbackType": "not-spam"}, "active"),
], ids=["bounce-notification", "bounce-event-publishing", "complaint-notification",
        "complaint-event-publishing", "not-spam"])
@pytest.mark.parametrize("version", ["1", "2"])
def test_a_permanent_bounce_or_a_complaint_takes_the_address_off(app, certs, signer, document,
                                                                  changes, status, version):
    sid = reader(app, "reader@example.org").id
    answer = post(app, certs, signer, ses_message(document, "reader@example.org", **changes),
                  version=version)
    assert answer.status == 200
    assert app.store.get(sid).status == status


def test_transient_bounces_in_a_row_make_the_address_bounced(app, certs, signer):
    sid = reader(app, "full@example.org").id
    transient = ses_message(BOUNCE_WITH_DSN, "full@example.org", bounceType="Transient",
                            bounceSubType="MailboxFull")
    post(app, certs, signer, transient)
    post(app, certs, signer, transient)
    post(app, certs, signer, ses_message(DELIVERY, "full@example.org"))  # the run ends
    post(app, certs, signer, transient)
    post(app, certs, signer, transient)
    assert app.store.get(sid).status == "active"
    assert app.store.get(sid).transient_bounces == 2
    post(app, certs, signer, transient)  # the third in a row (limit 3)
    assert app.store.get(sid).status == "bounced"


def test_a_replayed_old_delivery_does_not_reset_the_transient_bounce_count(app, certs,
                                                                          signer):
    """SNS redelivers out of order: an old Delivery must not wipe newer transient bounces."""
    sid = reader(app, "replay@example.org").id

    def transient(when: str) -> str:
        return ses_message(BOUNCE_WITH_DSN, "replay@example.org", bounceType="Transient",
                           bounceSubType="MailboxFull", timestamp=when)

    old_delivery = ses_message(DELIVERY, "replay@example.org",
                               timestamp="2026-11-30T01:00:00.000Z")
    assert post(app, certs, signer, old_delivery).status == 200
    post(app, certs, signer, transient("2026-11-30T02:00:00.000Z"))
    post(app, certs, signer, transient("2026-11-30T03:00:00.000Z"))
    assert post(app, certs, signer, old_delivery).status == 200  # replayed, late
    assert app.store.get(sid).transient_bounces == 2
    post(app, certs, signer, transient("2026-11-30T04:00:00.000Z"))
    assert app.store.get(sid).status == "bounced"


def test_a_redelivered_message_counts_once(app, certs, signer):
    sid = reader(app, "twice@example.org").id
    transient = ses_message(BOUNCE_WITH_DSN, "twice@example.org", bounceType="Transient")
    for _ in range(3):
        assert post(app, certs, signer, transient, message_id="same-id").status == 200
    assert app.store.get(sid).transient_bounces == 1


@pytest.mark.parametrize(("topic", "tamper", "fetched"), [
    (TOPIC, True, 1),
    (STRANGER, False, 0),  # refused before its certificate is fetched
], ids=["tampered", "strangers-topic"])
def test_a_message_refused_changes_nothing(app, certs, signer, topic, tamper, fetched):
    sid = reader(app, "safe@example.org").id
    answer = post(app, certs, signer, ses_message(BOUNCE_WITH_DSN, "safe@example.org"),
                  topic=topic, tamper=tamper)
    assert answer.status == 403
    assert certs.connections == fetched
    assert app.store.get(sid).status == "active" and app.store.get(sid).transient_bounces == 0


def test_an_unreachable_certificate_asks_sns_to_retry(app, certs, signer):
    sid = reader(app, "later@example.org").id
    message = ses_message(BOUNCE_WITH_DSN, "later@example.org")
    certs.routes["/SimpleNotificationService-test.pem"].fail_first = 1
    assert post(app, certs, signer, message, message_id="retry-me").status == 503
    assert app.store.get(sid).status == "active"
    assert post(app, certs, signer, message, message_id="retry-me").status == 200
    assert app.store.get(sid).status == "bounced"


def test_a_subscription_confirmation_is_confirmed_once(app, certs, signer):
    fields = confirmation(certs.url("/SimpleNotificationService-test.pem"),
                          certs.url("/confirm") + "?Action=ConfirmSubscription&Token=abc",
                          when=datetime.now(UTC))
    answer = app.request("POST", "/webhooks/ses", body=body(sign(fields, signer)),
                         headers={**SNS_HEADERS,
                                  "x-amz-sns-message-type": "SubscriptionConfirmation"})
    assert answer.status == 200
    assert certs.hits["/confirm"] == 1


def test_events_for_unknown_addresses_and_other_types_are_accepted_and_ignored(app, certs,
                                                                               signer):
    sid = reader(app, "known@example.org").id
    assert post(app, certs, signer,
                ses_message(BOUNCE_WITH_DSN, "stranger@example.org")).status == 200
    assert post(app, certs, signer, json.dumps({"eventType": "Open", "mail": {}})).status == 200
    assert app.store.get(sid).status == "active"


def test_malformed_bodies_are_bad_requests(app):
    for data in (b"", b"not json", b"[]", b'{"Type": "Notification"}'):
        assert app.request("POST", "/webhooks/ses", body=data,
                           headers=SNS_HEADERS).status == 400


def test_the_webhook_is_off_without_topics(tmp_path, certs, signer):
    with serve_app(project_settings(tmp_path, free_port())) as app:
        sid = reader(app, "off@example.org").id
        answer = post(app, certs, signer, ses_message(BOUNCE_WITH_DSN, "off@example.org"))
        assert answer.status == 404
        assert app.store.get(sid).status == "active"


def test_bounces_and_complaints_are_counted_against_the_issue_they_answer(app, certs, signer):
    now = datetime.now(UTC)
    for n, address in enumerate(("one@example.org", "two@example.org", "three@example.org")):
        sid = reader(app, address).id
        assert app.store.claim("2026-W48", sid, now)
        app.store.mark_sent("2026-W48", sid, f"0100018c-ses-{n}", now)
    for document, address, message_id in [
            (BOUNCE_WITH_DSN, "one@example.org", "0100018c-ses-0"),
            (EVENT_COMPLAINT, "two@example.org", "0100018c-ses-1"),
            (BOUNCE_WITH_DSN, "x@example.org", "confirmation-mail")]:
        post(app, certs, signer, ses_message(document, address, message_id=message_id))
    assert app.store.feedback_counts("2026-W48") == {"bounce": 1, "complaint": 1}


def test_a_notification_that_fails_half_way_is_retried_without_counting_twice(app, certs,
                                                                              signer):
    first, second = reader(app, "first@example.org").id, reader(app, "second@example.org").id
    doc = json.loads(ses_message(BOUNCE_WITH_DSN, "first@example.org",
                                 bounceType="Transient"))
    doc["bounce"]["bouncedRecipients"] = [{"emailAddress": "first@example.org"},
                                          {"emailAddress": "second@example.org"}]
    message = json.dumps(doc)
    store = app.store
    original = store.record_mail_event
    calls = []

    def failing_once(subscriber_id, kind, now, **options):
        calls.append(subscriber_id)
        if subscriber_id == second and calls.count(second) == 1:
            raise RuntimeError("the store failed for a moment")
        return original(subscriber_id, kind, now, **options)

    store.record_mail_event = failing_once
    try:
        assert post(app, certs, signer, message, message_id="half").status == 500
        assert post(app, certs, signer, message, message_id="half").status == 200
    finally:
        del store.record_mail_event
    assert store.get(first).transient_bounces == 1  # not counted again on the retry
    assert store.get(second).transient_bounces == 1
