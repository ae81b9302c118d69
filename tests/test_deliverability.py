"""What a mail server, a spam filter and a mail reader see: the bytes a transport would send
(``Messages.build``), as the outbox writes them, parsed as a mail client does.
"""

from __future__ import annotations

import email
import mailbox
import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from email import policy
from email.header import decode_header, make_header

import pytest
from support.feeds import Entry, atom
from support.markup import unfolded
from support.project import SAMPLE_WEEK, sample_settings

from pipeline.core.email.message import Messages
from pipeline.core.email.mime import BASE64, EIGHT_BIT, QUOTED_PRINTABLE
from pipeline.core.email.wrap import SIGNATURE, width
from pipeline.core.issue.bilingual import SUBJECT_MAX
from pipeline.core.site.site import Site, public_email
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from subscribers.tokens import Keys

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
SID = "0123456789abcdef01234567"
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "test-secret-for-deliverability-0001"})


def sent(settings, built, layout: str) -> bytes:
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    return messages.build("reader@example.org", SID, layout, NOW).raw


def wire_parts(raw: bytes) -> dict[str, tuple[str, bytes]]:
    """content type → (transfer encoding, body bytes exactly as on the wire)."""
    boundary = re.search(rb'boundary="([^"]+)"', raw)
    assert boundary is not None
    found = {}
    for chunk in raw.split(b"--" + boundary.group(1))[1:-1]:
        head, body = chunk.lstrip(b"\r\n").split(b"\r\n\r\n", 1)
        kind = re.search(rb"Content-Type: ([a-z/]+)", head)
        cte = re.search(rb"Content-Transfer-Encoding: (\S+)", head)
        assert kind is not None and cte is not None, head
        found[kind.group(1).decode()] = (cte.group(1).decode(), body)
    return found


def parsed_parts(raw: bytes) -> dict[str, str]:
    message = email.message_from_bytes(raw, policy=policy.default)
    return {part.get_content_type(): unfolded(part.get_content())
            if part.get_content_type() == "text/html" else part.get_content()
            for part in message.iter_parts()}


def big_feed(count: int) -> bytes:
    body = "值得精读，" + "这是一段很长的评审文字，包含 `code_span` 与细节。" * 20
    english = "Must read. " + "A long review paragraph with `code_span` and details. " * 20
    entries = []
    for i in range(count):
        published = f"2026-11-{23 + i % 7}T{10 + i % 10}:{i % 60:02d}:00+08:00"
        entries.append(Entry(pr=1000 + i, title=f"第 {i} 个 PR 的标题：很长很长的一段中文标题",
                             body="\n\n".join([body] * 6), published=published, lang="zh-CN"))
        entries.append(Entry(pr=1000 + i, title=f"Title of PR number {i}, a long one",
                             body="\n\n".join([english] * 6), published=published, lang="en"))
    return atom(entries)


@pytest.fixture(scope="module")
def big_built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    (folder / "feed.atom").write_bytes(big_feed(40))
    settings = sample_settings(folder, feed="feed.atom")
    return settings, load_built(build(settings, week_id=SAMPLE_WEEK, out=folder / "issue").out_dir)


# -- the size budget counts what is sent, in both parts ---------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_both_parts_as_sent_stay_within_the_budget(big_built, layout):
    settings, built = big_built
    assert [p for p in built.data["problems"] if p["code"] == "items-shrunk"]
    parts = wire_parts(sent(settings, built, layout))
    for kind in ("text/html", "text/plain"):
        _cte, body = parts[kind]
        assert len(body) <= settings.issue.size_budget_kb * 1000, (kind, len(body))


