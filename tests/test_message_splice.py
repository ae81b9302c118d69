"""Messages built from parts encoded once, links spliced in: byte for byte today's messages.

The reference is the implementation before issue 17 (``message_reference.py``, verbatim),
which filled each recipient's links into the parts and encoded them whole. Every layout and
an interest variant of each, test copies, ASCII and Unicode recipients, links of several
lengths and shapes (long, Unicode, with ``%``, hostile), both transfer encodings.
"""

from __future__ import annotations

import base64
import binascii
import random
import secrets
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from support import message_reference
from support.project import SAMPLE_FEED, SAMPLE_WEEK

from pipeline.config import Settings, load
from pipeline.core.email.body_splice import SplicedBody
from pipeline.core.email.message import Messages
from pipeline.core.email.mime import BASE64, QUOTED_PRINTABLE, encode_body
from pipeline.core.email.render import (
    PLACEHOLDERS,
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
)
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from subscribers.model import new_subscriber_id
from subscribers.tokens import Keys

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "splice-test-secret-0123456789-abcdefgh"})
CHOICES = [("zh-en", ("rocm",)), ("en-zh", ("cpu",)), ("en", ("kv-connector",)),
           ("zh", ("cpu", "nixl"))]
RECIPIENTS = ["reader@example.org", "Reader.Name+tag@example.org", "用户@例子.测试",
              "josé@exämple.org", "a@xn--fsqu00a.xn--0zwm56d", "x" * 60 + "@example.org"]
#: app_url values: the default, long (links far longer than the reserve), Unicode, with "%"
#: (links that must not be spliced), and hostile ones naming a placeholder.
APP_URLS = ["http://127.0.0.1:8001", "https://news.example.org/" + "long-path/" * 30 + "app",
            "https://例子.测试/订阅", "https://news.example.org/a%20b",
            "https://x.org/%%preferences_url%%", "https://x.org/" + UNSUBSCRIBE_PLACEHOLDER,
            "https://x.org/=\t. = "]
U, P = UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER


@pytest.fixture(scope="module")
def issue(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, BuiltIssue]:
    folder = tmp_path_factory.mktemp("splice")
    config = folder / "newsletter.toml"
    config.write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
    settings = load(config, {})
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=folder / "issue",
                             choices=CHOICES).out_dir)
    assert {v.variant.layout for v in built.variants} == set(LAYOUTS)
    # Quoted-printable and base64: the parts as a transport without 8bit gets them.
    return replace(settings, delivery=replace(settings.delivery, eight_bit=False)), built


@pytest.fixture(autouse=True)
def fixed_message_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both implementations draw the Message-ID's random part from ``secrets``."""
    monkeypatch.setattr(secrets, "token_hex", lambda n: "5a" * n)


def with_app_url(settings: Settings, app_url: str, mailto: str = "") -> Settings:
    return replace(settings, site=replace(settings.site, app_url=app_url),
                   delivery=replace(settings.delivery, unsubscribe_mailto=mailto,
                                    reply_to="Editor <editor@example.org>"))


def both(settings: Settings, built: BuiltIssue) -> tuple[Messages, message_reference.Messages]:
    return (Messages(built, settings.site, settings.delivery, KEYS),
            message_reference.Messages(built, settings, KEYS))


@pytest.mark.slow  # every layout and variant, spliced and encoded whole, for many readers
def test_every_layout_and_variant_is_byte_identical_for_many_recipients(issue):
    settings, built = issue
    ours, reference = both(settings, built)
    keys = [(layout, None) for layout in LAYOUTS] + [
        (v.variant.layout, v.key) for v in built.variants]
    encodings = set()
    for index in range(60):
        recipient = RECIPIENTS[index % len(RECIPIENTS)].replace("@", f"{index}@", 1)
        sid = new_subscriber_id()
        for layout, variant in keys:
            for test in (False, True):
                now = NOW if index % 2 else LATER
                got = ours.build(recipient, sid, layout, now, variant=variant, test=test)
                want = reference.build(recipient, sid, layout, now, variant=variant, test=test)
                assert got.raw == want.raw, (recipient, layout, variant, test)
                assert (got.key, got.tags, got.sender) == (want.key, want.tags, want.sender)
                encodings |= {e for e in (b"base64", b"quoted-printable")
                              if b"Content-Transfer-Encoding: " + e in got.raw}
    assert encodings == {b"base64", b"quoted-printable"}  # both paths of the splice ran


