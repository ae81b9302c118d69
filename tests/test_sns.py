"""Amazon SNS message verification against a real HTTPS server on loopback.

Messages are signed here as AWS documents it (not by the module under test), with a key whose
certificate the server hands out; the verifier's host pattern points at 127.0.0.1 and trusts
only the test CA, so the whole path runs for real. The server's counts prove what was fetched.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, get_args

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from support.sns_support import (
    NOW,
    SES_BOUNCE,
    TOPIC,
    CertServer,
    Route,
    Signer,
    body,
    cert_server,
    confirmation,
    new_signer,
    notification,
    sign,
    stamp,
)

from pipeline.errors import NewsletterError
from pipeline.web.sns import (
    MAX_CACHED_CERTIFICATES,
    CertificateSource,
    SnsError,
    SnsMessage,
    SnsReason,
    SnsVerifier,
)

OTHER_TOPIC = "arn:aws:sns:us-east-1:123456789012:newsletter-other"
STRANGER = "arn:aws:sns:us-east-1:999999999999:not-ours"
LOOPBACK = re.compile(r"^127\.0\.0\.1$")
#: Fields of a notification a test changes; a value (a time) never goes into a test id.
SIGNED_NAMES = ("Message", "MessageId", "TopicArn", "Timestamp", "Type")


# -- keys and certificates ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def signer() -> Signer:
    return new_signer()


@pytest.fixture(scope="module")
def expired_signer() -> Signer:
    return new_signer(days=(-30, -1))


@pytest.fixture(scope="module")
def ec_signer() -> Signer:
    return new_signer(ec.generate_private_key(ec.SECP256R1()))


# -- the HTTPS server ---------------------------------------------------------------------------


@pytest.fixture
def server(tls, signer: Signer) -> Iterator[CertServer]:
    with cert_server(tls.server, {"/cert.pem": Route(signer.pem),
                                  "/confirm": Route(b"<ConfirmSubscriptionResponse/>")}) as srv:
        yield srv


@pytest.fixture
def source(tls) -> CertificateSource:
    return CertificateSource(host_pattern=LOOPBACK, ssl_context=tls.client, timeout=5.0)


@pytest.fixture
def verifier(source: CertificateSource) -> SnsVerifier:
    return SnsVerifier(source, [TOPIC, OTHER_TOPIC])


# -- signing as SNS does -------------------------------------------------------------------------

def refusal(verifier: SnsVerifier, data: bytes, now: datetime = NOW) -> str:
    with pytest.raises(SnsError) as caught:
        verifier.verify(data, now)
    text = str(caught.value)
    assert "\n" not in text and len(text) < 300
    assert caught.value.exit_code == 2 and isinstance(caught.value, NewsletterError)
    return caught.value.reason


# -- accepted ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("subject", [None, "Amazon SES Email Event Notification"])
def test_a_signed_notification_is_accepted(verifier, server, signer, version, subject):
    fields = sign(notification(server.url("/cert.pem"), subject=subject), signer, version)
    message = verifier.verify(body(fields), NOW)
    assert message == SnsMessage(
        type="Notification", message_id=fields["MessageId"], topic_arn=TOPIC,
        message=SES_BOUNCE, timestamp=NOW, subject=subject, subscribe_url=None, token=None)
    assert message.timestamp.tzinfo is UTC
    assert server.hits["/cert.pem"] == 1


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("kind", ["SubscriptionConfirmation", "UnsubscribeConfirmation"])
def test_a_signed_confirmation_is_accepted(verifier, server, signer, version, kind):
    fields = sign(confirmation(server.url("/cert.pem"), server.url("/confirm?Token=t"),
                               kind=kind), signer, version)
    message = verifier.verify(body(fields), NOW)
    assert (message.type, message.subscribe_url, message.token) == (
        kind, server.url("/confirm?Token=t"), fields["Token"])
    assert message.message == fields["Message"] and message.subject is None
    assert server.hits["/confirm"] == 0  # verifying never confirms


def test_the_string_to_sign_is_exactly_the_documented_one(verifier, server, signer):
    """Signed over hand-written bytes: a mistake shared by this file and the module still fails."""
    fields = notification(server.url("/cert.pem"), message="hello\nworld", subject="Hi")
    when = NOW.replace(microsecond=678000)
    ts = when.strftime("%Y-%m-%dT%H:%M:%S.678Z").encode()
    fields["Timestamp"] = ts.decode()
    literal = (b"Message\nhello\nworld\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\n"
               b"Subject\nHi\nTimestamp\n" + ts + b"\n"
               b"TopicArn\n" + TOPIC.encode() + b"\nType\nNotification\n")
    signed = sign(fields, signer, data=literal)
    assert verifier.verify(body(signed), when).message == "hello\nworld"
    sub = confirmation(server.url("/cert.pem"), "https://127.0.0.1/c")
    sub["Timestamp"] = ts.decode()
    literal = (b"Message\n" + sub["Message"].encode() + b"\nMessageId\n" +
               sub["MessageId"].encode() + b"\nSubscribeURL\nhttps://127.0.0.1/c\n"
               b"Timestamp\n" + ts + b"\nToken\n" + sub["Token"].encode() +
               b"\nTopicArn\n" + TOPIC.encode() + b"\nType\nSubscriptionConfirmation\n")
    assert verifier.verify(body(sign(sub, signer, data=literal)), when).token == sub["Token"]


def test_non_ascii_text_is_signed_as_utf8(verifier, server, signer):
    fields = sign(notification(server.url("/cert.pem"), message="退信 ✉", subject="主题"),
                  signer)
    assert verifier.verify(json.dumps(fields, ensure_ascii=True).encode(), NOW).message == (
        "退信 ✉")


# -- refused: signature --------------------------------------------------------------------------


@pytest.mark.parametrize("name,value", [
    ("Message", SES_BOUNCE.replace("jane@", "john@")),
    ("MessageId", "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf325"),
    ("TopicArn", OTHER_TOPIC),  # also allowed: only the signature can tell
    ("Timestamp", stamp(NOW - timedelta(seconds=1))),
    ("Type", "SubscriptionConfirmation"),
], ids=lambda v: v if v in SIGNED_NAMES else "changed")  # NOW in an id breaks xdist
@pytest.mark.parametrize("version", ["1", "2"])
def test_a_changed_field_breaks_the_signature(verifier, server, signer, name, value, version):
    fields = sign(notification(server.url("/cert.pem")), signer, version)
    fields[name] = value
    if name == "Type":
        fields.update(SubscribeURL=server.url("/confirm"), Token="t")
    assert refusal(verifier, body(fields)) == "bad-signature"


def test_a_subject_added_changed_or_removed_breaks_the_signature(verifier, server, signer):
    plain = sign(notification(server.url("/cert.pem")), signer)
    assert refusal(verifier, body({**plain, "Subject": "added"})) == "bad-signature"
    titled = sign(notification(server.url("/cert.pem"), subject="Bounce"), signer)
    assert refusal(verifier, body({**titled, "Subject": "Bounce!"})) == "bad-signature"
    del titled["Subject"]
    assert refusal(verifier, body(titled)) == "bad-signature"


@pytest.mark.parametrize("name", ["SubscribeURL", "Token"])
def test_a_changed_confirmation_field_breaks_the_signature(verifier, server, signer, name):
    fields = sign(confirmation(server.url("/cert.pem"), server.url("/confirm")), signer)
    fields[name] += "x"
    assert refusal(verifier, body(fields)) == "bad-signature"


def test_a_changed_or_garbled_signature_is_refused(verifier, server, signer):
    fields = sign(notification(server.url("/cert.pem")), signer)
    raw = bytearray(base64.b64decode(fields["Signature"]))
    raw[17] ^= 0x01
    flipped = {**fields, "Signature": base64.b64encode(bytes(raw)).decode()}
    assert refusal(verifier, body(flipped)) == "bad-signature"
    for garbled in ("not base64 !!", fields["Signature"][:-4], "AAAA"):
        assert refusal(verifier, body({**fields, "Signature": garbled})) == "bad-signature"
    assert verifier.verify(body(fields), NOW).message == SES_BOUNCE  # the original still is


def test_a_signature_from_another_key_is_refused(verifier, server, expired_signer):
    fields = sign(notification(server.url("/cert.pem")), expired_signer)
    assert refusal(verifier, body(fields)) == "bad-signature"


def test_the_version_must_match_the_hash(verifier, server, signer):
    v1 = sign(notification(server.url("/cert.pem")), signer, "1")
    assert refusal(verifier, body({**v1, "SignatureVersion": "2"})) == "bad-signature"
    v2 = sign(notification(server.url("/cert.pem")), signer, "2")
    assert refusal(verifier, body({**v2, "SignatureVersion": "1"})) == "bad-signature"


@pytest.mark.parametrize("version", ["3", "0", "", 2, None])
def test_an_unknown_signature_version_is_refused_before_any_fetch(verifier, server, signer,
                                                                  version):
    fields = sign(notification(server.url("/cert.pem")), signer)
    fields["SignatureVersion"] = version
    assert refusal(verifier, body(fields)) == "unsupported-version"
    assert server.connections == 0


# -- refused: topic ------------------------------------------------------------------------------


def test_a_strangers_topic_is_refused_without_fetching_anything(verifier, server, signer):
    """Validly signed by SNS, but from someone else's topic: it must not cost a request."""
    fields = sign(notification(server.url("/cert.pem"), topic=STRANGER), signer)
    assert refusal(verifier, body(fields)) == "topic-not-allowed"
    assert server.connections == 0 and server.hits["/cert.pem"] == 0
    # Even an invalid signature or a refused cert URL is not looked at for such a topic.
    bad = {**fields, "Signature": "AAAA", "SigningCertURL": "http://evil.example/x.pem"}
    assert refusal(verifier, body(bad)) == "topic-not-allowed"
    assert server.connections == 0