def test_the_text_part_shortens_the_same_items_as_the_html(big_built):
    _, built = big_built
    for layout in LAYOUTS:
        text, html = built.text(layout), built.html(layout)
        # The HTML lists a shortened item in its contents only, linked to the PR's page (a
        # card's entry links to "#pr-N"); so does the text part, its entry marked ↗ (there
        # every entry links to the PR's page: a text part has no anchors).
        briefed = list(dict.fromkeys(re.findall(r"/pr/(\d+)/index\.html", html)))
        entries = list(re.finditer(r"/pr/(\d+)/index\.html", text))
        marked = [m.group(1) for before, m in zip([None, *entries], entries, strict=False)
                  if "↗" in text[before.end() if before else 0:m.start()]]
        assert briefed and marked == briefed
        cards = re.findall(r"^#(\d+)", text, re.M)
        assert cards and not set(cards) & set(briefed)
        assert len(cards) + len(briefed) == len(entries)
        for part in (text, html):
            assert "More reviews, in brief" not in part and "更多评审（精简）" not in part
            assert re.search(rf"{len(briefed)} more reviews in the archive|另有 {len(briefed)} "
                             "篇评审见网页存档", part)


def test_each_part_takes_the_smaller_encoding(big_built, built, settings):
    # Without 8bit: English, quoted-printable (~1.0x, against base64's 1.37x); mostly
    # Chinese, three bytes a character, each "=XX": base64. With the cards' markup in shared
    # classes, the Chinese HTML is mostly Chinese too.
    seven = replace(settings, delivery=replace(settings.delivery, eight_bit=False))
    en = wire_parts(sent(seven, built, "en"))
    assert en["text/html"][0] == en["text/plain"][0] == QUOTED_PRINTABLE
    zh = wire_parts(sent(seven, built, "zh"))
    assert zh["text/html"][0] == zh["text/plain"][0] == BASE64
    big_settings, big = big_built
    seven_big = replace(big_settings, delivery=replace(big_settings.delivery, eight_bit=False))
    assert wire_parts(sent(seven_big, big, "zh"))["text/html"][0] == BASE64
    # With 8bit (the default): every HTML part goes as it is, folded, at ~1.0x its size.
    for layout in LAYOUTS:
        parts = wire_parts(sent(settings, built, layout))
        cte, body = parts["text/html"]
        assert cte == EIGHT_BIT, layout
        assert len(body) < 1.01 * len(built.html(layout).encode()) + 2_000
        assert len(body) < len(wire_parts(sent(seven, built, layout))["text/html"][1])
    for layout in LAYOUTS:  # the same choice for every recipient
        assert wire_parts(sent(settings, built, layout)).keys() == {"text/html", "text/plain"}
        messages = Messages(built, settings.site, settings.delivery, KEYS)
        other = messages.build("b@example.org", "f" * 24, layout, NOW)
        assert [c for c, _ in wire_parts(other.raw).values()] == \
            [c for c, _ in wire_parts(sent(settings, built, layout)).values()]


# -- a spam filter's stock rules ---------------------------------------------------------


@pytest.mark.slow  # SpamAssassin's start (Perl, its rules) is most of it
@pytest.mark.subprocess
def test_spamassassin_finds_nothing_to_score(settings, built, tmp_path):
    """No stock rule (``-L``, offline) scores above zero in any layout.

    One SpamAssassin run reads every layout's message from one mailbox (its rules load
    slowly); each goes to an address named for its layout: answers come in any order.
    """
    box = mailbox.mbox(tmp_path / "sent.mbox")
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    for layout in LAYOUTS:
        box.add(messages.build(f"{layout}@example.org", SID, layout, NOW).raw)
    box.close()
    result = subprocess.run(["spamassassin", "-L", "-t", "--mbox", "--cf=use_bayes 0"],
                            input=(tmp_path / "sent.mbox").read_bytes(), capture_output=True,
                            check=True, timeout=120)
    (tmp_path / "scored.mbox").write_bytes(result.stdout)
    statuses = {}
    for message in mailbox.mbox(tmp_path / "scored.mbox"):
        layout = str(message["To"]).partition("@")[0]
        statuses[layout] = " ".join(str(message["X-Spam-Status"]).split())
    assert sorted(statuses) == sorted(LAYOUTS), statuses
    for layout, status in statuses.items():
        score = re.search(r"score=(-?[\d.]+) .*tests=", status)
        assert score is not None, (layout, status)
        assert "HTML_FONT_LOW_CONTRAST" not in status, (layout, status)
        assert float(score.group(1)) <= 0.0, (layout, status)


