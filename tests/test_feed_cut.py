"""Oversized entry texts cut before feedparser reads them (pipeline/core/issue/feed_cut.py)."""

from __future__ import annotations

from support.feeds import Entry, atom

from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.feed_cut import cut_long_texts
from pipeline.core.issue.sanitize import MAX_BODY_CHARS

REPO = "vllm-project/vllm"


def test_a_feed_without_a_long_text_reaches_feedparser_as_it_came():
    feed = atom([Entry(pr=1, body="值得精读。" * 2000)])  # 10,000 characters: under the limit
    assert len(feed) > MAX_BODY_CHARS
    same, cut = cut_long_texts(feed, MAX_BODY_CHARS)
    assert same is feed and cut == {}
    broken = b"<feed><entry>" + b"x" * 30_000  # not XML: feedparser says what is wrong
    assert cut_long_texts(broken, MAX_BODY_CHARS) == (broken, {})


def test_a_long_atom_text_is_cut_and_the_rest_of_the_document_kept():
    feed = atom([
        Entry(pr=7, body="值得精读。" + "长" * 50_000, lang="zh-CN", id="tag:x,2026:7"),
        Entry(pr=7, body="Must read.", lang="en", id="tag:x,2026:7-en", title="Seven"),
    ], feed_lang=None)
    rewritten, cut = cut_long_texts(feed, MAX_BODY_CHARS)
    assert cut == {"tag:x,2026:7": 50_005}
    result = parse_feed(rewritten, "f", REPO)
    zh, en = sorted(result.reviews, key=lambda r: r.lang, reverse=True)
    assert (zh.lang, en.lang) == ("zh", "en")  # xml:lang survives the rewrite
    assert len(zh.body_html) <= MAX_BODY_CHARS + len("<p></p>")
    assert en.title == "Seven" and en.body_html == "<p>Must read.</p>"
    # Through parse_feed itself, the review says how long it was.
    (long,) = [r for r in parse_feed(feed, "f", REPO).reviews if r.lang == "zh"]
    assert long.shortened_from == 50_005


def test_an_rss_description_is_cut_and_found_by_its_guid():
    body = "值得一读。" + "&lt;b&gt;x&lt;/b&gt; " * 5_000
    rss = (
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
        "<link>https://example.org</link><description>d</description><item>"
        "<title>RSS</title><link>https://github.com/vllm-project/vllm/pull/9</link>"
        "<guid>rss-9</guid><pubDate>Tue, 24 Nov 2026 10:00:00 +0800</pubDate>"
        f"<description>{body}</description></item></channel></rss>").encode()
    _, cut = cut_long_texts(rss, MAX_BODY_CHARS)
    assert list(cut) == ["rss-9"] and cut["rss-9"] > MAX_BODY_CHARS
    (review,) = parse_feed(rss, "f", REPO).reviews
    assert review.pr == 9 and review.shortened_from == cut["rss-9"]
    assert review.body_html.startswith("值得一读。<b>x</b> <b>x</b>")
