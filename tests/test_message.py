"""Messages as a mail client parses them: headers, both parts, each recipient's own links."""

from __future__ import annotations

import email
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from email import policy

import pytest
from support.markup import unfolded
from support.project import SAMPLE_WEEK

from pipeline.core.email.message import Messages
from pipeline.core.email.render import PREFERENCES_PLACEHOLDER, UNSUBSCRIBE_PLACEHOLDER
from pipeline.errors import ConfigError
from pipeline.model import LAYOUTS
from subscribers.tokens import Keys, verify_token

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
SID = "0123456789abcdef01234567"
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "test-secret-for-the-message-tests-0001"})


def parse(raw: bytes) -> email.message.EmailMessage:
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF only
    return email.message_from_bytes(raw, policy=policy.default)


def parts(message) -> dict[str, str]:
    assert message.get_content_type() == "multipart/alternative"
    found = {}
    for part in message.iter_parts():
        assert part.get_content_charset() == "utf-8"
        found[part.get_content_type()] = part.get_content()
    return found


@pytest.mark.parametrize("layout", LAYOUTS)
def test_headers_and_parts(settings, built, layout):
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    out = messages.build("reader@example.org", SID, layout, NOW)
    message = parse(out.raw)
    assert message["Subject"] == built.data["subject"][layout]
    assert "=?utf-8?" in out.raw.split(b"\r\n\r\n", 1)[0].decode().lower()  # RFC 2047
    assert message["From"].addresses[0].display_name == "vLLM PR Weekly"
    assert message["From"].addresses[0].addr_spec == "weekly@example.org"
    assert message["To"] == "reader@example.org"
    assert message["List-Id"] == "vLLM PR Weekly <vllm-pr-weekly.example.org>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert message["Message-ID"].endswith("@example.org>")
    assert message["Date"]
    body = parts(message)
    assert set(body) == {"text/plain", "text/html"}
    assert unfolded(body["text/html"]) == unfolded(filled(built.html(layout), messages, SID))
    for text in body.values():
        assert "%%" not in text
    assert out.recipient == "reader@example.org" and out.sender == "weekly@example.org"
    assert out.tags == {"issue": SAMPLE_WEEK}


def test_list_unsubscribe_is_written_verbatim_with_a_mailto_only_when_configured(
        settings, built):
    plain = Messages(built, settings.site, settings.delivery, KEYS)
    header = parse(plain.build("r@example.org", SID, "en", NOW).raw)["List-Unsubscribe"]
    assert "mailto:" not in header
    with_mailto = replace(settings, delivery=replace(
        settings.delivery, unsubscribe_mailto="unsub@example.org"))
    messages = Messages(built, with_mailto.site, with_mailto.delivery, KEYS)
    raw = messages.build("reader@example.org", SID, "zh-en", NOW).raw
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    links = messages.links(SID)
    # Providers read this header raw: no RFC 2047 encoding, no break inside a URL.
    assert f"\r\nList-Unsubscribe: <{links.unsubscribe}>,\r\n <{links.unsubscribe_mailto}>\r\n" \
        in head
    assert "\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in head
    for line in head.split("\r\n"):
        if line.startswith(("List-", "Message-ID", "To:")):
            assert "=?" not in line, line
    assert links.unsubscribe.startswith("http")
    address = re.fullmatch(r"mailto:unsub\+([a-z2-7]+)@example\.org\?subject=unsubscribe",
                           links.unsubscribe_mailto or "")
    assert address is not None, links.unsubscribe_mailto
    local = address.group(1)
    assert len(local) + len("unsub+") <= 64
    assert verify_token(KEYS, local, "unsubscribe", NOW) == SID


def test_reply_to_and_test_subjects(settings, built):
    configured = replace(settings, delivery=replace(settings.delivery,
                                                    reply_to="Editor <editor@example.org>"))
    messages = Messages(built, configured.site, configured.delivery, KEYS)
    message = parse(messages.build("r@example.org", SID, "zh", NOW, test=True).raw)
    assert message["Reply-To"] == "Editor <editor@example.org>"
    assert message["Subject"] == "[TEST zh] " + built.data["subject"]["zh"]


@pytest.mark.parametrize("value", ["no address", "a@example.org, b@example.org",
                                   "X <x@example.org>\r\nBcc: victim@example.org"])
def test_a_bad_from_is_a_config_error(settings, built, value):
    bad = replace(settings, delivery=replace(settings.delivery, from_=value))
    with pytest.raises(ConfigError):
        Messages(built, bad.site, bad.delivery, KEYS)


def test_a_line_break_in_the_recipient_or_the_subject_never_reaches_the_wire(settings, built):
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    with pytest.raises(ValueError):
        messages.build("a@example.org\r\nBcc: victim@example.org", SID, "en", NOW)
    subject = {**built.issue.subject, "en": "Hello\r\nBcc: victim@example.org"}
    built = replace(built, issue=replace(built.issue, subject=subject))
    with pytest.raises(ValueError):
        Messages(built, settings.site, settings.delivery, KEYS)


#: What List-Unsubscribe puts around the app URL on its first line: the name, "<", the path
#: and query before the token, the 56-character token, ">" (plus "," before a mailto:).
AROUND_APP_URL = len("List-Unsubscribe: <") + len("/unsubscribe?token=") + 56 + len(">")