# -- subjects -------------------------------------------------------------------------

LONG_EN = ("MoRI-IO connector supports SWA and HMA, multiplying disaggregated prefill and "
           "decode throughput substantially")
LONG_ZH = ("MoRI-IO 连接器支持 SWA 与 HMA，分离式预填充与解码吞吐数倍提升，"
           "附带完整回归测试与基准数据说明")


@pytest.fixture
def long_titles(settings, tmp_path, write_feed):
    feed = write_feed(atom([
        Entry(pr=53721, title=LONG_ZH, lang="zh-CN"),
        Entry(pr=53721, title=LONG_EN, body="Must read.", lang="en"),
        Entry(pr=53722, title="第二篇", lang="zh-CN"),
        Entry(pr=53722, title="Second", body="Must read.", lang="en"),
    ]))
    return load_built(build(settings, week_id=SAMPLE_WEEK, feeds=[str(feed)],
                            out=tmp_path / "long").out_dir)


def test_subjects_have_one_brand_fit_and_are_cut_at_a_word_boundary(long_titles):
    for layout in LAYOUTS:
        subject = long_titles.data["subject"][layout]
        assert subject.split(" · ")[0] == ("vLLM PR 周报" if layout.startswith("zh")
                                           else "vLLM PR Weekly")
        assert len(subject) <= SUBJECT_MAX, (layout, subject)
        title = LONG_ZH if layout.startswith("zh") else LONG_EN
        shown = subject.split(" · ", 2)[2].split("…")[0]
        assert title.startswith(shown)
        after = title[len(shown)]
        # The cut falls at a space, before punctuation or next to a CJK character, never
        # between two letters of a word.
        ascii_word = after.isascii() and after.isalnum() and shown[-1].isascii()
        assert not (ascii_word and shown[-1].isalnum()), subject


@pytest.mark.parametrize("layout", LAYOUTS)
def test_encoded_words_are_at_most_75_characters(settings, long_titles, layout):
    raw = sent(settings, long_titles, layout)
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    found = re.search(r"\r\nSubject: (.*?)\r\n(?! )", "\r\n" + head, re.S)
    assert found is not None, head
    subject = found.group(1)
    words = re.findall(r"=\?[^?]+\?[bBqQ]\?[^?]*\?=", subject)
    assert words and all(len(word) <= 75 for word in words), words
    for line in ("Subject: " + subject).split("\r\n"):
        assert len(line) <= 76, line
    assert str(make_header(decode_header(subject.replace("\r\n", "")))) == \
        long_titles.data["subject"][layout]


# -- the text part as a mail reader shows it -------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_text_part_is_wrapped_with_whole_urls_and_a_signature(settings, built, layout):
    text = parsed_parts(sent(settings, built, layout))["text/plain"].replace("\r\n", "\n")
    lines = text.split("\n")
    for line in lines:
        if width(line) > 78:  # only a link alone may be longer
            assert re.fullmatch(r"\s*\S*https?://\S+", line), line
    for item in built.data["items"]:
        assert item["url"] in lines
    links = Messages(built, settings.site, settings.delivery, KEYS).links(SID)
    assert links.unsubscribe in lines and links.preferences in lines
    assert lines.count(SIGNATURE) == 1 and "--" not in lines


# -- list headers and who sends it -----------------------------------------------------


