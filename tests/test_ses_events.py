"""SES bounce, complaint and delivery events, in both shapes SES publishes to SNS.

The payloads follow AWS's documented examples: feedback notifications
(https://docs.aws.amazon.com/ses/latest/dg/notification-examples.html, ``notificationType``)
and event publishing
(https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html,
``eventType``), trimmed of headers nothing here reads.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pipeline.core.mail_in.ses_events import EVENT_KINDS, MailEvent, events_from

NOTE_ID = "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000"
EVENT_ID = "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000"


def notification_mail() -> dict[str, Any]:
    return {
        "timestamp": "2016-01-27T14:59:38.237Z",
        "source": "john@example.com",
        "sourceArn": "arn:aws:ses:us-east-1:888888888888:identity/example.com",
        "sourceIp": "127.0.3.0",
        "sendingAccountId": "123456789012",
        "callerIdentity": "IAM_user_or_role_name",
        "messageId": NOTE_ID,
        "destination": ["jane@example.com", "mary@example.com", "richard@example.com"],
        "headersTruncated": False,
        "headers": [{"name": "From", "value": "\"John Doe\" <john@example.com>"},
                    {"name": "To", "value": "\"Jane Doe\" <jane@example.com>"}],
        "commonHeaders": {"from": ["John Doe <john@example.com>"],
                          "date": "Wed, 27 Jan 2016 14:05:45 +0000",
                          "to": ["Jane Doe <jane@example.com>"],
                          "messageId": "custom-message-ID", "subject": "Hello"},
    }


def event_mail() -> dict[str, Any]:
    return {
        "timestamp": "2017-08-05T00:40:02.012Z",
        "source": "Sender Name <sender@example.com>",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/sender@example.com",
        "sendingAccountId": "123456789012",
        "messageId": EVENT_ID,
        "destination": ["recipient@example.com"],
        "headersTruncated": False,
        "headers": [{"name": "From", "value": "Sender Name <sender@example.com>"},
                    {"name": "To", "value": "recipient@example.com"}],
        "commonHeaders": {"from": ["Sender Name <sender@example.com>"],
                          "to": ["recipient@example.com"],
                          "messageId": EVENT_ID, "subject": "Message sent from Amazon SES"},
        "tags": {"ses:configuration-set": ["ConfigSet"], "ses:source-ip": ["192.0.2.0"],
                 "ses:from-domain": ["example.com"], "ses:caller-identity": ["ses_user"]},
    }


# Feedback notifications (notificationType) -----------------------------------------------------

BOUNCE_WITH_DSN: dict[str, Any] = {
    "notificationType": "Bounce",
    "bounce": {
        "bounceType": "Permanent",
        "reportingMTA": "dns; email.example.com",
        "bouncedRecipients": [{
            "emailAddress": "jane@example.com",
            "status": "5.1.1",
            "action": "failed",
            "diagnosticCode": "smtp; 550 5.1.1 <jane@example.com>... User",
        }],
        "bounceSubType": "General",
        "timestamp": "2016-01-27T14:59:38.237Z",
        "feedbackId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa068a-000000",
        "remoteMtaIp": "127.0.2.0",
    },
    "mail": notification_mail(),
}

BOUNCE_WITHOUT_DSN: dict[str, Any] = {
    "notificationType": "Bounce",
    "bounce": {
        "bounceType": "Permanent",
        "bounceSubType": "General",
        "bouncedRecipients": [{"emailAddress": "jane@example.com"},
                              {"emailAddress": "richard@example.com"}],
        "timestamp": "2016-01-27T14:59:38.237Z",
        "feedbackId": "00000137860315fd-869464a4-8680-4114-98d3-716fe35851f9-000000",
        "remoteMtaIp": "127.0.2.0",
    },
    "mail": notification_mail(),
}

COMPLAINT_WITH_REPORT: dict[str, Any] = {
    "notificationType": "Complaint",
    "complaint": {
        "userAgent": "AnyCompany Feedback Loop (V0.01)",
        "complainedRecipients": [{"emailAddress": "richard@example.com"}],
        "complaintFeedbackType": "abuse",
        "arrivalDate": "2016-01-27T14:59:38.237Z",
        "timestamp": "2016-01-27T14:59:38.237Z",
        "feedbackId": "000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
    },
    "mail": notification_mail(),
}

COMPLAINT_WITHOUT_REPORT: dict[str, Any] = {
    "notificationType": "Complaint",
    "complaint": {
        "complainedRecipients": [{"emailAddress": "richard@example.com"}],
        "timestamp": "2016-01-27T14:59:38.237Z",
        "feedbackId": "0000013786031775-fea503bc-7497-49e1-881b-a0379bb037d3-000000",
    },
    "mail": notification_mail(),
}

DELIVERY: dict[str, Any] = {
    "notificationType": "Delivery",
    "mail": notification_mail(),
    "delivery": {
        "timestamp": "2016-01-27T14:59:38.237Z",
        "recipients": ["jane@example.com"],
        "processingTimeMillis": 546,
        "reportingMTA": "a8-70.smtp-out.amazonses.com",
        "smtpResponse": "250 ok:  Message 64111812 accepted",
        "remoteMtaIp": "127.0.2.0",
    },
}

SUBSCRIPTION_SUCCEEDED: dict[str, Any] = {
    "notificationType": "AmazonSnsSubscriptionSucceeded",
    "message": "You have successfully subscribed your Amazon SNS topic "
               "'arn:aws:sns:us-east-1:123456789012:ses-events' to receive 'Bounce' "
               "notifications from Amazon SES for identity 'example.com'.",
}

# Event publishing (eventType) ------------------------------------------------------------------

EVENT_BOUNCE: dict[str, Any] = {
    "eventType": "Bounce",
    "bounce": {
        "bounceType": "Permanent",
        "bounceSubType": "General",
        "bouncedRecipients": [{
            "emailAddress": "recipient@example.com",
            "action": "failed",
            "status": "5.1.1",
            "diagnosticCode": "smtp; 550 5.1.1 user unknown",
        }],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
        "reportingMTA": "dsn; mta.example.com",
    },
    "mail": event_mail(),
}

EVENT_COMPLAINT: dict[str, Any] = {
    "eventType": "Complaint",
    "complaint": {
        "complainedRecipients": [{"emailAddress": "recipient@example.com"}],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
                     "(KHTML, like Gecko) Chrome/60.0.3112.90 Safari/537.36",
        "complaintFeedbackType": "abuse",
        "arrivalDate": "2017-08-05T00:41:02.669Z",
    },
    "mail": event_mail(),
}

EVENT_DELIVERY: dict[str, Any] = {
    "eventType": "Delivery",
    "mail": event_mail(),
    "delivery": {
        "timestamp": "2016-10-19T23:21:04.133Z",
        "processingTimeMillis": 11893,
        "recipients": ["recipient@example.com"],
        "smtpResponse": "250 2.6.0 Message received",
        "reportingMTA": "mta.example.com",
    },
}

OTHER_EVENTS = {
    "Send": {"eventType": "Send", "mail": event_mail(), "send": {}},
    "Reject": {"eventType": "Reject", "mail": event_mail(), "reject": {"reason": "Bad content"}},
    "Open": {"eventType": "Open", "mail": event_mail(), "open": {
        "ipAddress": "192.0.2.1", "timestamp": "2017-08-09T22:00:19.652Z",
        "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 10_3_3 like Mac OS X)"}},
    "Click": {"eventType": "Click", "mail": event_mail(), "click": {
        "ipAddress": "192.0.2.1", "link": "https://docs.aws.amazon.com/ses/",
        "linkTags": {"samplekey0": ["samplevalue0"]},
        "timestamp": "2017-08-09T23:51:25.570Z", "userAgent": "Mozilla/5.0"}},
    "DeliveryDelay": {"eventType": "DeliveryDelay", "mail": event_mail(), "deliveryDelay": {
        "timestamp": "2020-06-16T00:15:40.641Z", "delayType": "TransientCommunicationFailure",
        "expirationTime": "2020-06-16T00:25:40.914Z",
        "delayedRecipients": [{"emailAddress": "recipient@example.com", "status": "4.4.1",
                               "diagnosticCode": "smtp; 421 4.4.1 Unable to connect"}]}},
    "Rendering Failure": {"eventType": "Rendering Failure", "mail": event_mail(), "failure": {
        "errorMessage": "Attribute 'attributeName' is not present in the rendering data.",
        "templateName": "MyTemplate"}},
    "Subscription": {"eventType": "Subscription", "mail": event_mail(), "subscription": {
        "contactList": "ContactListName", "timestamp": "2022-01-12T01:00:14.340Z",
        "source": "UnsubscribeHeader",
        "newTopicPreferences": {"unsubscribeAll": True, "topicSubscriptionStatus": [
            {"topicName": "ExampleTopicName", "subscriptionStatus": "OptOut"}]},
        "oldTopicPreferences": {"unsubscribeAll": False, "topicSubscriptionStatus": [
            {"topicName": "ExampleTopicName", "subscriptionStatus": "OptOut"}]}}},
    "AmazonSnsSubscriptionSucceeded": SUBSCRIPTION_SUCCEEDED,
    "a type SES adds later": {"eventType": "Teleport", "mail": event_mail(), "teleport": {}},
    "Received, without mail": {"notificationType": "Received", "receipt": {}},
}


def events(document: dict[str, Any]) -> list[MailEvent]:
    return events_from(json.dumps(document))


def changed(document: dict[str, Any], part: str, **fields: Any) -> dict[str, Any]:
    """``document`` with ``fields`` set in (or, for None, removed from) its ``part`` object."""
    inner = {**document[part], **fields}
    return {**document, part: {k: v for k, v in inner.items() if v is not None}}


NOTE_AT, EVENT_AT = "2016-01-27T14:59:38.237Z", "2017-08-05T00:41:02.669Z"


@pytest.mark.parametrize(("document", "expected"), [
    (BOUNCE_WITH_DSN, MailEvent("bounce-permanent", "jane@example.com", NOTE_ID,
                                "Permanent/General", NOTE_AT)),
    (EVENT_BOUNCE, MailEvent("bounce-permanent", "recipient@example.com", EVENT_ID,
                             "Permanent/General", EVENT_AT)),
    (COMPLAINT_WITH_REPORT, MailEvent("complaint", "richard@example.com", NOTE_ID, "abuse",
                                      NOTE_AT)),
    (COMPLAINT_WITHOUT_REPORT, MailEvent("complaint", "richard@example.com", NOTE_ID, "",
                                         NOTE_AT)),
    (EVENT_COMPLAINT, MailEvent("complaint", "recipient@example.com", EVENT_ID, "abuse",
                                EVENT_AT)),
    (DELIVERY, MailEvent("delivery", "jane@example.com", NOTE_ID, "", NOTE_AT)),
    (EVENT_DELIVERY, MailEvent("delivery", "recipient@example.com", EVENT_ID, "",
                               "2016-10-19T23:21:04.133Z")),
], ids=["bounce-note", "bounce-event", "complaint-note", "complaint-note-bare",
        "complaint-event", "delivery-note", "delivery-event"])
def test_each_documented_example_gives_its_event(document, expected):
    assert events(document) == [expected]


@pytest.mark.parametrize(("document", "part", "key", "entry"), [
    (EVENT_BOUNCE, "bounce", "bouncedRecipients", lambda a: {"emailAddress": a}),
    (EVENT_COMPLAINT, "complaint", "complainedRecipients", lambda a: {"emailAddress": a}),
    (EVENT_DELIVERY, "delivery", "recipients", lambda a: a),
], ids=["bounce", "complaint", "delivery"])
def test_one_event_per_recipient_in_order(document, part, key, entry):
    (one,) = events(document)
    addresses = ["second@example.org", "first@example.com"]
    found = events(changed(document, part, **{key: [entry(a) for a in addresses]}))
    assert found == [dataclasses.replace(one, address=a) for a in addresses]


# -- bounces -------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", [BOUNCE_WITH_DSN, EVENT_BOUNCE], ids=["note", "event"])
@pytest.mark.parametrize(("bounce_type", "sub_type", "kind"), [
    ("Transient", "General", "bounce-transient"),
    ("Transient", "MailboxFull", "bounce-transient"),
    ("Transient", "MessageTooLarge", "bounce-transient"),
    ("Transient", "AttachmentRejected", "bounce-transient"),
    ("Undetermined", "Undetermined", "bounce-transient"),
    ("Soft", "Weird", "bounce-transient"),  # a type SES may add later is not permanent
    ("Permanent", "Suppressed", "bounce-permanent"),
    ("Permanent", "OnAccountSuppressionList", "bounce-permanent"),
    ("Permanent", "NoEmail", "bounce-permanent"),
    ("Permanent", "UnsubscribedRecipient", "bounce-permanent"),
])
def test_only_a_permanent_bounce_is_permanent(document, bounce_type, sub_type, kind):
    found = events(changed(document, "bounce", bounceType=bounce_type, bounceSubType=sub_type))
    assert [(e.kind, e.detail) for e in found] == [(kind, f"{bounce_type}/{sub_type}")]


def test_the_documented_bounce_of_two_recipients_without_sub_type_or_timestamp():
    assert [(e.kind, e.address) for e in events(BOUNCE_WITHOUT_DSN)] == [
        ("bounce-permanent", "jane@example.com"), ("bounce-permanent", "richard@example.com")]
    found = events(changed(BOUNCE_WITHOUT_DSN, "bounce", bounceSubType=None, timestamp=None))
    assert [(e.detail, e.timestamp) for e in found] == [("Permanent", None)] * 2


def test_no_bounced_recipient_means_no_event():
    assert events(changed(EVENT_BOUNCE, "bounce", bouncedRecipients=[])) == []


# -- complaints ----------------------------------------------------------------------------------


@pytest.mark.parametrize("feedback", ["auth-failure", "fraud", "other", "virus"])
def test_every_other_feedback_type_is_a_complaint(feedback):
    found = events(changed(EVENT_COMPLAINT, "complaint", complaintFeedbackType=feedback))
    assert [(e.kind, e.detail) for e in found] == [("complaint", feedback)]


@pytest.mark.parametrize("document", [COMPLAINT_WITH_REPORT, EVENT_COMPLAINT],
                         ids=["note", "event"])
def test_not_spam_is_no_complaint(document):
    assert events(changed(document, "complaint", complaintFeedbackType="not-spam")) == []


# -- addresses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("given,bare", [
    ("Jane Doe <jane@example.com>", "jane@example.com"),
    ('"Doe, Jane" <jane@example.com>', "jane@example.com"),
    ("<jane@example.com>", "jane@example.com"),
    ("=?UTF-8?B?5byg5LiJ?= <zhang@example.cn>", "zhang@example.cn"),
    ("Jane@Example.COM", "Jane@Example.COM"),
    (" jane@example.com ", "jane@example.com"),
    ("jane+news@example.com", "jane+news@example.com"),
])
def test_addresses_come_without_display_names(given, bare):
    for document in (
        changed(BOUNCE_WITH_DSN, "bounce", bouncedRecipients=[{"emailAddress": given}]),
        changed(EVENT_COMPLAINT, "complaint", complainedRecipients=[{"emailAddress": given}]),
        changed(DELIVERY, "delivery", recipients=[given]),
    ):
        assert [e.address for e in events(document)] == [bare]


# -- everything else -----------------------------------------------------------------------------


@pytest.mark.parametrize("document", OTHER_EVENTS.values(), ids=OTHER_EVENTS.keys())
def test_other_types_give_no_event(document):
    assert events(document) == []


def test_event_type_is_read_before_notification_type():
    both = {**EVENT_DELIVERY, "notificationType": "Bounce"}
    assert [e.kind for e in events(both)] == ["delivery"]


def test_an_event_without_mail_has_no_message_id():
    document = {k: v for k, v in BOUNCE_WITH_DSN.items() if k != "mail"}
    assert [e.message_id for e in events(document)] == [None]
    no_id = {**DELIVERY, "mail": {**notification_mail(), "messageId": None}}
    assert [e.message_id for e in events(no_id)] == [None]


def test_unknown_fields_are_ignored():
    document = {**EVENT_BOUNCE, "newField": [1, 2], "bounce": {
        **EVENT_BOUNCE["bounce"], "bouncedRecipients": [
            {"emailAddress": "recipient@example.com", "newRecipientField": {}}]}}
    assert [e.address for e in events(document)] == ["recipient@example.com"]


def test_events_are_frozen():
    event = events(DELIVERY)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.address = "other@example.com"  # type: ignore[misc]
    assert {e.kind for e in events(BOUNCE_WITH_DSN) + events(COMPLAINT_WITH_REPORT) +
            events(DELIVERY) + events(changed(EVENT_BOUNCE, "bounce", bounceType="Transient"))
            } == set(EVENT_KINDS)


# -- malformed -----------------------------------------------------------------------------------


def _drop(document: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}


MALFORMED: dict[str, str] = {
    "not-json": "<Bounce/>",
    "empty": "",
    "truncated": json.dumps(BOUNCE_WITH_DSN)[:-1],
    "deep": "[" * 100_000 + "]" * 100_000,
    "array": json.dumps([BOUNCE_WITH_DSN]),
    "string": json.dumps("Bounce"),
    "null": "null",
    "neither-key": json.dumps(_drop(BOUNCE_WITH_DSN, "notificationType")),
    "type-not-string": json.dumps({**EVENT_BOUNCE, "eventType": ["Bounce"]}),
    "bounce-missing": json.dumps(_drop(BOUNCE_WITH_DSN, "bounce")),
    "bounce-not-object": json.dumps({**EVENT_BOUNCE, "bounce": "Permanent"}),
    "bounce-type-missing": json.dumps(changed(EVENT_BOUNCE, "bounce", bounceType=None)),
    "bounce-type-number": json.dumps(changed(EVENT_BOUNCE, "bounce", bounceType=5)),
    "bounced-recipients-missing": json.dumps(
        changed(EVENT_BOUNCE, "bounce", bouncedRecipients=None)),
    "bounced-recipients-object": json.dumps(
        changed(EVENT_BOUNCE, "bounce", bouncedRecipients={"emailAddress": "a@example.com"})),
    "bounced-recipient-string": json.dumps(
        changed(EVENT_BOUNCE, "bounce", bouncedRecipients=["a@example.com"])),
    "bounced-recipient-no-address": json.dumps(
        changed(EVENT_BOUNCE, "bounce", bouncedRecipients=[{"status": "5.1.1"}])),
    "bounced-recipient-empty-address": json.dumps(
        changed(EVENT_BOUNCE, "bounce", bouncedRecipients=[{"emailAddress": " "}])),
    "complaint-missing": json.dumps(_drop(COMPLAINT_WITH_REPORT, "complaint")),
    "complained-recipients-string": json.dumps(
        changed(EVENT_COMPLAINT, "complaint", complainedRecipients="a@example.com")),
    "complained-recipient-number": json.dumps(
        changed(EVENT_COMPLAINT, "complaint", complainedRecipients=[{"emailAddress": 1}])),
    "delivery-missing": json.dumps(_drop(DELIVERY, "delivery")),
    "delivery-recipients-missing": json.dumps(changed(DELIVERY, "delivery", recipients=None)),
    "delivery-recipients-string": json.dumps(
        changed(DELIVERY, "delivery", recipients="jane@example.com")),
    "delivery-recipient-object": json.dumps(
        changed(DELIVERY, "delivery", recipients=[{"emailAddress": "jane@example.com"}])),
    "mail-not-object": json.dumps({**DELIVERY, "mail": "jane@example.com"}),
}


@pytest.mark.parametrize("message", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_documents_raise_value_error(message):
    with pytest.raises(ValueError, match=r"^SES event: ") as caught:
        events_from(message)
    text = str(caught.value)
    assert "\n" not in text and len(text) < 120


@pytest.mark.parametrize(("timestamp", "expected"), [
    ("2016-01-27T14:59:38.237Z", "2016-01-27T14:59:38.237000+00:00"),
    ("2016-01-27T22:59:38+08:00", "2016-01-27T14:59:38+00:00"),
    ("2016-01-27T14:59:38", None),  # no zone: no time to order by
    ("yesterday", None),
    (None, None),
])
def test_the_time_an_event_happened_is_read_for_ordering(timestamp, expected):
    event = MailEvent("delivery", "a@example.org", None, "", timestamp)
    when = event.occurred_at
    assert (when.isoformat() if when else None) == expected
