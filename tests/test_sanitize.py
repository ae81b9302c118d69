"""The sanitizer is called directly: feedparser sanitizes too, and must not hide ours."""

from __future__ import annotations

import re

import pytest
from support.markup import nesting

from pipeline.core.issue.sanitize import (
    MAX_NESTING,
    cap_nesting,
    clean_html,
    code_spans,
    html_to_text,
    one_line,
    plain_line,
    strip_unsafe,
    text_to_html,
)

XSS = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=https://evil.example/x.js></SCRIPT>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '<a href="JaVaScRiPt:alert(1)">x</a>',
    '<a href=" javascript:alert(1)">x</a>',
    '<a href="jav&#x09;ascript:alert(1)">x</a>',
    '<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>',
    '<a href="vbscript:msgbox(1)">x</a>',
    '<iframe src="https://evil.example/"></iframe>',
    "<svg onload=alert(1)><circle/></svg>",
    "<math><mi xlink:href='javascript:alert(1)'>x</mi></math>",
    "<style>body{background:url(javascript:alert(1))}</style>",
    '<form action="https://evil.example/"><input name=p></form>',
    '<object data="https://evil.example/x.swf"></object>',
    '<p onmouseover="alert(1)" style="color:red">hover</p>',
    '<div><a href="https://ok.example/" onclick="alert(1)">ok</a></div>',
    "<!-- <script>alert(1)</script> -->",
    "<details open ontoggle=alert(1)>",
    "<base href='javascript:/'>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
]
FORBIDDEN = re.compile(
    r"<script|<iframe|<svg|<math|<style|<form|<input|<object|<img|<base|<meta|<details"
    r"|javascript:|vbscript:|data:text|\bon\w+\s*=|style=",
    re.I,
)


@pytest.mark.parametrize("attack", XSS)
def test_xss_corpus_never_survives(attack):
    cleaned = clean_html(f"<p>before</p>{attack}<p>after</p>")
    assert not FORBIDDEN.search(cleaned), cleaned
    assert "before" in cleaned and "after" in cleaned


def test_links_keep_http_targets_only_and_get_rel():
    cleaned = clean_html('<a href="https://github.com/vllm-project/vllm/pull/1">PR</a> '
                         '<a href="/relative">rel</a> <a href="mailto:a@b.example">m</a>')
    assert ('<a href="https://github.com/vllm-project/vllm/pull/1" '
            'rel="noopener noreferrer">PR</a>') in cleaned
    # Refused targets leave their text, not an empty anchor.
    assert "rel</a>" not in cleaned and "rel" in cleaned
    assert "mailto:" not in cleaned


def test_backticks_become_code_in_text_only():
    cleaned = clean_html('<p>see `SupportsHMA` and <a href="https://x.example/`a`">`link`</a>'
                         "</p><pre>`not code`</pre><code>`nested`</code>")
    assert "<code>SupportsHMA</code>" in cleaned
    assert '<a href="https://x.example/`a`"' in cleaned  # attribute untouched
    assert "<code>link</code>" in cleaned
    assert "<pre>`not code`</pre>" in cleaned
    assert "<code>`nested`</code>" in cleaned


def test_html_to_text_reads_well():
    html = clean_html('<p>Use <code>x</code> and <a href="https://e.example/">docs</a>.</p>'
                      "<ul><li>a</li><li>b</li></ul><ol><li>c</li></ol>")
    assert html_to_text(html) == "Use `x` and docs (https://e.example/).\n\n- a\n- b\n1. c"