@pytest.mark.parametrize(("allowed", "topic"), [
    ((), TOPIC),  # none configured: every topic is refused
    ((TOPIC,), TOPIC + "-2"),
    ((TOPIC,), TOPIC.upper()),
    ((TOPIC,), TOPIC[:-1]),
    ((TOPIC,), " " + TOPIC),
], ids=["none-configured", "suffix", "upper-case", "prefix", "space"])
def test_only_a_configured_topic_matches_exactly(source, server, signer, allowed, topic):
    fields = sign(notification(server.url("/cert.pem"), topic=topic), signer)
    assert refusal(SnsVerifier(source, allowed), body(fields)) == "topic-not-allowed"
    assert server.connections == 0


# -- refused: certificate URL ------------------------------------------------------------------


@pytest.mark.parametrize("make_url", [
    lambda s: s.url("/cert.pem").replace("https://", "http://"),
    lambda s: s.url("/cert.pem").replace("127.0.0.1", "localhost"),
    lambda s: s.url("/cert.pem").replace("https://", "https://user@"),
    lambda s: s.url("/cert.pem").replace("https://", "https://user:pw@"),
    lambda s: s.url("/cert.txt"),
    lambda s: s.url("/cert.pem?x=.pem").replace(".pem?", ".txt?"),
    lambda s: s.url("/cert.pem").replace("https://", "ftp://"),
    lambda s: s.url("/cert.pem") + " ",
    lambda s: s.url("/cert.\npem"),
], ids=["http", "other-host", "userinfo", "userinfo-password", "not-pem", "pem-in-query",
        "ftp", "space", "newline"])