@pytest.mark.parametrize("app_url", APP_URLS)
def test_links_of_every_shape_are_byte_identical(issue, app_url):
    settings, built = issue
    configured = with_app_url(settings, app_url, mailto="unsub@example.org")
    ours, reference = both(configured, built)
    for index in range(8):
        sid = new_subscriber_id()
        recipient = RECIPIENTS[index % len(RECIPIENTS)]
        for layout in LAYOUTS:
            assert ours.build(recipient, sid, layout, NOW).raw == \
                reference.build(recipient, sid, layout, NOW).raw, (app_url, layout)


@pytest.mark.parametrize("app_url", APP_URLS)
def test_8bit_parts_are_byte_identical_and_their_lines_short_for_links_of_every_shape(
        issue, app_url):
    """``[delivery] eight_bit``: every part of the sample goes 8bit; each recipient's lines,
    the links in place, stay within 998 octets, even for links longer than the reserve."""
    settings, built = issue
    configured = with_app_url(replace(settings, delivery=replace(
        settings.delivery, eight_bit=True)), app_url, mailto="unsub@example.org")
    ours, reference = both(configured, built)
    for index in range(4):
        sid = new_subscriber_id()
        recipient = RECIPIENTS[index % len(RECIPIENTS)]
        for layout in LAYOUTS:
            message = ours.build(recipient, sid, layout, NOW)
            assert message.raw == reference.build(recipient, sid, layout, NOW).raw, layout
            assert message.eight_bit and b"Content-Transfer-Encoding: 8bit" in message.raw
            body = message.raw.split(b"\r\n\r\n", 1)[1]
            assert max(len(line) for line in body.split(b"\r\n")) <= 998, (app_url, layout)


# -- the splice itself, on bodies a hostile feed or template could produce --------------------

#: Runs that sit on b2a_qp's edges: spaces and tabs before line ends, "=" and "." that are
#: escaped, 70-character runs that push links across the 76-column wrap, NULs, CR, CRLF,
#: multi-byte UTF-8, placeholders glued together, and the private-use characters the splitter
#: uses as stand-ins.
PIECES = ["a", "b", " ", " ", "\t", "=", ".", "\n", "\n\n", "\r\n", "中", "é", U, P,
          "x" * 70, " \n", ".\n", "\x00", "=\n", "%", "%%", U + P, P + U,
          "%%unsubscribe_url%%preferences_url%%"]
#: Rarer: a lone CR (b2a_qp may switch to CRLF line ends) and the stand-ins: the whole body is
#: then encoded the ordinary way.
RARE = ["\r", "\ue000", "\ue001"]


def random_body(rng: random.Random, pieces: list[str], count: int) -> str:
    return "".join(rng.choice(RARE) if rng.random() < 0.003 else rng.choice(pieces)
                   for _ in range(count))


def random_link(rng: random.Random) -> str:
    tail = "".join(rng.choice("ab=.- \t中%\n\r") if rng.random() < 0.001 else
                   rng.choice("abcXY09_-") for _ in range(rng.randint(0, 300)))
    return rng.choice(["https://a.example/u?t=", "", "=", ".", "中", " "]) + tail


@pytest.mark.slow  # 1,500 random bodies a seed, each encoded whole and spliced
@pytest.mark.parametrize("seed", range(4))
def test_splicing_random_bodies_gives_what_encoding_the_filled_body_gives(seed):
    rng = random.Random(seed)
    spliced = fallback = 0
    for _ in range(1500):
        body = random_body(rng, PIECES, rng.randint(0, 40))
        if rng.random() < 0.3:  # long lines: links land at every column and 57-byte offset
            body = random_body(rng, PIECES[:12], rng.randint(0, 600)) + \
                rng.choice([U, P, U + "\n", "\n" + P + " "])
        for encoding in (BASE64, QUOTED_PRINTABLE):
            part = SplicedBody(body, encoding, PLACEHOLDERS)
            for _ in range(3):
                links = [random_link(rng), random_link(rng)]
                expected = encode_body(part.reference_fill(links), encoding)
                assert part.encode(links) == expected, (encoding, body, links)
                if part._spliceable and part._safe(links):
                    spliced += 1
                else:
                    fallback += 1
    assert spliced > 3 * fallback > 0  # mostly the fast path; the slow one checked too


