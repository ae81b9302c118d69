"""The rendered email, checked structurally: languages, preheader, links, size budget, and the
markup a card needs inline (Outlook and clients that strip ``<style>``)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import jinja2
import pytest
from markupsafe import escape
from support.feeds import Entry, atom
from support.project import assembled, sample_settings

from pipeline.config import load
from pipeline.core.assemble import assemble
from pipeline.core.email.render import (
    HARD_LIMIT_BYTES,
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Budget,
    Footer,
    Renderer,
    _Plan,
    compact_css,
    counted,
    environment,
    minutes,
    stray_placeholders,
    strings,
)
from pipeline.core.issue.bilingual import SUBJECT_MAX, preheader, subject
from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.interests import Variant
from pipeline.core.shipped import templates_dir
from pipeline.errors import RenderError
from pipeline.model import LANG_TAGS, LAYOUTS, Item, Pair, Text, layout_langs
from pipeline.stages.build import rank_week, terms
from pipeline.week import parse_week

WEEK = parse_week("2026-W48", "Asia/Shanghai")


class Page(HTMLParser):
    """Collects what the checks need from an HTML document."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, Any]]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict[str, Any]]:
        return [attrs for name, attrs in self.tags if name == tag]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    settings = load(None, {}, cwd=tmp_path_factory.mktemp("cfg"))
    return settings, *assembled(settings)