def test_a_bad_cert_url_is_refused_and_never_fetched(verifier, server, signer, make_url):
    server.routes["/cert.txt"] = server.routes["/cert.pem"]
    fields = sign(notification(make_url(server)), signer)
    assert refusal(verifier, body(fields)) == "bad-cert-url"
    assert server.connections == 0


@pytest.mark.parametrize("url", [
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem",
    "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-3250158c6b3cc8d0a1f28e1e5e4cb8c5.pem",
    "https://SNS.EU-WEST-1.AMAZONAWS.COM/SimpleNotificationService-x.pem",
    "https://sns.us-gov-west-1.amazonaws.com/a.pem",
    "https://sns.us-gov-east-1.amazonaws.com/a.pem",
    "https://sns.cn-northwest-1.amazonaws.com.cn/a.pem",
    "https://sns.ap-southeast-5.amazonaws.com/a.pem",
    "https://sns.us-iso-east-1.amazonaws.com/a.pem",
    "https://sns.us-isob-east-1.amazonaws.com/a.pem",
])
def test_the_aws_pattern_accepts_sns_hosts(url):
    assert CertificateSource().check_url(url) == url


@pytest.mark.parametrize("url", [
    "https://sns.us-east-1.amazonaws.com.evil.org/x.pem",
    "https://evilsns.us-east-1.amazonaws.com/x.pem",
    "https://sns.amazonaws.com@evil.org/x.pem",
    "https://sns.us-east-1.amazonaws.com@evil.org/x.pem",
    "https://evil.org/sns.us-east-1.amazonaws.com/x.pem",
    "https://sns.us-east-1.amazonaws.com:443/x.pem",
    "https://sns.us-east-1.amazonaws.com:8443/x.pem",
    "http://sns.us-east-1.amazonaws.com/x.pem",
    "https://sns.us-east-1.amazonaws.com/x.pem.txt",
    "https://sns.us-east-1.amazonaws.com./x.pem",
    "https://sns.us_east-1.amazonaws.com/x.pem",
    "https://s3.us-east-1.amazonaws.com/x.pem",
    "https://sns.us-east-1.amazonaws.com\\@evil.org/x.pem",
    "https://[::1]/x.pem",
    "https://sns.us-east-1.amazonaws.com:port/x.pem",
    "//sns.us-east-1.amazonaws.com/x.pem",
    # Other AWS services under sns.<label>.amazonaws.com: an S3 bucket named "sns" (anyone
    # can create one and upload a certificate of their own to it).
    "https://sns.s3.amazonaws.com/x.pem",
    "https://sns.s3-accelerate.amazonaws.com/x.pem",
    "https://sns.s3.amazonaws.com.cn/x.pem",
    "https://sns.s3-external-1.amazonaws.com/x.pem",
    "https://sns.s3-website-us-east-1.amazonaws.com/x.pem",
    "https://sns.execute-api.amazonaws.com/x.pem",
    "https://sns.us-east-1.s3.amazonaws.com/x.pem",
    "https://sns.us-east-.amazonaws.com/x.pem",
    "https://sns.us-east-123.amazonaws.com/x.pem",
    "https://sns.us-east-\u0661.amazonaws.com/x.pem",
    "https://sns.amazonaws.com/x.pem",
])
def test_the_aws_pattern_refuses_everything_else(url):
    with pytest.raises(SnsError) as caught:
        CertificateSource().check_url(url)
    assert caught.value.reason == "bad-cert-url"