@pytest.mark.parametrize("mailto", ["", "unsub@example.org"], ids=["https only", "with mailto"])
def test_the_longest_app_url_a_mail_line_holds_sends_and_one_more_is_refused(
        settings, built, mailto):
    longest = 998 - AROUND_APP_URL - (1 if mailto else 0)

    def configured(length: int):
        url = "https://news.example.org/" + "a" * (length - len("https://news.example.org/"))
        return replace(settings, site=replace(settings.site, app_url=url),
                       delivery=replace(settings.delivery, unsubscribe_mailto=mailto))

    fits = configured(longest)
    raw = Messages(built, fits.site, fits.delivery, KEYS).build("r@example.org", SID, "en",
                                                                 NOW).raw
    lines = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    assert max(len(line) for line in lines) == 998  # the List-Unsubscribe line, full
    over = configured(longest + 1)
    with pytest.raises(ConfigError, match=r"\[site\] app_url: .*List-Unsubscribe.*by 1 "):
        Messages(built, over.site, over.delivery, KEYS)


@pytest.mark.parametrize(("section", "key", "value", "header"), [
    ("delivery", "unsubscribe_mailto", "unsub@" + "a" * 60 + ".example" * 120 + ".org",
     "List-Unsubscribe"),
    # Too long for List-Help too: named for List-Unsubscribe, which needs the most room.
    ("site", "app_url", "https://news.example.org/" + "a" * 960, "List-Unsubscribe"),
    ("site", "base_url", "https://news.example.org/" + "a" * 960, "List-Archive"),
])
def test_a_setting_too_long_for_its_header_is_a_config_error(settings, built, section, key,
                                                             value, header):
    longer = replace(settings, **{section: replace(getattr(settings, section),
                                                   **{key: value})})
    with pytest.raises(ConfigError, match=rf"\[{section}\] {key}: .*{header}"):
        Messages(built, longer.site, longer.delivery, KEYS)


#: app_url values: the default, long (links far longer than the room an 8bit part makes for
#: them), Unicode, with "%", and ones that name a placeholder.
APP_URLS = ["http://127.0.0.1:8001", "https://news.example.org/" + "long-path/" * 30 + "app",
            "https://例子.测试/订阅", "https://news.example.org/a%20b",
            "https://x.org/%%preferences_url%%", "https://x.org/=\t. = "]
CHOICES = [("zh-en", ("rocm",)), ("en-zh", ("cpu",)), ("en", ("kv-connector",)),
           ("zh", ("cpu", "nixl"))]


@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    """The sample week built with an interest variant of every layout."""
    from support.project import sample_settings

    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    folder = tmp_path_factory.mktemp("varied")
    settings = sample_settings(folder)
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=folder / "issue",
                             choices=CHOICES).out_dir)
    assert {v.variant.layout for v in built.variants} == set(LAYOUTS)
    return settings, built


def filled(body: str, messages: Messages, sid: str) -> str:
    """``body`` with one recipient's links in its slots, one placeholder after the other."""
    links = messages.links(sid)
    return body.replace(UNSUBSCRIBE_PLACEHOLDER, links.unsubscribe).replace(
        PREFERENCES_PLACEHOLDER, links.preferences)


def read_as_html(html: str) -> str:
    """What a mail app lays out: an 8bit part's folds (a line break for a space, a line
    break inside ``<wbr>``) read as what they replaced."""
    return unfolded(html.replace("<wbr\n>", "").replace("<wbr\r\n>", ""))


@pytest.mark.parametrize("eight_bit", [True, False], ids=["8bit", "7bit"])
@pytest.mark.parametrize("app_url", APP_URLS)
def test_every_part_carries_the_recipients_links_in_any_encoding(varied, eight_bit, app_url):
    """Each reader's links land in every part and encoding, and no line passes 998 octets."""
    settings, built = varied
    configured = replace(settings, site=replace(settings.site, app_url=app_url),
                         delivery=replace(settings.delivery, eight_bit=eight_bit,
                                          unsubscribe_mailto="unsub@example.org"))
    messages = Messages(built, configured.site, configured.delivery, KEYS)
    keys = [(layout, None) for layout in LAYOUTS] + [
        (v.variant.layout, v.key) for v in built.variants]
    encodings = set()
    for index, recipient in enumerate(["reader@example.org", "用户@例子.测试"]):
        sid = f"{index:024d}"
        for layout, variant in keys:
            raw = messages.build(recipient, sid, layout, NOW, variant=variant).raw
            body = raw.split(b"\r\n\r\n", 1)[1]
            assert max(len(line) for line in body.split(b"\r\n")) <= 998, (layout, variant)
            encodings |= set(re.findall(rb"Content-Transfer-Encoding: (\S+)", raw))
            got = parts(parse(raw))
            key = variant or layout
            # The line break before the boundary belongs to the boundary.
            assert got["text/plain"].replace("\r\n", "\n").rstrip("\n") == filled(
                built.text(key), messages, sid).rstrip("\n"), key
            assert read_as_html(got["text/html"]).rstrip() == read_as_html(
                filled(built.html(key), messages, sid)).rstrip(), key
    if eight_bit:
        assert b"8bit" in encodings
    else:
        assert encodings == {b"base64", b"quoted-printable"}


def test_the_date_is_the_reading_given(settings, built):
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    plus8 = timezone(timedelta(hours=8))
    for now in (NOW, NOW + timedelta(seconds=1), NOW.astimezone(plus8),
                NOW.replace(microsecond=999_999)):
        date = parse(messages.build("r@example.org", SID, "en", now).raw)["Date"]
        assert date.datetime == now.replace(microsecond=0)
        assert date.datetime.utcoffset() == now.utcoffset()
