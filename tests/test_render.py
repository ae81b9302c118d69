"""The rendered email, checked structurally: languages, preheader, links, size budget."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from conftest import SAMPLE_FEED, Entry, atom

from pipeline.core.assemble import assemble
from pipeline.core.collect import parse_feed
from pipeline.core.interests import Variant
from pipeline.core.render import (
    HARD_LIMIT_BYTES,
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Renderer,
    environment,
)
from pipeline.errors import RenderError
from pipeline.model import LAYOUTS
from pipeline.stages.build import rank_week
from pipeline.week import parse_week

WEEK = parse_week("2026-W48", "Asia/Shanghai")


class Page(HTMLParser):
    """Collects what the checks need from an HTML document."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict]:
        return [attrs for name, attrs in self.tags if name == tag]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from pipeline.config import load

    config = tmp_path_factory.mktemp("cfg") / "newsletter.toml"
    config.write_text("", encoding="utf-8")
    settings = load(config, {})
    result = parse_feed(SAMPLE_FEED.read_bytes(), "sample", settings.feed.repo)
    ranked = rank_week(settings, WEEK, [result])
    issue, data, artifacts, rendered = assemble(settings, WEEK, ranked)
    return settings, issue, data, artifacts, rendered


def test_every_layout_has_html_and_text(sample):
    *_, artifacts, _ = sample
    assert sorted(artifacts) == sorted(
        [f"email-{layout}.html" for layout in LAYOUTS]
        + [f"email-{layout}.txt" for layout in LAYOUTS])


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
    _, issue, *_, rendered = sample
    page = Page(rendered[layout].html)
    assert page.all("html")[0]["lang"] == langs[0]
    blocks = [a["lang"] for a in page.all("div") if "lang" in a]
    # Each item shows its languages in the layout's order, each block marked.
    assert blocks.count(langs[0]) >= len(issue.items)
    if len(langs) == 2:
        assert blocks.count(langs[1]) >= len(issue.items)
    else:
        other = "en" if langs[0] == "zh-CN" else "zh-CN"
        assert other not in blocks
    first_item = rendered[layout].html.split('id="pr-53721"', 1)[1]
    positions = [first_item.index(f'lang="{tag}"') for tag in langs]
    assert positions == sorted(positions)


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


def test_every_link_is_http_or_a_placeholder(sample):
    *_, rendered = sample
    for layout in LAYOUTS:
        for a in Page(rendered[layout].html).all("a"):
            href = a.get("href", "")
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


def test_over_budget_shrinks_lowest_priority_first(settings):
    result = parse_feed(big_feed(40), "big", settings.feed.repo)
    ranked = rank_week(settings, WEEK, [result])
    issue, data, _artifacts, rendered = assemble(settings, WEEK, ranked)
    order = [item.pr for item in issue.items]
    for layout in LAYOUTS:
        r = rendered[layout]
        assert r.html_bytes <= 90_000
        assert r.brief, "something had to shrink"
        # The shortened ones are exactly the tail of the ranking.
        assert list(r.brief) == order[len(order) - len(r.brief):]
        assert r.folded == 0
        # A shortened item is a title linking into the archive, not its body.
        assert f'{issue.archive_url}#pr-{r.brief[-1]}' in r.html
    shrunk = [p for p in data["problems"] if p["code"] == "items-shrunk"]
    assert {p["layout"] for p in shrunk} == set(LAYOUTS)
    assert all(p["severity"] == "warning" for p in shrunk)


def test_shrinking_takes_the_fewest_items(settings):
    result = parse_feed(big_feed(40), "big", settings.feed.repo)
    renderer = Renderer()
    ranked = rank_week(settings, WEEK, [result])
    issue, _, _, rendered = assemble(settings, WEEK, ranked, renderer)
    r = rendered["zh"]
    # One item fewer shortened would not fit.
    from pipeline.core.render import Footer, _Plan, weight

    k = len(r.brief) - 1
    n = len(issue.items)
    plan = _Plan(issue.items[: n - k], issue.items[n - k:], 0)
    footer = Footer.from_settings(settings)
    html = renderer._html(issue, Variant("zh"), settings.site.base_url, plan, footer)
    text = renderer._text(issue, Variant("zh"), settings.site.base_url, plan, footer)
    assert max(weight(html), weight(text)) > 90_000


def test_a_list_too_long_folds_its_tail_into_one_archive_link(settings):
    small = replace(settings, issue=replace(settings.issue, size_budget_kb=30))
    result = parse_feed(big_feed(150, paragraphs=1), "big", settings.feed.repo)
    ranked = rank_week(small, WEEK, [result])
    issue, _data, _, rendered = assemble(small, WEEK, ranked)
    for layout in LAYOUTS:
        r = rendered[layout]
        assert r.html_bytes <= 30_000
        assert r.folded > 0
        assert len(r.brief) + r.folded == len(issue.items)
    assert "more reviews in the archive" in rendered["en"].html
    assert "篇评审见网页存档" in rendered["zh"].html


def test_budget_never_exceeds_the_hard_limit():
    assert HARD_LIMIT_BYTES == 100_000


def test_a_template_error_is_one_clear_render_error(tmp_path, sample):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.mjml.j2").write_text("<mjml>{{ no_such_name }}</mjml>")
    renderer = Renderer(environment([tmp_path]))
    with pytest.raises(RenderError) as info:
        renderer.render(issue, "https://x.example", 90)
    assert "no_such_name" in str(info.value)


def test_an_mjml_compile_error_is_a_render_error(tmp_path, sample):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.mjml.j2").write_text("<mjml><mj-body><mj-text>")
    with pytest.raises(RenderError) as info:
        Renderer(environment([tmp_path])).render(issue, "https://x.example", 90)
    assert "MJML does not compile" in str(info.value)


def test_operator_templates_override_the_built_in_ones(tmp_path, sample):
    _, issue, *_ = sample
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "issue.txt.j2").write_text("custom {{ archive_url }}")
    rendered, _ = Renderer(environment([tmp_path])).render(issue, "https://x.example", 90)
    assert rendered["en"].text == f"custom {issue.archive_url}"
