"""8bit part bodies (pipeline/core/email/eightbit.py, mime.EIGHT_BIT): lines of at most 998 octets,
folded only where a line break is the same white space a space was.

The pixels of a folded email against the unfolded one are compared in Chromium in
tests/test_email_browser.py; here the fold points, the line lengths and what may never fold.
"""

from __future__ import annotations

import re

import pytest

from pipeline.core.email import mime
from pipeline.core.email.eightbit import (
    _BETWEEN_IDEOGRAPHS,
    MAX_LINE_OCTETS,
    _Places,
    eight_bit_body,
    fold_html,
)


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def fold_points(data: bytes) -> list[int]:
    """The offsets of the spaces in ``data`` (HTML) that may become a line break."""
    places = _Places(data)
    return [m.start() for m in re.finditer(rb" ", data)
            if places.allowed(m.start(), in_tag_ok=True)]


def join_points(data: bytes) -> list[int]:
    """The offsets between two ideographs of ``data``'s text where ``<wbr>`` may go."""
    places = _Places(data)
    return [m.start() for m in _BETWEEN_IDEOGRAPHS.finditer(data)
            if places.allowed(m.start(), in_tag_ok=False)]


@pytest.mark.parametrize(("html", "folds"), [
    (b'<a href="x y" title=\'a b\' class=c>one two</a>', [b' hre', b' tit', b' cla', b' two']),
    (b'<pre><code class="a" id="b">x  y</code></pre> after', [b' cla', b' id=', b' aft']),
], ids=["attributes-and-text", "tags-inside-pre"])
def test_fold_points_are_spaces_between_attributes_and_in_text(html, folds):
    """Never inside a quoted value, never right after "<"; a <pre>'s tags fold, its text not."""
    assert [html[p:p + 4] for p in fold_points(html)] == folds


@pytest.mark.parametrize("kept", [
    b"<pre>keep  these  spaces</pre>",
    b"<style>body { font-family: 'Segoe UI', sans-serif; }</style>",
    b"<script>var s = 'a b';</script>",
    b"<title>a title</title>",
    b"<!--[if mso]>not for others<![endif]-->",
    b"<textarea>as typed</textarea>",
])
def test_no_fold_point_where_white_space_is_kept_or_a_line_break_is_not_allowed(kept):
    inner = kept[kept.index(b">") + 1:kept.rindex(b"<")] if kept.startswith(b"<") else kept
    start = kept.index(inner)
    assert not [p for p in fold_points(kept) if start <= p < start + len(inner)], kept


def test_a_long_line_folds_to_lines_of_at_most_998_octets_changing_only_spaces():
    words = "".join(f'<span lang="en">word{i} 张量 并行</span> ' for i in range(400))
    data = f"<div>{words}</div>\n<p>short</p>".encode()
    folded = fold_html(data)
    assert folded is not None and len(folded) == len(data)
    assert max(len(line) for line in lines(folded)) <= MAX_LINE_OCTETS
    assert all(a == b or (a == 0x20 and b == 0x0A) for a, b in zip(data, folded, strict=True))
    assert fold_html(b"<p>short</p>\n") == b"<p>short</p>\n"  # nothing to do: as it was


def test_a_run_with_no_fold_point_or_a_nul_or_a_bare_cr_or_a_long_plain_line_is_not_8bit():
    paragraph = "<p>" + "x" * 1200 + "</p>"  # 1,207 octets: no space, no ideograph
    assert fold_html(paragraph.encode()) is None
    assert eight_bit_body(paragraph, html=True) is None
    # The part then goes as it did: quoted-printable or base64, whichever is smaller.
    assert mime.choose_encoding(paragraph, eight_bit=True, html=True) != mime.EIGHT_BIT
    in_pre = "<pre>" + "张量" * 300 + "</pre>"  # white space kept: not even a <wbr> there
    assert fold_html(in_pre.encode()) is None
    assert eight_bit_body("a\x00b", html=True) is None
    assert eight_bit_body("a\rb", html=False) is None
    assert eight_bit_body("x " * 600, html=False) is None  # a plain-text line is its content
    assert eight_bit_body("ab\r\ncd", html=False) == b"ab\r\ncd\r\n"


def test_a_chinese_paragraph_without_spaces_is_cut_between_ideographs_by_a_wbr():
    text = "值得精读，" + "调度器先预留块再决定抢占" * 40 + "。"  # 1,470 octets, no space
    data = f"<p>{text}</p>".encode()
    folded = fold_html(data)
    assert folded is not None and max(len(line) for line in lines(folded)) <= MAX_LINE_OCTETS
    assert folded.count(b"<wbr\n>") >= 1
    assert folded.replace(b"<wbr\n>", b"") == data  # nothing else changed
    for cut in re.finditer(rb"<wbr\n>", folded):  # always between two ideographs
        before = folded[:cut.start()].decode()[-1]
        after = folded[cut.end():].decode()[0]
        assert "\u4e00" <= before <= "\u9fff" and "\u4e00" <= after <= "\u9fff"
    assert join_points("，。".encode() + "张量".encode()) == [len("，。".encode()) + 3]