def test_every_layout_has_html_and_text(sample):
    *_, artifacts, _ = sample
    assert sorted(artifacts) == sorted(f"email-{layout}.{ext}" for layout in LAYOUTS
                                       for ext in ("html", "txt"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_template_or_mjml_syntax_is_left(sample, layout):
    *_, rendered = sample
    html, text = rendered[layout].html, rendered[layout].text
    for leftover in ("{{", "}}", "{%", "<mj-", "</mj-"):
        assert leftover not in html
        assert leftover not in text


@pytest.mark.parametrize(("layout", "langs"), [("zh-en", ["zh-CN", "en"]),
                                               ("en-zh", ["en", "zh-CN"]),
                                               ("zh", ["zh-CN"]), ("en", ["en"])])
def test_language_blocks_carry_lang_in_layout_order(sample, layout, langs):
    """The page's language is the layout's first; each card's blocks, in the layout's order, are
    checked in test_a_card_reads_without_the_style_block; a one-language layout has no other."""
    *_, rendered = sample
    page = Page(rendered[layout].html)
    assert page.all("html")[0]["lang"] == langs[0]
    if len(langs) == 1:
        other = "en" if langs[0] == "zh-CN" else "zh-CN"
        assert other not in [a["lang"] for a in page.all("div") if "lang" in a]


def test_text_in_each_language_block_is_that_language(sample):
    _, issue, *_, rendered = sample
    html = rendered["zh-en"].html
    for item in issue.items:
        assert item.zh.title in html and item.en.title.replace("'", "&#39;") in html
    assert issue.items[0].zh.title not in rendered["en"].html
    assert issue.items[0].en.title not in rendered["zh"].html


@pytest.mark.parametrize("layout", LAYOUTS)
def test_preheader_title_and_alt(sample, layout):
    _, issue, *_, rendered = sample
    html = rendered[layout].html
    preheader = issue.preheader[layout]
    hidden = re.search(r'<div class="preheader" style="([^"]*)">(.*?)</div>', html, re.S)
    assert hidden and hidden.group(2).strip() == preheader
    # Hidden by display and size, never by colour: SpamAssassin's HTML_FONT_LOW_CONTRAST
    # scores text whose colour is close to the background's (mj-preview's white text).
    style = hidden.group(1)
    assert "display:none" in style and "color" not in style and "opacity" not in style
    assert "font-size" not in style
    assert f"<title>{issue.subject[layout]}</title>" in html
    page = Page(html)
    assert all(img.get("alt") for img in page.all("img"))


def test_no_web_fonts_and_a_cjk_font_stack(sample):
    *_, rendered = sample
    html = rendered["zh-en"].html
    assert "fonts.googleapis" not in html and "@import" not in html and "@font-face" not in html
    assert "PingFang SC" in html and "Microsoft YaHei" in html


def test_footer_links_and_placeholders(sample):
    settings, issue, *_, rendered = sample
    for layout in LAYOUTS:
        html, text = rendered[layout].html, rendered[layout].text
        assert f'href="{UNSUBSCRIBE_PLACEHOLDER}"' in html
        assert f'href="{PREFERENCES_PLACEHOLDER}"' in html
        assert UNSUBSCRIBE_PLACEHOLDER in text and PREFERENCES_PLACEHOLDER in text
        assert f'href="{issue.archive_url}"' in html
        assert issue.archive_url in text
    assert issue.archive_url == f"{settings.site.base_url}/issues/2026-W48/index.html"


def test_every_link_is_http_a_placeholder_or_a_card_of_the_message(sample):
    *_, rendered = sample
    for layout in LAYOUTS:
        page = Page(rendered[layout].html)
        ids = {attrs["id"] for _, attrs in page.tags if "id" in attrs}
        for a in page.all("a"):
            href = a.get("href", "")
            if href.startswith("#"):
                assert re.fullmatch(r"#pr-\d+", href) and href[1:] in ids, href
                continue
            assert href.startswith(("https://", "http://")) or href in (
                UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER), href


def test_sample_fits_the_budget_without_shrinking(sample):
    _, issue, *_, rendered = sample
    for layout in LAYOUTS:
        assert rendered[layout].html_bytes <= 90_000
        assert rendered[layout].brief == () and rendered[layout].folded == 0
    assert not [p for p in issue.problems if p.code == "items-shrunk"]


def test_text_part_carries_every_item_and_code_as_backticks(sample):
    _, issue, *_, rendered = sample
    text = rendered["zh-en"].text
    flat = "".join(text.split())  # the part is wrapped at 78 columns
    for item in issue.items:
        assert item.url in text.split("\n")  # a link stands whole on its own line
        assert "".join(item.zh.title.split()) in flat
        assert "".join(item.en.title.split()) in flat
    assert "`SupportsHMA`" in text
    assert "<code>" not in text and "&amp;" not in text


# -- the markup budget, and what stays inline for clients that strip <style> ------------------

#: The budget per full bilingual item: HTML bytes, and markup against the text.
MAX_ITEM_BYTES = 3_500
MAX_MARKUP_RATIO = 0.6
_CARD = re.compile(r'<table class="card"[^>]*>(.*?)</td></tr></table>', re.S)


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


@pytest.mark.parametrize("layout", ["zh-en", "en-zh"])
def test_a_full_bilingual_item_stays_within_its_bytes(sample, layout):
    settings, issue, *_ = sample
    renderer, base, footer = Renderer(), settings.site.base_url.rstrip("/"), Footer()
    variant, n = Variant(layout), len(issue.items)

    def parts(plan: _Plan) -> tuple[str, str]:
        return renderer._parts(issue, variant, base, plan, footer)

    (html, text), (html0, text0) = parts(_Plan(issue.items, (), 0)), parts(_Plan((), (), 0))
    html_item, text_item = (utf8(html) - utf8(html0)) / n, (utf8(text) - utf8(text0)) / n
    assert html_item <= MAX_ITEM_BYTES, html_item
    assert (html_item - text_item) / text_item <= MAX_MARKUP_RATIO, (html_item, text_item)


def test_the_cards_share_one_text_block_whatever_their_number(sample):
    settings, issue, *_ = sample
    renderer, base = Renderer(), settings.site.base_url.rstrip("/")
    sizes = {}
    for k in (1, len(issue.items)):
        html, _ = renderer._parts(issue, Variant("zh-en"), base,
                                  _Plan(issue.items[:k], issue.items[k:], 0), Footer())
        # mjml writes the font stack inline once per mj-text and tables per mj-section.
        sizes[k] = (html.count("font-family:-apple-system"), html.count("mj-column-per-100"))
    assert sizes[1] == sizes[len(issue.items)], sizes


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_card_reads_without_the_style_block(sample, layout):
    _, issue, *_, rendered = sample
    html = rendered[layout].html
    body = re.sub(r"<style\b.*?</style>", "", html, flags=re.S)
    cards = _CARD.findall(body)
    assert len(cards) == len(issue.items)
    for table in re.findall(r'<table class="card"[^>]*>', body):
        assert 'bgcolor="#ffffff"' in table and 'role="presentation"' in table
    # Its text colour comes from the one wrapper every card sits in, inline.
    wrapper = body[: body.index('<table class="card"')].rsplit("<div style=", 1)[1]
    assert "color:#1f2328" in wrapper.split(">", 1)[0]
    langs = layout_langs(layout)
    for card in cards:
        assert card.startswith('<tr><td style="padding:20px 28px 10px">')
        assert re.search(r'<h2><a href="[^"]+" style="color:#0b62d6">', card)
        # Each language of the layout in its own block, tagged for screen readers and fonts.
        tags = re.findall(r'<div lang="([^"]+)"', card)
        assert tags == [LANG_TAGS[lang] for lang in langs]
    # Outlook (which ignores a table's margin) keeps a gap after every card, styled once.
    assert body.count('<!--[if mso]><p class="gap">&nbsp;</p><![endif]-->') == len(issue.items)
    assert ".gap{margin:0;font-size:12px;line-height:12px}" in html
    # The PR number is text: the headline is the card's one link to the PR.
    for card in cards:
        assert len(re.findall(r'href="https://github\.com/[^"]+/pull/\d+"', card)) == \
            len(tags := re.findall(r'<div lang="([^"]+)"', card)) and tags


#: The layouts that carry the Chinese reviews of :func:`big_feed` (Chinese only).
CHINESE_LAYOUTS = ("zh-en", "en-zh", "zh")


def big_feed(count: int, paragraphs: int = 6) -> bytes:
    body = "值得精读，" + "这是一段很长的评审文字，包含 `code_span` 与细节。" * 20
    entries = []
    for i in range(count):
        verdict = ("值得精读", "值得中等优先级精读", "值得一读")[i % 3]
        entries.append(Entry(
            pr=1000 + i, title=f"第 {i} 个 PR 的标题：很长很长的一段中文标题",
            body="\n\n".join([body.replace("值得精读", verdict, 1)] * paragraphs),
            published=f"2026-11-{23 + i % 7}T{10 + i % 10}:{i % 60:02d}:00+08:00",
        ))
    return atom(entries)


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    settings = sample_settings(tmp_path_factory.mktemp("forty"))
    return settings, *assembled(settings, big_feed(40))


def test_over_budget_shrinks_lowest_priority_first(forty):
    _, issue, data, _artifacts, rendered = forty
    order = [item.pr for item in issue.items]
    # The feed is Chinese only: the English layout's cards carry a one-line "no English
    # review" note each, and forty of those fit in full.
    assert rendered["en"].brief == () and rendered["en"].html_bytes <= 90_000
    for layout in CHINESE_LAYOUTS:
        r = rendered[layout]
        assert r.html_bytes <= 90_000
        assert r.brief, "something had to shrink"
        # The shortened ones are exactly the tail of the ranking.
        assert list(r.brief) == order[len(order) - len(r.brief):]
        assert r.folded == 0
    shrunk = [p for p in data["problems"] if p["code"] == "items-shrunk"]
    assert {p["layout"] for p in shrunk} == set(CHINESE_LAYOUTS)
    assert all(p["severity"] == "warning" for p in shrunk)


def test_a_list_too_long_folds_its_tail_into_one_archive_link(settings):
    small = replace(settings, issue=replace(settings.issue, size_budget_kb=30))
    issue, _data, _, rendered = assembled(small, big_feed(150, paragraphs=1))
    for layout in LAYOUTS:
        r = rendered[layout]
        assert r.html_bytes <= 30_000
        assert r.folded > 0
        assert len(r.brief) + r.folded == len(issue.items)
    assert "more reviews in the archive" in rendered["en"].html
    assert "篇评审见网页存档" in rendered["zh"].html


def test_budget_never_exceeds_the_hard_limit():
    assert Budget(90).bytes == 90_000
    assert Budget(120).bytes == HARD_LIMIT_BYTES == 100_000


@pytest.mark.parametrize(("template", "message"), [
    ("<mjml>{{ no_such_name }}</mjml>", "no_such_name"),
    ("<mjml><mj-body><mj-text>", "MJML does not compile"),
], ids=["template-error", "mjml-error"])
def test_a_broken_template_is_one_clear_render_error(tmp_path, sample, template, message):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.mjml.j2").write_text(template)
    with pytest.raises(RenderError, match=message):
        Renderer(environment([tmp_path])).render(issue, "https://x.example", Budget(90))


def test_a_missing_template_names_every_folder_searched(tmp_path, sample):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.txt.j2").write_text('{% include "email/no-such.txt.j2" %}')
    with pytest.raises(RenderError) as raised:
        Renderer(environment([tmp_path])).render(issue, "https://x.example", Budget(90))
    assert str(raised.value).endswith(
        f"template email/no-such.txt.j2 not found in {tmp_path}, {templates_dir()}")


def test_operator_templates_override_the_built_in_ones(tmp_path, sample):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.txt.j2").write_text("custom {{ archive_url }}")
    rendered, _ = Renderer(environment([tmp_path])).render(issue, "https://x.example", Budget(90))
    assert rendered["en"].text == f"custom {issue.archive_url}"


def test_environments_share_compiled_templates_and_an_edit_is_compiled_afresh(tmp_path,
                                                                             monkeypatch):
    """Compiled once per process, yet a template edited since (``--watch``) is not served stale."""
    compiled: list[str | None] = []
    compile_source = jinja2.Environment.compile

    def counting(self, source, name=None, filename=None, *args, **kwargs):
        compiled.append(name)
        return compile_source(self, source, name, filename, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    environment().get_template("email/issue.txt.j2")  # compiled here or by an earlier test
    compiled.clear()
    again = environment().get_template("email/issue.txt.j2")
    assert compiled == [] and again.name == "email/issue.txt.j2"  # nothing compiled again

    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "note.txt.j2").write_text("first {{ n }}")
    assert environment([tmp_path]).get_template("mail/note.txt.j2").render(n=1) == "first 1"
    (mail / "note.txt.j2").write_text("second {{ n }}")
    assert environment([tmp_path]).get_template("mail/note.txt.j2").render(n=2) == "second 2"
    assert compiled == ["mail/note.txt.j2", "mail/note.txt.j2"]


# -- contents first, "for you", the issue number ---------------------------------


class Contents(HTMLParser):
    """The contents list of a rendered email: each entry's link, text and marks, and the
    ``start`` of each numbered list."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.entries: list[dict[str, Any]] = []
        self.starts: list[int] = []
        self._depth = 0  # inside an <ol>
        self._li: dict[str, Any] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "ol":
            self._depth += 1
            self.starts.append(int(attrs.get("start", 1)))
        elif tag == "li" and self._depth:
            self._li = {"href": None, "text": "", "foryou": False}
            self.entries.append(self._li)
        elif self._li is not None:
            if tag == "a" and self._li["href"] is None:
                self._li["href"] = attrs.get("href")
            if "foryou" in (attrs.get("class") or ""):
                self._li["foryou"] = True

    def handle_endtag(self, tag):
        if tag == "ol":
            self._depth -= 1
        elif tag == "li":
            self._li = None

    def handle_data(self, data):
        if self._li is not None:
            self._li["text"] += data


def card_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<div id="pr-(\d+)"', html)]


def card_of(html: str, pr: int) -> str:
    """The markup of one card: from its anchor to the next card's."""
    rest = html.split(f'id="pr-{pr}"', 1)[1]
    return re.split(r'id="pr-\d+"', rest, maxsplit=1)[0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_contents_list_every_item_linked_to_its_card(sample, layout):
    _, issue, *_, rendered = sample
    html = rendered[layout].html
    contents = Contents(html)
    cards = card_ids(html)
    assert sorted(cards) == sorted(item.pr for item in issue.items)
    # One entry per item, in the cards' order, each a link to the card's anchor.
    assert [e["href"] for e in contents.entries] == [f"#pr-{pr}" for pr in cards]
    # Numbered through across the tiers: 1 for the first list, then where it left off.
    assert contents.starts[0] == 1 and len(contents.starts) == 2  # must-read, medium
    # The contents come before the first card, after the intro.
    assert html.index("<ol") < html.index('id="pr-') and \
        html.index(issue.preheader[layout.split("-")[0]]) < html.index("<ol")
    by_pr = {item.pr: item for item in issue.items}
    for entry, pr in zip(contents.entries, cards, strict=True):
        item = by_pr[pr]
        text = " ".join(entry["text"].split())
        for lang in layout.split("-"):
            assert " ".join(item.text(lang).title.split()) in text
        assert " · ".join(item.areas) in text
        assert not entry["foryou"]
    for lang in layout.split("-"):
        assert {"zh": "本期目录", "en": "In this issue"}[lang] in html


def test_a_contents_anchor_is_the_first_element_of_its_card(sample):
    *_, rendered = sample
    html = rendered["zh-en"].html
    for pr in card_ids(html):
        before = html[: html.index(f'id="pr-{pr}"')]
        # The last section opened before the anchor is a card: the anchor sits on it.
        assert before.rindex('class="card"') > before.rindex('class="head"')


def test_cards_carry_no_tier_pill_and_their_title_is_a_link(sample):
    _, issue, *_, rendered = sample
    for layout in LAYOUTS:
        html = rendered[layout].html
        assert 'class="pill' not in html  # every card sits under its tier's heading
        for item in issue.items:
            card = card_of(html, item.pr)
            headline = re.search(r'<h2[^>]*><a href="([^"]+)" style="color:#0b62d6"', card)
            assert headline and headline.group(1) == item.url


def test_shortened_items_are_listed_once_in_the_contents_marked_and_linked_to_pr_pages(forty):
    settings, issue, _data, _artifacts, rendered = forty
    base = settings.site.base_url.rstrip("/")
    for layout in CHINESE_LAYOUTS:  # the feed is Chinese only: "en" fits in full
        r = rendered[layout]
        # A long week: the contents lists its tiers, each leading to its cards; the titles
        # shortened to fit (the tail of test_over_budget_shrinks_lowest_priority_first) are
        # listed once, after the cards, each linking to its PR page, not carrying its body.
        hrefs = [e["href"] for e in Contents(r.html).entries]
        assert sorted(hrefs) == sorted(f"{base}/pr/{pr}/index.html" for pr in r.brief)
        full = set(card_ids(r.html))
        assert full == {item.pr for item in issue.items} - set(r.brief)
        for tier in {item.tier for item in issue.items if item.pr in full}:
            assert f'href="#tier-{tier}"' in r.html and f'id="tier-{tier}"' in r.html
        assert r.html.index('id="more"') > r.html.rindex('class="card"')
        # Each shortened entry is marked, and the list says once what the mark means.
        assert r.html.count(" ↗</div>") == len(r.brief)
        assert "只列出标题" in r.html and 'class="card brief"' not in r.html
        for item in issue.items:
            if item.pr in r.brief and item.zh:
                assert r.html.count(str(escape(item.zh.title))) == 1, item.pr


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_text_part_opens_with_a_numbered_contents_list_of_pr_pages(sample, layout):
    settings, issue, *_, rendered = sample
    text = rendered[layout].text
    head = text.split(issue.items[0].url, 1)[0]  # everything before the first review
    lines = head.split("\n")
    base = settings.site.base_url.rstrip("/")
    numbered = [line for line in lines if re.match(r"\d+\. ", line)]
    assert [int(line.split(".")[0]) for line in numbered] == list(range(1, len(issue.items) + 1))
    pages = [line.strip() for line in lines if "/pr/" in line]
    assert sorted(pages) == sorted(f"{base}/pr/{item.pr}/index.html" for item in issue.items)


def with_areas(issue, areas):
    """``issue`` with every item carrying ``areas`` after its own first area."""
    return replace(issue, items=tuple(replace(item, areas=(*item.areas[:1], *areas))
                                      for item in issue.items))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_for_you_marks_only_the_items_of_the_readers_areas(sample, layout):
    _, issue, *_ = sample
    rocm = {item.pr for item in issue.items if "rocm" in item.areas}
    assert 0 < len(rocm) < len(issue.items)
    r, problem = Renderer().render_variant(issue, Variant(layout, ("rocm",)),
                                           "https://x.example", Budget(90))
    assert problem is None and r.areas == ("rocm",)
    contents = Contents(r.html)
    marked = [int(e["href"][4:]) for e in contents.entries if e["foryou"]]
    assert set(marked) == rocm
    for pr in card_ids(r.html):
        assert ('class="foryou"' in card_of(r.html, pr).split("</div>", 1)[0]) == (pr in rocm)
    langs = {"zh": "zh-CN", "en": "en"}
    words = {"zh": "你关注的", "en": "for you"}
    found = re.search(r'<span class="foryou"[^>]*>(.*?)</span></span>', r.html)
    assert found is not None
    mark = found.group(1)
    for lang in layout.split("-"):
        assert f'<span lang="{langs[lang]}">{words[lang]}' in mark
    # The contents open with the reader's areas, in each of the layout's languages.
    opening = r.html.split("<ol", 1)[0].rsplit("</h2>", 1)[1]
    assert "rocm" in opening
    for lang in layout.split("-"):
        line = strings()[lang]["areas_first"].format(areas="rocm")
        assert line in opening and line in r.text.split("\n1. ", 1)[0]
    assert r.text.count("[" + " / ".join(words[lang] for lang in layout.split("-"))
                        + "]") == 2 * len(rocm)


def test_items_of_the_readers_areas_come_first_in_the_contents_too(sample):
    _, issue, *_ = sample
    r, _ = Renderer().render_variant(issue, Variant("en", ("nixl",)), "https://x.example",
                                     Budget(90))
    entries = Contents(r.html).entries
    nixl = next(item.pr for item in issue.items if "nixl" in item.areas)
    assert entries[0]["href"] == f"#pr-{nixl}" and entries[0]["foryou"]
    assert card_ids(r.html)[0] == nixl


def test_render_gives_every_layout_then_the_variants_asked_for_by_key(sample):
    _, issue, *_ = sample
    renderer = Renderer()
    rocm = Variant("en", ("rocm",))
    rendered, problems = renderer.render(issue, "https://x.example", Budget(90),
                                         variants=[rocm])
    assert list(rendered) == [*LAYOUTS, rocm.key] and problems == []
    alone, _ = renderer.render_variant(issue, rocm, "https://x.example", Budget(90))
    assert rendered[rocm.key] == alone


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_interests_renders_the_plain_layout_byte_for_byte(sample, layout):
    _, issue, *_ = sample
    renderer = Renderer()
    plain, _ = renderer.render(issue, "https://x.example", Budget(90))
    r, problem = renderer.render_variant(issue, Variant(layout), "https://x.example", Budget(90))
    assert problem is None
    assert (r.html, r.text) == (plain[layout].html, plain[layout].text)
    assert "foryou" not in r.html and "for you" not in r.text and "你关注的" not in r.text


HOSTILE_AREAS = ("<script>alert(1)</script>", "%%unsubscribe_url%%", "../x", "a&b",
                 "\"quoted\" 'area'", "x" * 500)


def test_hostile_area_names_reach_the_email_escaped(sample):
    _, issue, *_ = sample
    hostile = with_areas(issue, HOSTILE_AREAS)
    for layout in LAYOUTS:
        r, problem = Renderer().render_variant(hostile, Variant(layout, HOSTILE_AREAS),
                                               "https://x.example", Budget(90))
        assert problem is None or problem.code == "items-shrunk"
        assert "<script>" not in r.html and "&lt;script&gt;alert(1)&lt;/script&gt;" in r.html
        assert "a&b" not in r.html and "a&amp;b" in r.html
        assert stray_placeholders(r.html, "html") == 0
        assert stray_placeholders(r.text, "txt") == 0
        assert "<script>alert(1)</script>" in r.text  # plain text: shown, not interpreted
        # Every item is for this reader: each card and each entry is marked.
        assert len(Contents(r.html).entries) == len(issue.items)
        assert all(e["foryou"] for e in Contents(r.html).entries)


def test_the_issue_number_leads_the_masthead_in_both_parts(sample):
    _, issue, *_ = sample
    numbered = replace(issue, number=3)
    rendered, _ = Renderer().render(numbered, "https://x.example", Budget(90))
    for layout in LAYOUTS:
        head = rendered[layout].html.split("<ol", 1)[0]
        text_head = rendered[layout].text.split("==", 1)[0]
        for lang in layout.split("-"):
            label = {"zh": "第 3 期 · 2026 年第 48 周", "en": "No. 3 · Week 48, 2026"}[lang]
            assert label in head and label in text_head
    plain, _ = Renderer().render(issue, "https://x.example", Budget(90))  # number 0: none shown
    for layout in LAYOUTS:
        assert "No. " not in plain[layout].html and " 期 · " not in plain[layout].html
        assert "No. " not in plain[layout].text and " 期 · " not in plain[layout].text


@pytest.mark.slow  # eighty long items fitted into each layout's budget
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_variant_of_eighty_long_items_keeps_the_budget(settings, layout):
    issue, *_ = assembled(settings, big_feed(80))
    areas = ("<script>x</script>", "y" * 60)
    issue = with_areas(issue, areas)
    r, problem = Renderer().render_variant(issue, Variant(layout, areas),
                                           settings.site.base_url, Budget(90))

    # The feed is Chinese only: "en" (titles and a line saying the review is missing) fits.
    assert (problem is not None and problem.code == "items-shrunk") or layout == "en"
    assert max(Budget(90).weigh(r.html), Budget(90).weigh(r.text)) <= 90_000
    assert len(Contents(r.html).entries) == len(r.brief)  # a long week lists its tiers


def retitled(item, zh: str, en: str):
    return replace(item, zh=Text(zh, "<p>x</p>", "x", "feed"), en=Text(en, "<p>x</p>", "x", "feed"))


@pytest.mark.parametrize(("layout", "week", "count", "number", "expected"), [
    ("en", "2026-W48", 8, (), "vLLM PR Weekly · 23–29 Nov · Short title + 7 more"),
    ("zh-en", "2026-W48", 8, (0,), "vLLM PR 周报 · 11 月 23–29 日 · 短标题 等 8 篇"),
    ("en-zh", "2026-W48", 8, (3,), "vLLM PR Weekly · No. 3 · 23–29 Nov · Short title + 7 more"),
    ("zh", "2026-W48", 8, (3,), "vLLM PR 周报 · 第 3 期 · 11 月 23–29 日 · 短标题 等 8 篇"),
    ("en", "2026-W48", 1, (12,), "vLLM PR Weekly · No. 12 · 23–29 Nov · Short title"),
    ("en", "2026-W53", 1, (6,), "vLLM PR Weekly · No. 6 · 28 Dec – 3 Jan · Short title"),
    ("zh", "2026-W53", 1, (6,), "vLLM PR 周报 · 第 6 期 · 12 月 28 日 – 1 月 3 日 · 短标题"),
], ids=["en-unnumbered", "zh-en-number-0", "en-zh", "zh", "one-item", "en-across-years",
        "zh-across-years"])
def test_the_subject_names_its_week_by_its_days_in_every_language(sample, layout, week, count,
                                                                   number, expected):
    _, issue, *_ = sample
    items = [retitled(issue.items[0], "短标题", "Short title"), *issue.items[1:]]
    assert subject(layout, parse_week(week, "Asia/Shanghai"), items[:count], *number) == expected


@pytest.mark.parametrize("number", [0, 3, 52, 1000])
def test_a_long_headline_is_cut_but_the_week_stays(sample, number):
    """The subject keeps its week; the count of other reviews goes before the headline is cut."""
    _, issue, *_ = sample
    long_en = "MoRI-IO connector supports SWA and HMA, multiplying disaggregated throughput"
    long_zh = "MoRI-IO 连接器支持 SWA 与 HMA，分离式预填充与解码吞吐数倍提升，附带完整回归测试"
    items = [retitled(issue.items[0], long_zh, long_en), *issue.items[1:]]
    for layout in LAYOUTS:
        line = subject(layout, WEEK, items, number)
        assert len(line) <= SUBJECT_MAX, line
        zh = layout.startswith("zh")
        parts = line.split(" · ")
        assert parts[0] == ("vLLM PR 周报" if zh else "vLLM PR Weekly")
        if number:
            assert parts.pop(1) == (f"第 {number} 期" if zh else f"No. {number}")
        assert parts[1] == ("11 月 23–29 日" if zh else "23–29 Nov")
        headline = " · ".join(parts[2:])
        assert (long_zh if zh else long_en).startswith(headline.split("…")[0])
        assert headline.endswith("…") and "more" not in headline and "等" not in headline


def test_compact_css_drops_white_space_but_keeps_rules_lines_and_no_double_brace():
    css = """
      a { color: #0b62d6; }
      @media (max-width: 480px) { .brand { display: block; } }
      body, .page, .page > table { background: #0d1117 !important; }
      .card h2 a { margin: 0 0 4px 0; }
    """
    assert compact_css(css).split("\n") == [
        "a{color:#0b62d6}",
        "@media (max-width:480px){.brand{display:block} }",
        "body,.page,.page>table{background:#0d1117 !important}",
        ".card h2 a{margin:0 0 4px 0}",
    ]


def test_a_reviewers_markdown_renders_and_never_shows_its_marks(settings):
    """HTML shows code and strong text, the plain part keeps backticks, no star is left anywhere."""
    feed = atom([Entry(pr=7, title="**Fix** a leak in `block_pool.py`",
                       body="值得精读，**重点**看 `block_pool.py` 与 `a**b`。")])
    ranked = rank_week(settings, WEEK, [parse_feed(feed, "t", settings.feed.repo)])
    (item,) = ranked.items
    assert item.zh is not None and item.zh.title == "Fix a leak in `block_pool.py`"
    _, _, artifacts, _ = assemble(terms(settings), WEEK, ranked)
    html = artifacts["email-zh.html"].decode()
    assert "Fix a leak in <code>block_pool.py</code></a></h2>" in html
    assert "<strong>重点</strong>" in html and "<code>a**b</code>" in html
    assert "**重点**" not in html and "**Fix**" not in html
    text = artifacts["email-zh.txt"].decode()
    assert "Fix a leak in `block_pool.py`" in text and "**" not in text.replace("a**b", "")


@pytest.mark.parametrize(("full", "left"), [(7, 1), (5, 3)])
def test_the_reviews_left_to_the_archive_are_counted_in_good_english(sample, full, left):
    """One review left is singular in both parts; Chinese says the same words for any count."""
    _, issue, *_ = sample
    plan = _Plan(issue.items[:full], issue.items[full:], 0)
    for layout in ("en", "zh-en"):
        renderer, variant = Renderer(), Variant(layout)
        html, text = renderer._parts(issue, variant, "https://x.example", plan, Footer())
        english = ("1 more review in the archive" if left == 1
                   else f"{left} more reviews in the archive")
        assert english in html and english in text
        if layout == "zh-en":
            assert f"另有 {left} 篇评审见网页存档" in html


def test_counted_takes_the_singular_only_for_one():
    assert counted(strings()["en"], "area_reviews", 1) == "1 review"
    assert counted(strings()["en"], "area_reviews", 0) == "0 reviews"
    assert counted(strings()["en"], "area_reviews", 21) == "21 reviews"
    assert counted(strings()["zh"], "area_reviews", 1) == "1 篇评审"


def test_a_one_review_week_says_review_in_its_preheader(sample):
    _, issue, *_ = sample
    assert preheader("en", issue.items[:1]).startswith("1 PR review this week: 1 ")
    assert preheader("en", issue.items[:2]).startswith("2 PR reviews this week: ")


def test_an_item_without_the_language_is_timed_in_the_one_it_is_shown_in():
    item = Item(pr=1, url="https://github.com/o/r/pull/1", tier="skim", scope_note=None,
                why=Pair("", ""), reviewed_at=datetime(2026, 11, 24, tzinfo=UTC), areas=(),
                reading_minutes=Pair(0, 3), zh=None, en=None)
    assert (minutes(item, "zh"), minutes(item, "en")) == ("约 3 分钟", "3 min read")
