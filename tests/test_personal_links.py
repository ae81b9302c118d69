"""Personal links land only in the template's own slots: a review, the editor's file or a
translation that writes ``%%unsubscribe_url%%`` into a link of its own must not receive each
recipient's never-expiring signed link. The hostile text goes through a real build; the tests
read the message bytes a transport would send.
"""

from __future__ import annotations

import email
import re
from datetime import UTC, datetime
from email import policy

import pytest
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK

from pipeline.core.email.message import Messages
from pipeline.core.email.render import (
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Budget,
)
from pipeline.core.proof import proof
from pipeline.errors import BlockedError
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from subscribers.tokens import Keys

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
SID = "0123456789abcdef01234567"
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "test-secret-for-the-personal-link-tests"})

EVIL_HTML = (f'<p>值得精读，见 <a href="https://evil.example/?u={UNSUBSCRIBE_PLACEHOLDER}">这里</a>'
             f' 与 <a href="https://evil.example/?p={PREFERENCES_PLACEHOLDER}">那里</a>。</p>')
EVIL_TEXT = (f"Must read. Plain form: https://evil.example/?u={UNSUBSCRIBE_PLACEHOLDER} and "
             f"{PREFERENCES_PLACEHOLDER}")


def hostile_feed() -> bytes:
    return atom([
        Entry(pr=101, title=f"标题 {UNSUBSCRIBE_PLACEHOLDER}", body=EVIL_HTML,
              content_type="html", lang="zh-CN"),
        Entry(pr=101, title=f"Title https://evil.example/?t={PREFERENCES_PLACEHOLDER}",
              body=EVIL_TEXT, lang="en"),
    ])


def sent_parts(built, settings, layout: str) -> tuple[dict[str, str], Messages]:
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    raw = messages.build("reader@example.org", SID, layout, NOW).raw
    message = email.message_from_bytes(raw, policy=policy.default)
    return {part.get_content_type(): part.get_content()
            for part in message.iter_parts()}, messages


def assert_links_only_in_slots(parts: dict[str, str], messages: Messages) -> None:
    links = messages.links(SID)
    html, text = parts["text/html"], parts["text/plain"]
    assert "evil.example" in html and "evil.example" in text  # the text is there, defused
    for link in (links.unsubscribe, links.preferences):
        token = link.rsplit("=", 1)[1]
        # In the HTML, every copy of the token is a whole href of the template's own.
        assert html.count(token) == html.count(f'href="{link}"') > 0
        # In the text part, every copy is a line of its own.
        lines = [line for line in text.splitlines() if token in line]
        assert lines and all(line == link for line in lines)
    for found in re.findall(r"evil\.example\S*", html + "\n" + text):
        assert "token" not in found and "%%" not in found, found


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_hostile_review_never_receives_a_recipients_link(settings, tmp_path, write_feed,
                                                            layout):
    feed = write_feed(hostile_feed())
    built = load_built(build(settings, week_id=SAMPLE_WEEK, feeds=[str(feed)],
                             out=tmp_path / "issue").out_dir)
    parts, messages = sent_parts(built, settings, layout)
    assert_links_only_in_slots(parts, messages)
    report = proof(built, budget=Budget(90), repo=settings.feed.repo)
    assert not [p for p in report.problems if p.code == "stray-personal-link"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_editors_file_cannot_place_a_personal_link_either(settings, tmp_path, layout):
    folder = settings.resolve(settings.paths.editorial_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SAMPLE_WEEK}.toml").write_text(f"""
[53721]
note = "Read https://evil.example/?n={UNSUBSCRIBE_PLACEHOLDER}"

[53721.zh]
note = "先读 https://evil.example/?n={PREFERENCES_PLACEHOLDER} 这一篇"

[53721.en]
title = "Title {PREFERENCES_PLACEHOLDER}"
body = '<a href="https://evil.example/?u={UNSUBSCRIBE_PLACEHOLDER}">x</a> {EVIL_TEXT}'
""", encoding="utf-8")
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "issue").out_dir)
    parts, messages = sent_parts(built, settings, layout)
    assert_links_only_in_slots(parts, messages)


def test_an_issue_holding_a_stray_placeholder_is_refused_and_blocked(settings, tmp_path):
    """An issue edited by hand to hold one is refused as a whole, not sent."""
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "issue").out_dir)
    evil = f'<a href="https://evil.example/?u={UNSUBSCRIBE_PLACEHOLDER}">x</a>'
    built.artifacts["email-en.html"] = built.html("en").replace("</body>", evil + "</body>")
    with pytest.raises(BlockedError, match=r"email-en\.html .* outside the template's slots"):
        Messages(built, settings.site, settings.delivery, KEYS)
    report = proof(built, budget=Budget(90), repo=settings.feed.repo)
    stray = [p for p in report.blocking if p.code == "stray-personal-link"]
    assert [p.layout for p in stray] == ["en"]

    built = load_built(tmp_path / "issue")
    built.artifacts["email-zh.txt"] = built.text("zh") + f"\nhttps://evil.example/?u=" \
        f"{PREFERENCES_PLACEHOLDER}\n"
    with pytest.raises(BlockedError, match=r"email-zh\.txt"):
        Messages(built, settings.site, settings.delivery, KEYS)
    assert [p.layout for p in proof(built, budget=Budget(90), repo=settings.feed.repo).blocking
            if p.code == "stray-personal-link"] == ["zh"]


def test_what_counts_as_a_slot():
    """An operator's own template may write a slot its own way; glued to a URL it is none."""
    from pipeline.core.email.render import stray_placeholders

    u, p = UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER
    assert stray_placeholders(f'<a href="{u}">x</a> <a href=\'{p}\'>y</a>', "html") == 0
    assert stray_placeholders(f'<a href="https://evil.example/?u={u}">x</a>', "html") == 1
    assert stray_placeholders(f"<p>{u}</p>", "html") == 1
    assert stray_placeholders(f"Unsubscribe: {u}\n{p}\n", "txt") == 0
    assert stray_placeholders(f"https://evil.example/?u={u} and x{p}", "txt") == 2