@pytest.fixture
def publisher(settings):
    return replace(settings, delivery=replace(
        settings.delivery, publisher="Example Labs for the vLLM community",
        postal_address="1 Example Road\nSpringfield 12345"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_list_headers_and_a_footer_that_says_who_sends_it(publisher, tmp_path, layout):
    built = load_built(build(publisher, week_id=SAMPLE_WEEK, out=tmp_path / "i").out_dir)
    raw = sent(publisher, built, layout)
    message = email.message_from_bytes(raw, policy=policy.default)
    assert message["List-Archive"] == f"<{publisher.site.base_url}/>"
    assert message["List-Subscribe"] == f"<{publisher.site.app_url}/subscribe>"
    assert message["List-Help"] == f"<{publisher.site.app_url}/subscribe>"
    assert message["List-Post"] == "NO"
    parts = parsed_parts(raw)
    subscribe = f"{publisher.site.app_url}/subscribe"
    for body in parts.values():
        assert "Example Labs for the vLLM community" in body
        assert "1 Example Road Springfield 12345" in body  # one line, whatever the config
        assert subscribe in body
    words = {"zh": ("发件人", "在这里订阅"), "en": ("Sent by", "Subscribe here")}
    for lang in layout.split("-"):
        for word in words[lang]:
            assert all(word in body for body in parts.values()), (lang, word)
    assert f'href="{subscribe}"' in parts["text/html"]


def test_the_archive_copy_carries_the_footer_but_no_token(publisher, tmp_path):
    built = load_built(build(publisher, week_id=SAMPLE_WEEK, out=tmp_path / "i").out_dir)
    page = public_email(built.html("zh-en"), Site(publisher.site)).decode()
    assert "1 Example Road Springfield 12345" in page and "Example Labs" in page
    assert f"{publisher.site.app_url}/subscribe" in page
    assert "token" not in page and "%%" not in page


# -- an outbox .eml a person can read ---------------------------------------------------


def test_an_english_eml_is_readable_in_a_text_editor_and_names_its_sender(settings, built):
    """Without a postal address the footer names the sender."""
    raw = sent(settings, built, "en")
    plain = parsed_parts(raw)["text/plain"]
    assert "Sent by" in plain and "weekly@example.org" in plain
    body = raw.split(b"\r\n\r\n", 1)[1]
    archive = built.data["items"][0]["url"].encode()
    assert archive in body  # a link a person can follow from the file itself
    assert b"Read it in your browser" in body and b"Unsubscribe" in body


def test_the_confirmation_eml_is_readable_and_its_link_works(settings, tmp_path):
    """Quoted-printable keeps the opt-in mail's words and link legible in the file."""
    from pipeline.stages.optin_mail import OptInMailer
    from pipeline.transport.outbox import OutboxTransport
    from subscribers.model import Subscriber

    when = datetime(2026, 11, 30, tzinfo=UTC)
    reader = Subscriber(id="a" * 24, email="reader@example.org", status="pending",
                        layout="en", consent_at=None, consent_source="web",
                        created_at=when, confirmed_at=None, updated_at=when)
    url = f"{settings.site.app_url}/confirm?token={'b' * 56}"
    OptInMailer(settings, OutboxTransport(tmp_path)).confirmation(reader, url, when)
    (eml,) = tmp_path.glob("*.eml")
    raw = eml.read_bytes()
    body = raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else raw.split(b"\n\n", 1)[1]
    assert b"base64" not in raw and b"quoted-printable" in raw
    assert b"Confirm subscription" in body and b"/confirm?token=3D" in body
    message = email.message_from_bytes(raw, policy=policy.default)
    plain = message.get_body(("plain",))
    assert plain is not None
    assert url in plain.get_content()


def test_a_send_without_8bit_refuses_an_issue_fitted_with_it(big_built):
    """Re-encoded, 8bit-fitted parts exceed the budget: refused before anything goes."""
    from pipeline.errors import BlockedError
    from pipeline.stages.preflight import check_issue

    settings, built = big_built
    sent_at = datetime(2026, 12, 2, tzinfo=UTC)  # after the sample week
    check_issue(settings, built, at=sent_at)  # as built: within the budget
    without = replace(settings, delivery=replace(settings.delivery, eight_bit=False))
    with pytest.raises(BlockedError, match=r"email-[a-z-]+\.(html|txt) weighs .* KB as this "
                       r"send would carry it \(\[delivery\] eight_bit = false\), over the 90 KB"
                       r" budget it was built to: build the issue again"):
        check_issue(without, built, at=sent_at)
    check_issue(without, built, at=sent_at, test_copies=True)  # a test copy shows it as is
