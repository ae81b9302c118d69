"""Oversized entry texts cut before feedparser reads them (pipeline/core/issue/feed_cut.py): the
cut reads the document as feedparser does, so a feed means the same cut as read whole."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import replace

import pytest
from support.commands import newsletter_main
from support.feeds import Entry, atom, feed_project
from support.project import SAMPLE_WEEK

from pipeline.core.issue import collect
from pipeline.core.issue.collect import FeedResult, parse_feed
from pipeline.core.issue.feed_cut import CutFeed, cut_long_texts
from pipeline.core.issue.sanitize import MAX_BODY_CHARS
from pipeline.errors import FeedError

REPO = "vllm-project/vllm"
ATOM = "application/atom+xml"


def test_a_feed_without_a_long_text_reaches_feedparser_as_it_came():
    feed = atom([Entry(pr=1, body="值得精读。" * 2000)])  # 10,000 characters: under the limit
    assert len(feed) > MAX_BODY_CHARS
    kept = cut_long_texts(feed, MAX_BODY_CHARS)
    assert kept.data is feed and kept.cut == {} and kept.content_type is None
    broken = b"<feed><entry>" + b"x" * 60_000  # not XML: feedparser says what is wrong
    assert cut_long_texts(broken, MAX_BODY_CHARS).data is broken


def test_a_long_atom_text_is_cut_and_the_rest_of_the_document_kept():
    feed = atom([
        Entry(pr=7, body="值得精读。" + "长" * 50_000, lang="zh-CN", id="tag:x,2026:7"),
        Entry(pr=7, body="Must read.", lang="en", id="tag:x,2026:7-en", title="Seven"),
    ], feed_lang=None)
    cut = cut_long_texts(feed, MAX_BODY_CHARS)
    assert cut.cut == {"tag:x,2026:7": 50_005}
    assert len(cut.data) < len(feed) - 30_000  # 10,005 of its characters cut, 3 bytes each
    result = parse_feed(cut.data, "f", REPO)
    zh, en = sorted(result.reviews, key=lambda r: r.lang, reverse=True)
    assert (zh.lang, en.lang) == ("zh", "en")  # xml:lang survives the cut
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
    cut = cut_long_texts(rss, MAX_BODY_CHARS)
    assert list(cut.cut) == ["rss-9"] and cut.cut["rss-9"] == 45_005
    (review,) = parse_feed(rss, "f", REPO).reviews
    assert review.pr == 9 and review.shortened_from == 45_005
    assert review.body_html.startswith("值得一读。<b>x</b> <b>x</b>")


# -- the cut means what the whole feed means ------------------------------------------------------

#: A review's body per content type: its opening, and a unit repeated to make it long. The
#: characters are in Big5 as well as in GBK and GB18030.
BODIES = {
    "text": ("值得精讀。", "長篇評審，細節 & 更多。"),
    "html": ("<p>值得精讀。</p>", "<p>段落 <code>x</code> 細節 &amp; 更多</p>"),
    "xhtml": ("<p>值得精讀。</p>", "<p>段落 <b>w</b> 細節，" + "更多" * 20 + "</p>"),
}


def _declared(feed: bytes, encoding: str) -> str:
    return feed.decode().replace('encoding="utf-8"', f'encoding="{encoding}"', 1)


def _bare(feed: bytes) -> str:
    return feed.decode().split("?>", 1)[1].lstrip()


#: How a feed arrives: its bytes and the HTTP Content-Type it is served with.
ENCODINGS: dict[str, Callable[[bytes], tuple[bytes, str | None]]] = {
    "utf-8": lambda feed: (feed, None),
    "utf-16, BOM and declaration": lambda feed: (_declared(feed, "utf-16").encode("utf-16"),
                                                 None),
    "utf-16, BOM, no declaration, served as utf-16": lambda feed: (
        _bare(feed).encode("utf-16"), f"{ATOM}; charset=utf-16"),
    "utf-16, no BOM, no declaration, served as utf-16": lambda feed: (
        _bare(feed).encode("utf-16-le"), f"{ATOM}; charset=utf-16"),
    "utf-8 bytes declared and served as iso-8859-1": lambda feed: (
        _declared(feed, "iso-8859-1").encode(), f"{ATOM}; charset=iso-8859-1"),
    "gb18030": lambda feed: (_declared(feed, "gb18030").encode("gb18030"), None),
    "gbk": lambda feed: (_declared(feed, "gbk").encode("gbk"), None),
    "big5": lambda feed: (_declared(feed, "big5").encode("big5"), None),
}


def review_feed(content_type: str, long: bool) -> bytes:
    """Three short reviews, and with ``long`` a fourth over twice the body's limit."""
    opening, unit = BODIES[content_type]
    entries = [Entry(pr=n, title=f"評審 {n}", body=opening + unit * n, lang="zh-TW",
                     content_type=content_type) for n in (1, 2, 3)]
    if long:
        entries.append(Entry(pr=9, title="長評審", body=opening + unit * (45_000 // len(unit)),
                             content_type=content_type, lang="zh-TW"))
    return atom(entries)


def whole_only_cut(data: bytes, _limit: int, content_type: str | None = None) -> CutFeed:
    """No cut: feedparser reads the document as it came, and the body is cut after it."""
    return CutFeed(data, content_type)


def read(data: bytes, content_type: str | None) -> FeedResult | str:
    try:
        return parse_feed(data, "feed", REPO, content_type)
    except FeedError as exc:
        return str(exc)


@pytest.mark.parametrize("kind", BODIES)
@pytest.mark.parametrize("long", [False, True], ids=["short", "long"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_feed_reads_the_same_cut_as_whole(monkeypatch, encoding, long, kind):
    """Cut first or read whole, every review, warning and rejected entry is the same."""
    data, served = ENCODINGS[encoding](review_feed(kind, long))
    cut = read(data, served)
    with monkeypatch.context() as whole_only:
        whole_only.setattr(collect, "cut_long_texts", whole_only_cut)
        whole = read(data, served)
    assert isinstance(whole, FeedResult), whole
    assert [r.pr for r in whole.reviews] == [1, 2, 3, 9][:4 if long else 3]
    assert whole.reviews[0].title == "評審 1"
    assert bool(whole.reviews[-1].shortened_from) is long
    assert isinstance(cut, FeedResult), cut
    (cut, cut_lengths), (whole, whole_lengths) = lengths_apart(cut), lengths_apart(whole)
    assert cut == whole
    # How long a cut body was: its characters, and for markup its tags, where the cut cannot
    # know that feedparser will drop the XHTML wrapper (``<div>``, ``</div>``).
    wrapper = len("<div></div>") if kind == "xhtml" else 0
    assert [n - wrapper if n else 0 for n in cut_lengths] == whole_lengths


def lengths_apart(result: FeedResult) -> tuple[FeedResult, list[int]]:
    """The result with each review's ``shortened_from`` put aside."""
    return (replace(result, reviews=tuple(replace(r, shortened_from=0) for r in result.reviews)),
            [r.shortened_from for r in result.reviews])


#: Long bodies in CDATA, and in Atom 0.3's ``mode="base64"`` (counted as it decodes).
CDATA_BODY = "<p>值得一读。</p>" + "<p>细节 <code>x</code> &amp; 更多</p>" * 2_000
BASE64_BODY = "<p>值得精读。" + "细节 &amp; 更多。" * 20_000 + "</p>"
CDATA = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0" xmlns:content='
         '"http://purl.org/rss/1.0/modules/content/"><channel><title>t</title><item>'
         "<title>RSS</title><link>https://github.com/vllm-project/vllm/pull/9</link>"
         "<guid>rss-9</guid><pubDate>Tue, 24 Nov 2026 10:00:00 +0800</pubDate>"
         f"<content:encoded><![CDATA[{CDATA_BODY}]]></content:encoded></item></channel></rss>"
         ).encode()
BASE64 = atom([Entry(pr=9, id="b64", body="x", content_type="html")]).replace(
    b'<content type="html">x</content>',
    b'<content type="text/html" mode="base64">'
    + base64.encodebytes(BASE64_BODY.encode()) + b"</content>")


@pytest.mark.parametrize(("feed", "cut_as"), [(CDATA, {"rss-9": len(CDATA_BODY)}),
                                              (BASE64, {"b64": len(BASE64_BODY)})],
                         ids=["cdata", "base64"])
def test_a_long_text_in_cdata_or_base64_reads_the_same_cut_as_whole(monkeypatch, feed, cut_as):
    assert cut_long_texts(feed, MAX_BODY_CHARS).cut == cut_as
    cut = read(feed, None)
    monkeypatch.setattr(collect, "cut_long_texts", whole_only_cut)
    assert cut == read(feed, None)


def test_markup_inside_a_text_is_cut_between_its_pieces_and_closed():
    """``type="xhtml"`` is markup: cut between pieces, feedparser reads at most twice the limit."""
    body = "<p>值得精读。" + "<i>x</i><b>w</b>" * 100_000 + "</p>"
    feed = atom([Entry(pr=5, body=body, content_type="xhtml", id="x5")])
    cut = cut_long_texts(feed, MAX_BODY_CHARS)
    assert len(cut.data) < len(feed) // 25 and cut.cut["x5"] > 1_600_000
    (review,) = parse_feed(feed, "f", REPO).reviews
    assert review.body_html.startswith("<p>值得精读。<i>x</i><b>w</b><i>x</i>")
    assert review.body_html.endswith("</p>") and len(review.body_html) <= MAX_BODY_CHARS + 10
    assert review.shortened_from == cut.cut["x5"]


@pytest.mark.parametrize("encoding", ["gb18030", "gbk", "big5"])
def test_a_long_feed_in_a_chinese_encoding_builds_as_its_utf8_twin(tmp_path, encoding):
    """expat reads no multi-byte encoding: a long GBK or Big5 feed must still build."""
    entries = [Entry(pr=n, title=f"評審 {n}", body="值得精讀。" + "細節。" * 400, lang="zh-TW")
               for n in range(1, 9)]
    feed = atom(entries)
    issues = []
    for name, data in (("utf-8", feed), (encoding, _declared(feed, encoding).encode(encoding))):
        result = newsletter_main(["build", "--week", SAMPLE_WEEK],
                                 feed_project(tmp_path / name, data))
        assert result.returncode == 0, result.stderr
        issues.append((tmp_path / name / "build" / "issues" / SAMPLE_WEEK / "issue.json"
                       ).read_bytes())
    assert len(data) > 20_000
    assert issues[0] == issues[1]
    assert len(json.loads(issues[1])["items"]) == len(entries)
