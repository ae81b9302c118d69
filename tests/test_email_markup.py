"""The email's markup budget: what an item in full costs (bytes are exact), and what must stay
inline for clients that strip ``<style>``: a card's white background and padding (Outlook), the
wrapper's text colour, the headline's colour, ``lang`` on every language block, Outlook's gap
between cards.
"""

from __future__ import annotations

import re

import pytest
from support.project import assembled

from pipeline.core.email.render import Footer, Renderer, _Plan
from pipeline.core.issue.interests import Variant
from pipeline.model import LANG_TAGS, LAYOUTS, layout_langs

#: The budget per full bilingual item: HTML bytes, and markup against the text.
MAX_ITEM_BYTES = 3_500
MAX_MARKUP_RATIO = 0.6
_CARD = re.compile(r'<table class="card"[^>]*>(.*?)</td></tr></table>', re.S)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from pipeline.config import load

    settings = load(None, {}, cwd=tmp_path_factory.mktemp("cfg"))
    issue, *_, rendered = assembled(settings)
    return settings, issue, rendered


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


@pytest.mark.parametrize("layout", ["zh-en", "en-zh"])
def test_a_full_bilingual_item_stays_within_its_bytes(sample, layout):
    settings, issue, _ = sample
    renderer, base, footer = Renderer(), settings.site.base_url.rstrip("/"), Footer()
    variant, n = Variant(layout), len(issue.items)

    def parts(plan: _Plan) -> tuple[str, str]:
        return renderer._parts(issue, variant, base, plan, footer)

    (html, text), (html0, text0) = parts(_Plan(issue.items, (), 0)), parts(_Plan((), (), 0))
    html_item, text_item = (utf8(html) - utf8(html0)) / n, (utf8(text) - utf8(text0)) / n
    assert html_item <= MAX_ITEM_BYTES, html_item
    assert (html_item - text_item) / text_item <= MAX_MARKUP_RATIO, (html_item, text_item)


def test_the_cards_share_one_text_block_whatever_their_number(sample):
    settings, issue, _ = sample
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
    _, issue, rendered = sample
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