def test_a_port_is_refused_by_the_aws_pattern_in_a_message(signer):
    """Through verify too: a fetch would say cert-unavailable (no route to AWS here), not this."""
    verifier = SnsVerifier(CertificateSource(timeout=0.5), [TOPIC])
    fields = sign(notification("https://sns.us-east-1.amazonaws.com:443/x.pem"), signer)
    assert refusal(verifier, body(fields)) == "bad-cert-url"


def test_the_host_pattern_must_match_the_whole_host():
    source = CertificateSource(host_pattern=re.compile(r"127\.0\.0\.1"))  # not anchored
    assert source.check_url("https://127.0.0.1:8443/x.pem")
    for url in ("https://127.0.0.1.evil.org/x.pem", "https://x127.0.0.1/x.pem"):
        with pytest.raises(SnsError) as caught:
            source.check_url(url)
        assert caught.value.reason == "bad-cert-url"


def test_a_subscribe_url_need_not_be_a_pem_but_is_otherwise_checked():
    source = CertificateSource()
    url = "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=abc"
    assert source.check_url(url, "SubscribeURL") == url
    with pytest.raises(SnsError, match="SigningCertURL"):
        source.check_url(url)
    with pytest.raises(SnsError, match="SubscribeURL"):
        source.check_url(url.replace("sns.", "evil."), "SubscribeURL")


# -- certificates --------------------------------------------------------------------------------


def test_the_certificate_is_fetched_once_for_many_messages(verifier, server, signer):
    for n in range(5):
        for version in ("1", "2"):
            fields = notification(server.url("/cert.pem"), message=f"m{n}")
            assert verifier.verify(body(sign(fields, signer, version)), NOW).message == f"m{n}"
    assert server.hits["/cert.pem"] == 1


