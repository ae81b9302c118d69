"""The sanitizer is called directly: feedparser sanitizes too, and must not hide ours."""

from __future__ import annotations

import re

import pytest

from pipeline.sanitize import clean_html, code_spans, html_to_text, plain_line, text_to_html

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


def test_allowlist_keeps_the_small_formatting_set():
    source = ("<p><em>e</em> <strong>s</strong> <code>c</code></p>"
              "<ul><li>one</li></ul><ol><li>two</li></ol><pre>p</pre><blockquote>q</blockquote>")
    assert clean_html(source) == source


def test_unknown_tags_are_dropped_but_their_text_kept():
    assert clean_html("<div><span class=x>kept</span></div>") == "kept"


def test_backticks_become_code_in_text_only():
    cleaned = clean_html('<p>see `SupportsHMA` and <a href="https://x.example/`a`">`link`</a>'
                         "</p><pre>`not code`</pre><code>`nested`</code>")
    assert "<code>SupportsHMA</code>" in cleaned
    assert '<a href="https://x.example/`a`"' in cleaned  # attribute untouched
    assert "<code>link</code>" in cleaned
    assert "<pre>`not code`</pre>" in cleaned
    assert "<code>`nested`</code>" in cleaned


def test_backtick_content_is_escaped_not_parsed():
    html = clean_html(text_to_html("compare `a < b && c > d` here"))
    assert "<code>a &lt; b &amp;&amp; c &gt; d</code>" in html


def test_unbalanced_backtick_is_left_alone():
    assert code_spans("one ` two") == "one ` two"


def test_plain_text_becomes_paragraphs():
    assert text_to_html("first\nline\n\n second ") == "<p>first<br>line</p><p>second</p>"


def test_plain_line_removes_line_breaks_and_markup():
    line = plain_line("Title\r\nBcc: victim@example.org <b>bold</b> &amp; more\x00")
    assert "\r" not in line and "\n" not in line and "\x00" not in line
    assert line == "Title Bcc: victim@example.org bold & more"


def test_html_to_text_reads_well():
    html = clean_html('<p>Use <code>x</code> and <a href="https://e.example/">docs</a>.</p>'
                      "<ul><li>a</li><li>b</li></ul><ol><li>c</li></ol>")
    assert html_to_text(html) == "Use `x` and docs (https://e.example/).\n\n- a\n- b\n1. c"
