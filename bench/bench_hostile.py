"""Benchmark of one hostile review: what a feed entry with a body of megabytes costs a build.

A feed of one review whose body is ``N`` MB of markup, for N = 0.1, 1, 3 and 10 (a feed may be
20 MB), written two ways: ``html``, ``<b>`x`</b> 细节 &amp;`` over and over, escaped in the
Atom document as any HTML body is; ``xhtml``, ``<b>w</b>`` over and over as elements of a
``type="xhtml"`` content (issue 39: 3 MB of it took feedparser 11.2 s, past the cut).
``parse_feed`` is what the build does with it now: the body is cut at twice
``MAX_BODY_CHARS`` before feedparser reads the document (pipeline/core/issue/feed_cut.py),
then sanitized. The baseline, measured in the same run, is ``feedparser.parse`` alone on the
same document uncut: what the build paid before the cut, before any of the project's own
work (nh3, the text, the rendering), which then came on top. ``vs feedparser`` is
``parse_feed`` over that baseline. Each figure is the median of three runs (one at 10 MB, and
one for feedparser alone on xhtml from 1 MB, which is not run at 10 MB: 40 s), in
milliseconds.

Run: ``make bench`` or ``.venv/bin/python bench/bench_hostile.py [--sizes 0.1,1,3]``.
Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from html import escape

import feedparser  # type: ignore[import-untyped]
from bench_build import median_ms, table

from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.sanitize import MAX_BODY_CHARS

UNIT = "<b>`x`</b> 细节 &amp; "
XHTML_UNIT = "<b>w</b>"


def feed_of(megabytes: float, kind: str = "html") -> bytes:
    if kind == "xhtml":
        body = "<p>值得精读。</p>" + XHTML_UNIT * int(megabytes * 1e6 / len(XHTML_UNIT))
        content = f'<content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">{body}</div>'
    else:
        body = "值得精读。" + UNIT * int(megabytes * 1e6 / len(UNIT))
        content = f'<content type="html">{escape(body)}'
    return ('<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"'
            ' xml:lang="zh-CN"><title>t</title><id>tag:bench,2026:feed</id>'
            "<updated>2026-11-29T00:00:00Z</updated><entry><id>tag:bench,2026:1</id>"
            "<title>巨大</title><updated>2026-11-24T10:00:00+08:00</updated>"
            '<link rel="alternate" href="https://github.com/vllm-project/vllm/pull/1"/>'
            f"{content}</content></entry></feed>").encode()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.1,1,3,10")
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    rows = []
    for kind in ("html", "xhtml"):
        for size in (float(s) for s in ns.sizes.split(",")):
            data = feed_of(size, kind)
            runs = 1 if size >= 10 else 3
            (review,) = parse_feed(data, "bench", "vllm-project/vllm").reviews
            now = median_ms(lambda d=data: parse_feed(d, "bench", "vllm-project/vllm"), runs)
            if kind == "xhtml" and size >= 10:
                rows.append([kind, f"{len(data) / 1e6:.1f}", f"{review.shortened_from:,}",
                             f"{now:.0f}", "-", "-"])
                continue
            before = median_ms(lambda d=data: feedparser.parse(d),
                               1 if kind == "xhtml" and size >= 1 else runs)
            rows.append([kind, f"{len(data) / 1e6:.1f}", f"{review.shortened_from:,}",
                         f"{now:.0f}", f"{before:.0f}", f"{now / before:.3f}x"])
    print("One hostile review (a body of megabytes, cut at "
          f"{2 * MAX_BODY_CHARS:,} characters before feedparser reads it)\n")
    print(table(["body", "feed MB", "body chars", "parse_feed ms",
                 "feedparser alone ms (before)", "vs feedparser"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