def test_the_certificates_kept_are_bounded(verifier, server, signer):
    # A query (or fragment) makes another URL for the same certificate: a sender of the
    # topic could grow the cache without end. The oldest kept go first.
    urls = [server.url(f"/cert.pem?n={n}") for n in range(MAX_CACHED_CERTIFICATES + 1)]
    for url in urls:
        verifier.verify(body(sign(notification(url), signer)), NOW)
    verifier.verify(body(sign(notification(urls[-1]), signer)), NOW)
    assert server.hits["/cert.pem"] == len(urls)
    verifier.verify(body(sign(notification(urls[0]), signer)), NOW)
    assert server.hits["/cert.pem"] == len(urls) + 1


def test_a_failed_fetch_is_not_cached(verifier, server, signer):
    server.routes["/cert.pem"].fail_first = 1
    data = body(sign(notification(server.url("/cert.pem")), signer))
    assert refusal(verifier, data) == "cert-unavailable"
    assert verifier.verify(data, NOW).topic_arn == TOPIC
    assert verifier.verify(data, NOW).topic_arn == TOPIC
    assert server.hits["/cert.pem"] == 2


def test_an_unreachable_certificate(verifier, signer, unused_port):
    url = f"https://127.0.0.1:{unused_port}/cert.pem"
    assert refusal(verifier, body(sign(notification(url), signer))) == "cert-unavailable"


def test_a_server_that_never_answers_times_out(tls, signer, silent_server):
    host, port = silent_server
    source = CertificateSource(host_pattern=LOOPBACK, ssl_context=tls.client, timeout=0.2)
    fields = sign(notification(f"https://{host}:{port}/cert.pem"), signer)
    started = time.monotonic()
    assert refusal(SnsVerifier(source, [TOPIC]), body(fields)) == "cert-unavailable"
    assert time.monotonic() - started < 5


def test_a_certificate_from_an_untrusted_tls_server_is_refused(server, signer):
    """The default context does not trust the test CA: TLS verification is on."""
    source = CertificateSource(host_pattern=LOOPBACK)
    fields = sign(notification(server.url("/cert.pem")), signer)
    assert refusal(SnsVerifier(source, [TOPIC]), body(fields)) == "cert-unavailable"
    assert server.hits["/cert.pem"] == 0


@pytest.mark.parametrize("answer", ["404", "garbage", "bad-pem", "too-large", "redirect",
                                    "ec-key", "expired"])