#: (what converts, its input, its output): what each conversion keeps and what it drops.
CONVERSIONS = {
    "the small formatting set is kept": (
        clean_html, "<p><em>e</em> <strong>s</strong> <code>c</code></p><ul><li>one</li></ul>"
        "<ol><li>two</li></ol><pre>p</pre><blockquote>q</blockquote>", None),
    "unknown tags go, their text stays": (
        clean_html, "<div><span class=x>kept</span></div>", "kept"),
    "nesting within the cap is kept": (
        clean_html, "<blockquote>" * 10 + "<p><strong>x</strong></p>" + "</blockquote>" * 10,
        None),
    "an unbalanced backtick is left alone": (code_spans, "one ` two", None),
    "plain text becomes paragraphs": (
        text_to_html, "first\nline\n\n second ", "<p>first<br>line</p><p>second</p>"),
    "a line loses its breaks and markup": (
        plain_line, "Title\r\nBcc: victim@example.org <b>bold</b> &amp; more\x00",
        "Title Bcc: victim@example.org bold & more"),
    "a deep title becomes its text": (plain_line, "<b>" * 20_000 + "Title" + "</b>" * 20_000,
                                      "Title"),
    "tab and breaks stay in a body": (strip_unsafe, "a\tb\nc\r\n", None),
    "and become spaces in a line": (one_line, "a\tb\nc\u2028d\x0be\x85f", "a b c d e f"),
}


@pytest.mark.parametrize(("convert", "source", "expected"), CONVERSIONS.values(),
                         ids=CONVERSIONS.keys())
def test_a_conversion_gives_exactly(convert, source, expected):
    """``None`` expected: the input comes out unchanged."""
    assert convert(source) == (source if expected is None else expected)


# --- hostile characters and depth -------------------------------------------------

BIDI_AND_INVISIBLE = ("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c"
                      "\u200d\u200e\u200f\u061c\u2060\u2061\u2062\u2063\u2064\ufeff")


@pytest.mark.parametrize("char", list(BIDI_AND_INVISIBLE))
def test_bidi_and_invisible_characters_leave_bodies_and_titles(char):
    ref = f"&#x{ord(char):04X};"
    assert clean_html(f"<p>a{char}b{ref}c</p>") == "<p>abc</p>"
    assert plain_line(f"Fix{char} it{ref}") == "Fix it"
    assert one_line(f"Fix{char} it") == "Fix it"


@pytest.mark.parametrize("ref", ["&#1;", "&#x0B;", "&#x1F;", "&#x7F;", "&#xFFFE;", "&#xFFFF;",
                                 "&#xFDD0;", "&#x1FFFF;", "&#x10FFFE;", "&#x8D;"])
def test_control_and_noncharacter_references_are_gone_after_sanitizing(ref):
    assert clean_html(f"<p>a{ref}b</p>") == "<p>ab</p>"
    assert plain_line(f"a{ref}b") in ("ab", "a b")  # a control in a line reads as a break


@pytest.mark.parametrize("tag", ["b", "em", "blockquote", "ul", "div", "span", "table"])
def test_deep_nesting_is_capped_and_its_text_kept(tag):
    fragment = f"<p>before</p>{f'<{tag}>' * 10_000}deep text{f'</{tag}>' * 10_000}<p>after</p>"
    cleaned = clean_html(fragment)
    assert nesting(cleaned) <= MAX_NESTING
    assert "deep text" in cleaned and "before" in cleaned and "after" in cleaned


def test_unclosed_deep_nesting_is_capped():
    cleaned = clean_html("<ol><li>" * 5_000 + "x")
    assert nesting(cleaned) <= MAX_NESTING and "x" in cleaned and len(cleaned) < 1_000


def test_cap_nesting_unwraps_only_the_deepest_elements():
    assert cap_nesting("<ul><li><b>x</b></li></ul>", 2) == "<ul><li>x</li></ul>"
    assert cap_nesting("<ul><li><p>x</p><p>y</p></li></ul>", 2) == "<ul><li> x y </li></ul>"
    assert cap_nesting('<p><a title="a>b" href="https://x">x</a></p>', 1) == "<p>x</p>"


def test_a_script_beyond_the_depth_bound_goes_with_its_code():
    cleaned = clean_html("<b>" * 300 + "<SCRIPT>alert(1)</script >tail<svg><b>x</b></svg> end"
                         "<style>p{}")
    assert "alert" not in cleaned and "p{}" not in cleaned
    assert "tail" in cleaned and "end" in cleaned
    assert "tail" in clean_html("İ" * 10 + "<b>" * 300 + "<script>x</script>tail")