@pytest.mark.parametrize("encoding", [BASE64, QUOTED_PRINTABLE])
@pytest.mark.parametrize("body", ["", U, U + P, "text without a link\n", "é" * 200 + U,
                                  ("=" * 100 + " \n") * 3 + P + "\n" + U, "\r\n" + U + "\r\n",
                                  ".\n" + U + "\n.", "a" * 75 + U + " " * 3,
                                  "\n" + U + "\x00x", "a" * 74 + U + "\x00\n" + P + "\x00",
                                  U + " \n" + P + "\t\n"])
def test_edge_bodies(body, encoding):
    part = SplicedBody(body, encoding, PLACEHOLDERS)
    for length in (1, 56, 57, 58, 75, 76, 77, 200):
        links = ["h" * length, "p" + "=" * (length - 1)]
        assert part.encode(links) == encode_body(part.reference_fill(links), encoding)
    # A link that is or ends in what b2a_qp escapes only before a line end, NUL or the end.
    for links in ([".", "."], ["x" * 74 + ".", " "], ["a .", "b\t"]):
        assert part.encode(links) == encode_body(part.reference_fill(links), encoding)
    # The same part serves another recipient whose links start at another column.
    assert part.encode(["h", "p"]) == encode_body(part.reference_fill(["h", "p"]), encoding)


def test_an_unknown_encoding_or_a_missing_link_is_refused():
    with pytest.raises(ValueError, match="unknown transfer encoding"):
        SplicedBody("x", "7bit", PLACEHOLDERS)
    with pytest.raises(ValueError, match="expected 2 links"):
        SplicedBody(U, BASE64, PLACEHOLDERS).encode(["only one"])


def test_a_layout_is_encoded_once_then_only_around_the_links(issue, monkeypatch):
    """What makes it fast, said as behaviour: after the first recipient of a layout, the
    encoders see only a few lines per link, never a whole part again."""
    settings, built = issue
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    messages.build("first@example.org", new_subscriber_id(), "zh-en", NOW)
    seen: list[int] = []
    # body_splice calls the encoders through these modules: patching them is patching it.
    real_qp, real_b64 = binascii.b2a_qp, base64.encodebytes

    def qp(data: bytes, **kwargs: bool) -> bytes:
        seen.append(len(data))
        return real_qp(data, **kwargs)

    def b64(data: bytes) -> bytes:
        seen.append(len(data))
        return real_b64(data)

    monkeypatch.setattr(binascii, "b2a_qp", qp)
    monkeypatch.setattr(base64, "encodebytes", b64)
    raw = messages.build("second@example.org", new_subscriber_id(), "zh-en", NOW).raw
    assert seen and max(seen) < 600 and sum(seen) < len(raw) / 20


def test_the_date_follows_every_clock_reading(issue):
    """The Date header is folded once per second shown; a reading in another zone, a second
    later, or without a zone is a different header, as it was."""
    settings, built = issue
    ours, reference = both(settings, built)
    plus8 = timezone(timedelta(hours=8))
    readings = [NOW, NOW.replace(microsecond=999_999), NOW.astimezone(plus8),
                NOW + timedelta(seconds=1), NOW.replace(tzinfo=None), NOW, LATER,
                LATER.astimezone(plus8), NOW.replace(tzinfo=ZoneInfo("Asia/Shanghai"))]
    for now in readings:
        sid = new_subscriber_id()
        got = ours.build("r@example.org", sid, "en", now).raw
        assert got == reference.build("r@example.org", sid, "en", now).raw, now