def test_an_unusable_certificate_is_refused_and_not_kept(verifier, server, signer, ec_signer,
                                                         expired_signer, answer):
    routes = {
        "404": Route(status=404),
        "garbage": Route(b"not a certificate"),
        "bad-pem": Route(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        # The real certificate, padded past 64 KiB with newlines that a PEM parser would
        # skip, so only the size limit can refuse it.
        "too-large": Route(signer.pem + b"\n" * (64 * 1024)),
        "redirect": Route(status=302, headers={"Location": server.url("/cert.pem")}),
        "ec-key": Route(ec_signer.pem),  # no RSA key
        "expired": Route(expired_signer.pem),  # the message signed by its own key
    }
    server.routes["/bad.pem"] = routes[answer]
    fields = notification(server.url("/bad.pem"))
    data = body(sign(fields, expired_signer if answer == "expired" else signer))
    assert refusal(verifier, data) == "cert-unavailable"
    assert refusal(verifier, data) == "cert-unavailable"
    assert server.hits["/bad.pem"] == 2  # fetched again: a refused certificate is not kept
    assert server.hits["/cert.pem"] == 0  # a redirect is not followed


def test_a_cached_certificate_that_has_since_expired(source, server, signer):
    url = server.url("/cert.pem")
    now = datetime.now(UTC)
    source.public_key(url, now=now)
    source.public_key(url, now=now + timedelta(days=1))
    assert server.hits["/cert.pem"] == 1
    for later in (now + timedelta(days=31), now - timedelta(days=2)):
        with pytest.raises(SnsError) as caught:
            source.public_key(url, now=later)
        assert caught.value.reason == "cert-unavailable"
    assert server.hits["/cert.pem"] == 3  # fetched again each time: it might have been renewed
    assert isinstance(source.public_key(url, now=now), rsa.RSAPublicKey)


# -- freshness -----------------------------------------------------------------------------------


@pytest.mark.parametrize("offset,fresh", [
    (timedelta(days=-8), False),
    (timedelta(days=-7, seconds=-1), False),
    (timedelta(days=-7), True),
    (timedelta(days=-6), True),
    (timedelta(0), True),
    (timedelta(minutes=4, seconds=59), True),
    (timedelta(minutes=5), True),
    (timedelta(minutes=5, seconds=1), False),
    (timedelta(hours=1), False),
])
def test_old_and_future_timestamps(verifier, server, signer, offset, fresh):
    fields = sign(notification(server.url("/cert.pem"), when=NOW + offset), signer)
    if fresh:
        assert verifier.verify(body(fields), NOW).timestamp == NOW + offset
    else:
        assert refusal(verifier, body(fields)) == "stale"


def test_max_age_is_configurable(source, server, signer):
    verifier = SnsVerifier(source, [TOPIC], max_age=timedelta(minutes=10))
    old = sign(notification(server.url("/cert.pem"), when=NOW - timedelta(minutes=11)), signer)
    assert refusal(verifier, body(old)) == "stale"
    recent = sign(notification(server.url("/cert.pem"), when=NOW - timedelta(minutes=9)), signer)
    assert verifier.verify(body(recent), NOW).type == "Notification"


def test_a_stale_message_is_judged_only_after_its_signature(verifier, server, signer):
    fields = sign(notification(server.url("/cert.pem"), when=NOW - timedelta(days=30)), signer)
    assert refusal(verifier, body({**fields, "Message": "x"})) == "bad-signature"


# -- confirming a subscription ---------------------------------------------------------------


def test_confirm_subscription_gets_the_subscribe_url_once(verifier, server, signer):
    subscribe = server.url("/confirm?Action=ConfirmSubscription&TopicArn=t&Token=abc")
    fields = sign(confirmation(server.url("/cert.pem"), subscribe), signer)
    message = verifier.verify(body(fields), NOW)
    assert server.hits["/confirm"] == 0
    verifier.confirm_subscription(message)
    assert server.hits["/confirm"] == 1
    assert server.paths[-1] == "/confirm?Action=ConfirmSubscription&TopicArn=t&Token=abc"


def test_confirm_subscription_refuses_what_is_not_a_confirmation(verifier, server, signer):
    note = verifier.verify(body(sign(notification(server.url("/cert.pem")), signer)), NOW)
    with pytest.raises(ValueError):
        verifier.confirm_subscription(note)
    unsubscribe = verifier.verify(body(sign(confirmation(
        server.url("/cert.pem"), server.url("/confirm"), kind="UnsubscribeConfirmation"),
        signer)), NOW)
    with pytest.raises(ValueError):
        verifier.confirm_subscription(unsubscribe)
    assert server.hits["/confirm"] == 0


def test_confirm_subscription_checks_topic_and_url(verifier, server):
    def hand_made(topic: str, url: str) -> SnsMessage:
        return SnsMessage("SubscriptionConfirmation", "id", topic, "m", NOW, None, url, "t")

    with pytest.raises(SnsError) as caught:
        verifier.confirm_subscription(hand_made(STRANGER, server.url("/confirm")))
    assert caught.value.reason == "topic-not-allowed"
    for url in (server.url("/confirm").replace("127.0.0.1", "localhost"),
                server.url("/confirm").replace("https:", "http:"),
                server.url("/confirm").replace("https://", "https://u@")):
        with pytest.raises(SnsError) as caught:
            verifier.confirm_subscription(hand_made(TOPIC, url))
        assert caught.value.reason == "bad-cert-url"
    assert server.connections == 0


@pytest.mark.parametrize("route", [
    Route(status=403), Route(status=500),
    Route(status=301, headers={"Location": "https://127.0.0.1:1/confirm"}),
], ids=["403", "500", "redirect"])
def test_a_failed_confirmation(verifier, server, signer, route):
    server.routes["/confirm"] = route
    fields = sign(confirmation(server.url("/cert.pem"), server.url("/confirm")), signer)
    message = verifier.verify(body(fields), NOW)
    with pytest.raises(SnsError) as caught:
        verifier.confirm_subscription(message)
    assert caught.value.reason == "subscribe-failed"
    assert server.hits["/confirm"] == 1


def test_an_unreachable_subscribe_url(source, unused_port):
    with pytest.raises(SnsError) as caught:
        source.get(f"https://127.0.0.1:{unused_port}/confirm")
    assert caught.value.reason == "subscribe-failed"


# -- malformed -----------------------------------------------------------------------------------


def _without(fields: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k != name}


#: Well-formed apart from what each case breaks; never verified far enough to need a real
#: signature (the server fixture is there to prove nothing is fetched).
GOOD = {**notification("https://127.0.0.1/cert.pem"), "SignatureVersion": "2",
        "Signature": "AAAA"}
SUB = {**confirmation("https://127.0.0.1/cert.pem", "https://127.0.0.1/confirm"),
       "SignatureVersion": "2", "Signature": "AAAA"}

MALFORMED = {
    "not-json": b"<xml/>",
    "empty": b"",
    "not-utf8": b'{"Type": "\xff"}',
    "array": b"[]",
    "string": b'"Notification"',
    "null": b"null",
    "empty-object": b"{}",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "unknown-type": body({**GOOD, "Type": "Ping"}),
    "type-not-string": body({**GOOD, "Type": ["Notification"]}),
    "no-type": body(_without(GOOD, "Type")),
    "no-message-id": body(_without(GOOD, "MessageId")),
    "no-topic": body(_without(GOOD, "TopicArn")),
    "empty-topic": body({**GOOD, "TopicArn": ""}),
    "no-message": body(_without(GOOD, "Message")),
    "message-object": body({**GOOD, "Message": {"notificationType": "Bounce"}}),
    "no-timestamp": body(_without(GOOD, "Timestamp")),
    "bad-timestamp": body({**GOOD, "Timestamp": "yesterday"}),
    "naive-timestamp": body({**GOOD, "Timestamp": "2026-01-02T03:04:05"}),
    "number-timestamp": body({**GOOD, "Timestamp": 1767000000}),
    "subject-number": body({**GOOD, "Subject": 7}),
    "confirmation-no-token": body(_without(SUB, "Token")),
    "confirmation-no-url": body(_without(SUB, "SubscribeURL")),
    "confirmation-url-number": body({**SUB, "SubscribeURL": 1}),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_verify_refuses_malformed_bodies_without_fetching(verifier, server, data):
    assert refusal(verifier, data) == "malformed"
    assert server.connections == 0


@pytest.mark.parametrize("name", ["Signature", "SigningCertURL"])
def test_verify_needs_the_signature_fields(verifier, server, signer, name):
    fields = sign(notification(server.url("/cert.pem")), signer)
    assert refusal(verifier, body(_without(fields, name))) == "malformed"
    assert refusal(verifier, body({**fields, name: 12})) == "malformed"
    assert refusal(verifier, body({**fields, name: ""})) == "malformed"
    assert server.connections == 0


def test_a_timestamp_with_an_offset_is_read_as_utc_and_unknown_fields_are_ignored(
        verifier, server, signer):
    fields = notification(server.url("/cert.pem"))
    fields["Timestamp"] = NOW.astimezone(timezone(timedelta(hours=1))).isoformat()
    message = verifier.verify(body({**sign(fields, signer), "Extra": {"ignored": True}}), NOW)
    assert message.timestamp == NOW and message.timestamp.tzinfo is UTC


def test_an_error_never_repeats_the_body(verifier):
    secret = "do-not-log-this-" + "x" * 5000
    for data in (body({**GOOD, "Type": secret}), secret.encode(),
                 body({**GOOD, "TopicArn": STRANGER + secret})):
        with pytest.raises(SnsError) as caught:
            verifier.verify(data, NOW)
        assert "do-not-log-this-" + "x" * 200 not in str(caught.value)
        assert len(str(caught.value)) < 300 and "\n" not in str(caught.value)


def test_every_reason_has_a_one_line_message():
    for reason in get_args(SnsReason):
        error = SnsError(reason, "line one\nline two")
        assert error.reason == reason and "\n" not in str(error)
        assert str(error).startswith(f"sns {reason}: ")