def test_an_8bit_part_folds_with_room_for_links_of_the_reserved_length():
    from pipeline.core.email.message import _Part
    from pipeline.core.email.render import LINK_RESERVE

    line = '<p><a href="%%unsubscribe_url%%">x</a> ' + "y " * 450 + "</p>"  # ~940 octets
    assert fold_html(line.encode()) == line.encode()  # it fits as it is
    part = _Part.of("b", "text/html", line, eight_bit=True)
    assert part.encoding == mime.EIGHT_BIT
    filled = part.encode(["h" * LINK_RESERVE, "p"])
    assert max(len(line) for line in filled.split(b"\r\n")) <= MAX_LINE_OCTETS
    assert b'href="' + b"h" * LINK_RESERVE + b'"' in filled


def test_eight_bit_is_chosen_only_when_asked_and_smaller():
    chinese = "<p>" + "张量并行 " * 300 + "</p>"
    assert mime.choose_encoding(chinese, html=True) == mime.BASE64  # not asked: as before
    assert mime.choose_encoding(chinese, eight_bit=True, html=True) == mime.EIGHT_BIT
    size = mime.sent_size(chinese, eight_bit=True, html=True)
    assert size == len(mime.encode_body(chinese, mime.EIGHT_BIT, html=True))
    assert size < mime.sent_size(chinese, html=True) / 1.3
    english = "<p>" + "plain words " * 50 + "</p>"  # ASCII: quoted-printable is as small
    assert mime.choose_encoding(english, eight_bit=True, html=True) in (
        mime.QUOTED_PRINTABLE, mime.EIGHT_BIT)
    with pytest.raises(ValueError, match="8bit"):
        mime.encode_body("<p>" + "x" * 1200 + "</p>", mime.EIGHT_BIT, html=True)


def _cuts(data: bytes, folded: bytes) -> tuple[set[int], set[int]]:
    """Where ``folded`` differs from ``data``: spaces made line breaks, <wbr> put in."""
    spaces, joins = set(), set()
    i = j = 0
    while i < len(data):
        if folded.startswith(b"<wbr\n>", j) and not data.startswith(b"<wbr\n>", i):
            joins.add(i)
            j += len(b"<wbr\n>")
            continue
        if data[i] != folded[j]:
            assert (data[i], folded[j]) == (0x20, 0x0A), i
            spaces.add(i)
        i, j = i + 1, j + 1
    return spaces, joins


@pytest.mark.parametrize("doc", [
    # Every kind of place at once, long enough to need many folds.
    ('<html><head><title>a title that is long ' + "x " * 200 + '</title>'
     '<style>body { font-family: "Segoe UI", x; }\n' + ".a { b: c }\n" * 200 + '</style>'
     '</head><body><!--[if mso]><table class="a b" style="x: y">' + "q " * 300
     + '<![endif]-->'
     '<pre class="code" id="p">' + "keep  me " * 50 + '</pre>'
     + '<p lang="zh-CN">' + "调度器预留块，抢占 " * 120 + '<a href="x y" title=\'a b\'>链接</a>'
     + "张量并行" * 200 + '</p></body></html>'),
    "<div>" + "".join(f'<span class="c{i}" data-x="{i} {i}">w{i}</span>' for i in range(900))
    + "</div>",
])
def test_the_folds_are_only_where_the_rules_allow_them(doc):
    data = doc.encode()
    folded = fold_html(data)
    assert folded is not None
    assert max(len(line) for line in lines(folded)) <= MAX_LINE_OCTETS
    spaces, joins = _cuts(data, folded)
    assert spaces and spaces <= set(fold_points(data))
    assert joins <= set(join_points(data))


@pytest.mark.parametrize("footer", ["", 'publisher = "Example Labs for the vLLM community"\n'
                                    'postal_address = "1 Example Road, Springfield 12345"\n'])
def test_a_part_that_folds_with_its_links_folds_with_room_made_for_them(tmp_path, footer):
    """The budget (links at reserved length) and the message (room made) agree on 8bit."""
    from support.project import SAMPLE_WEEK, sample_settings

    from pipeline.core.email.message import _Part
    from pipeline.core.email.render import with_reserved_links
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    settings = sample_settings(tmp_path, extra=f"[delivery]\n{footer}")
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "i").out_dir)
    for key in built.keys:
        for body, kind in ((built.html(key), "text/html"), (built.text(key), "text/plain")):
            reserved = eight_bit_body(with_reserved_links(body), html=kind == "text/html")
            assert reserved is not None, key  # the sample goes 8bit in every layout
            assert _Part.of("b", kind, body, eight_bit=True).folded is not None, key
