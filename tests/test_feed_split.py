"""A long feed read in runs of entries (core/issue/feed_split.py): the same reviews, rejects
and warnings as the whole document, or the whole document read when a cut is not exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.feeds import Entry, atom
from support.project import SAMPLE_FEED

from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.feed_split import split_entries
from pipeline.core.spread import one_by_one
from pipeline.errors import FeedError

DATA = Path(__file__).parent / "data"
REPO = "vllm-project/vllm"


def both(data: bytes, parts: int = 2, content_type: str | None = None):
    whole = parse_feed(data, "feed", REPO, content_type)
    runs = parse_feed(data, "feed", REPO, content_type, spread=one_by_one, parts=parts)
    return whole, runs


@pytest.mark.parametrize("name", ["sample", "rss-mixed.xml", "atom-hostile.atom",
                                  "duplicates.atom", "wrong-encoding.xml"])
@pytest.mark.parametrize("parts", [2, 3, 7])
def test_every_feed_of_the_suite_reads_the_same_in_runs(name, parts):
    data = (Path(SAMPLE_FEED) if name == "sample" else DATA / name).read_bytes()
    whole, runs = both(data, parts)
    assert runs == whole


def test_runs_are_whole_documents_of_about_the_same_size():
    entries = [Entry(pr=n, title=f"评审 {n}", body="值得精读，" + "改动。" * (n % 7 + 1),
                     categories=["rocm"]) for n in range(1, 41)]
    data = atom(entries)
    pieces = split_entries(data, 3)
    assert pieces is not None and len(pieces) == 3
    assert [piece.count(b"<entry>") for piece in pieces] and sum(
        piece.count(b"<entry>") for piece in pieces) == 40
    assert all(piece.startswith(data[:data.index(b"<entry>")]) for piece in pieces)
    assert all(piece.endswith(b"</entry></feed>") for piece in pieces)
    sizes = [len(piece) for piece in pieces]
    assert max(sizes) < 1.3 * min(sizes)
    whole, runs = both(data, 3)
    assert runs == whole and len(runs.reviews) == 40


def rss(channel_tail: str = "", encoding: str = "utf-8", items: int = 4) -> bytes:
    body = "".join(
        f"<item><title>t{n}</title><link>https://github.com/{REPO}/pull/{n}</link>"
        f"<guid>g{n}</guid><pubDate>Tue, 24 Nov 2026 08:15:00 +0800</pubDate>"
        f"<description>Must read: change {n}.</description></item>" for n in range(1, items + 1))
    return (f'<?xml version="1.0" encoding="{encoding}"?><rss version="2.0"><channel>'
            f"<title>t</title>{body}{channel_tail}</channel></rss>").encode(
                "utf-8" if encoding.lower().startswith("utf-8") else encoding)


@pytest.mark.parametrize(("data", "content_type", "why"), [
    (rss("<language>en</language>"), None, "the channel's language after its items"),
    (rss(encoding="utf-16"), None, "UTF-16: the end tags would be written in ASCII"),
    (rss(encoding="shift_jis"), None, "an encoding not known to be ASCII-compatible"),
    (rss(), "application/rss+xml; charset=utf-16", "the HTTP charset is no ASCII one"),
    (rss()[:-40], None, "not well-formed: read whole, and refused as before"),
    (rss(items=1), None, "one entry, two parts"),
    (b'<?xml version="1.0"?><rdf><channel><item>1</item></channel><channel><item>2</item>'
     b"</channel></rdf>", None, "entries under two elements"),
])
def test_a_feed_is_read_whole_where_a_cut_would_not_be_exact(data, content_type, why):
    assert split_entries(data, 2, content_type) is None, why


def test_a_run_feedparser_refuses_sends_the_whole_back_and_the_same_error():
    """expat without namespaces lets an unbound prefix pass; feedparser does not."""
    entries = [Entry(pr=n) for n in range(1, 7)]
    data = atom(entries).replace(b"</entry></feed>", b"<x:note>x</x:note></entry></feed>")
    assert split_entries(data, 2) is not None
    with pytest.raises(FeedError) as whole:
        parse_feed(data, "feed", REPO)
    with pytest.raises(FeedError) as runs:
        parse_feed(data, "feed", REPO, spread=one_by_one, parts=2)
    assert str(runs.value) == str(whole.value) and "not well-formed" in str(runs.value)


def test_text_that_looks_like_an_entry_is_no_cut():
    """An ``<entry>`` inside CDATA, a comment or an escaped body is text, not a start tag."""
    entries = [Entry(pr=n, body="值得精读，<entry> 和 </feed> 都是文字。") for n in range(1, 9)]
    data = atom(entries).replace(b"<entry><id>tag:test,2026:3/2",
                                 b"<!-- <entry> --><entry><id>tag:test,2026:3/2")
    whole, runs = both(data, 4)
    assert runs == whole and len(whole.reviews) == 8
