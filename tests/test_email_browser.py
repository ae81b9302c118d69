"""The email as a reader's mail app shows it: headless Chromium (Debian's ``chromium``).

The sample issue is rendered in its zh-en layout and as an interest variant, written to files
and opened from disk, as a desktop mail app or "view online" would: its links, both colour
schemes, a phone's width, its 8bit folding and axe-core. Screenshots go to
``$TEST_ARTIFACTS/email/`` (default ``build/test-artifacts/``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, Page
from support.chromium import artifacts_dir
from support.feeds import Entry, atom
from support.project import assembled

from pipeline.config import load
from pipeline.core.email.eightbit import MAX_LINE_OCTETS, fold_html
from pipeline.core.email.render import Budget, Renderer, strings
from pipeline.core.issue.interests import Variant

SERIOUS = ("critical", "serious")
Scheme = Literal["light", "dark"]
#: The reader of the variant follows this area (two of the sample's eight items).
AREA = "rocm"
#: Area tags with hyphens, more than a phone's line holds.
LONG_TAGS = ("kv-connector", "pd-disaggregation", "spec-decode", "rust-frontend",
             "multi-modal-inputs", "cpu-offload", "model-runner-v2", "ci-infra")


@pytest.fixture(scope="module")
def emails(tmp_path_factory) -> dict[str, Path]:
    """The plain zh-en email and the variant of a reader who follows :data:`AREA`, on disk."""
    folder = tmp_path_factory.mktemp("email-browser")
    settings = load(None, {}, cwd=folder)
    issue, *_ = assembled(settings)
    issue = replace(issue, number=1)
    renderer = Renderer()
    files = {}
    for name, variant in (("plain", Variant("zh-en")), ("for-you", Variant("zh-en", (AREA,)))):
        rendered, problem = renderer.render_variant(issue, variant, settings.site.base_url,
                                                    Budget(90))
        assert problem is None
        files[name] = folder / f"email-{name}.html"
        files[name].write_text(rendered.html, encoding="utf-8")
    return files


@contextmanager
def opened(browser: Browser, path: Path, width: int, scheme: Scheme = "light") -> Iterator[Page]:
    """``path`` in a fresh context at ``width`` px; fails if it asks for anything else."""
    mobile = width < 600
    context = browser.new_context(viewport={"width": width, "height": 812 if mobile else 900},
                                  is_mobile=mobile, has_touch=mobile, color_scheme=scheme)
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    try:
        page.goto(path.as_uri(), wait_until="load")
        yield page
        assert requests == [path.as_uri()], f"the email asked for more: {requests}"
    finally:
        context.close()


def luminance(rgb: str) -> float:
    """WCAG relative luminance of a computed ``rgb(r, g, b)`` colour."""
    values = [int(part) / 255 for part in rgb[rgb.index("(") + 1:rgb.index(")")]
              .replace(" ", "").split(",")[:3]]
    linear = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in values]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def screenshots(browser: Browser, paths: list[Path], width: int,
                scheme: Scheme = "light") -> list[bytes]:
    """A full-page screenshot of each of ``paths``, as :func:`opened` shows it."""
    shots = []
    for path in paths:
        with opened(browser, path, width, scheme) as page:
            shots.append(page.screenshot(full_page=True))
    return shots


def style(page: Page, selector: str, prop: str) -> str:
    value: str = page.evaluate("([s, p]) => getComputedStyle(document.querySelector(s))[p]",
                               [selector, prop])
    return value


@pytest.mark.parametrize("width", [375, 1280])
def test_every_contents_link_brings_its_card_into_view(browser, emails, width):
    with opened(browser, emails["plain"], width) as page:
        hrefs = page.eval_on_selector_all("ol a", "links => links.map(a => a.getAttribute('href'))")
        assert len(hrefs) == 8 and all(href.startswith("#pr-") for href in hrefs)
        for href in reversed(hrefs):  # from the bottom up: each click must scroll
            page.locator(f'ol a[href="{href}"]').click()
            seen = page.evaluate("""() => {
                const target = document.querySelector(':target');
                if (!target) return null;
                const card = target.closest('.card');
                return {id: target.id, top: target.getBoundingClientRect().top,
                        height: window.innerHeight, hash: location.hash,
                        card: card && card.getBoundingClientRect().top};
            }""")
            assert seen and seen["id"] == href[1:] and seen["hash"] == href, (href, seen)
            assert seen["card"] is not None, f"{href} does not land on a card"
            # The card's own top edge shows too (sub-pixel scrolling aside).
            assert -1 <= seen["card"] < seen["top"] < seen["height"], (href, seen)


@pytest.mark.parametrize("width", [375, 1280])
def test_dark_cards_stand_apart_from_the_page_and_dividers_stay_dark(browser, emails, width):
    with opened(browser, emails["plain"], width, "dark") as page:
        body = style(page, "body", "backgroundColor")
        for selector in (".page", ".page > table") if page.query_selector(".page > table") \
                else (".page",):
            assert style(page, selector, "backgroundColor") == body, selector
        card = style(page, ".card", "backgroundColor")
        # What a card's text sits on is the card's colour, not the page's.
        assert style(page, ".card td", "backgroundColor") == card
        assert contrast(card, body) >= 1.2, (card, body)
        divider = style(page, ".card .divider", "borderTopColor")
        assert luminance(divider) < 0.1 and contrast(divider, card) < 3, divider
        h1 = style(page, ".head h1", "color")
        assert contrast(h1, body) >= 4.5, (h1, body)
        for selector in (".head .meta", ".card .meta", ".card h2 a", "ol a"):
            assert contrast(style(page, selector, "color"), body) >= 4.5, selector
        page.screenshot(path=str(artifacts_dir("email") / f"dark-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [375, 1280])
def test_light_cards_have_an_edge_that_stands_apart_from_the_page(browser, emails, width):
    """White on light grey is ~1.1:1: the card's edge carries WCAG 1.4.11's 3:1; the divider
    inside a card stays light."""
    with opened(browser, emails["plain"], width) as page:
        body = style(page, "body", "backgroundColor")
        card = style(page, ".card", "backgroundColor")
        edges = page.eval_on_selector_all(".card", """cards => cards.map(c => {
            const s = getComputedStyle(c);
            return [s.borderTopColor, s.borderTopWidth, s.borderBottomColor, s.borderLeftColor,
                    s.borderRightColor];
        })""")
        assert edges and len({tuple(e) for e in edges}) == 1, edges  # every card alike
        colour, thickness, *sides = edges[0]
        assert thickness == "1px" and set(sides) == {colour}
        assert contrast(colour, body) >= 3 and contrast(colour, card) >= 3, (colour, body)
        assert luminance(style(page, ".card .divider", "borderTopColor")) > 0.7
    with opened(browser, emails["plain"], width, "dark") as page:  # dark mode as it was
        card = style(page, ".card", "backgroundColor")
        assert style(page, ".card", "borderTopColor") == card


def test_at_375_px_the_masthead_stacks_the_brands_whole_without_a_dangling_dot(browser, emails):
    with opened(browser, emails["plain"], 375) as page:
        rects = page.eval_on_selector_all(
            "h1 .brand", "spans => spans.map(s => s.getClientRects().length)")
        assert rects == [1, 1]  # never broken inside a brand
        tops = page.eval_on_selector_all(
            "h1 .brand", "spans => spans.map(s => Math.round(s.getBoundingClientRect().top))")
        assert tops[1] > tops[0]  # one brand a line
        assert not page.is_visible("h1 .brand-sep")  # no "·" left hanging at a line's end
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
    with opened(browser, emails["plain"], 1280) as page:
        tops = page.eval_on_selector_all(
            "h1 > span", "spans => spans.map(s => Math.round(s.getBoundingClientRect().top))")
        assert len(set(tops)) == 1 and page.is_visible("h1 .brand-sep")  # one line: 周报 · Weekly


@pytest.mark.parametrize("folded", [False, True])
def test_at_375_px_no_footer_link_or_area_tag_breaks_inside_itself(browser, tmp_path,
                                                                   folded):
    """Each footer link and area tag is one piece on a phone, also folded for 8bit (``<wbr>``)."""
    settings = load(None, {}, cwd=tmp_path)
    issue, *_ = assembled(settings)
    # Hyphenated tags enough to fill a phone's line more than once, wherever it ends.
    tagged = replace(issue.items[0], areas=tuple(sorted(LONG_TAGS)))
    issue = replace(issue, items=(tagged, *issue.items[1:]))
    rendered, _ = Renderer().render_variant(issue, Variant("zh-en"), settings.site.base_url,
                                            Budget(90))
    data: bytes | None = rendered.html.encode("utf-8")
    if folded:
        data = fold_html(rendered.html.encode("utf-8").replace(b"\r\n", b"\n"))
    assert data is not None
    path = tmp_path / "email.html"
    path.write_bytes(data)
    words = [strings()[lang][key] for lang in ("zh", "en")
             for key in ("unsubscribe", "preferences", "archive")]
    with opened(browser, path, 375) as page:
        footer = page.evaluate("""words => [...document.querySelectorAll('a')]
            .filter(a => words.includes(a.textContent.trim()))
            .map(a => [a.textContent.trim(), a.getClientRects().length])""", words)
        assert sorted(text for text, _ in footer) == sorted(words), footer
        assert all(lines == 1 for _, lines in footer), footer
        tags = page.eval_on_selector_all(
            ".card .tag", "tags => tags.map(t => [t.textContent, t.getClientRects().length])")
        assert set(LONG_TAGS) <= {text for text, _ in tags}, tags
        assert all(lines == 1 for _, lines in tags), tags
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        page.screenshot(path=str(artifacts_dir("email") / f"footer-375{'-folded' * folded}.png"),
                        full_page=True)


@pytest.mark.parametrize("width", [375, 1280])
def test_each_contents_entry_takes_two_lines(browser, emails, width):
    with opened(browser, emails["for-you"], width) as page:
        lines = page.eval_on_selector_all("ol > li", """items => items.map(li =>
            [...li.children].map(row => Math.round(row.getBoundingClientRect().height
                / parseFloat(getComputedStyle(row).lineHeight))))""")
        assert len(lines) == 8 and all(rows == [1, 1] for rows in lines), lines
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(artifacts_dir("email") / f"for-you-{width}.png"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_for_you_mark_reads_in_both_schemes(browser, emails, scheme):
    with opened(browser, emails["for-you"], 375, scheme) as page:
        marks = page.eval_on_selector_all(".foryou", """marks => marks.map(m => [
            getComputedStyle(m).backgroundColor,
            [...m.querySelectorAll('span')].map(s => getComputedStyle(s).color)])""")
        assert len(marks) == 4  # two items of the area: each card and each contents entry
        for background, colours in marks:
            assert colours and all(contrast(c, background) >= 4.5 for c in colours), marks


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_email_folded_for_8bit_shows_the_same_pixels(browser, emails, tmp_path, scheme):
    """Folding turns spaces into line breaks HTML reads the same: the pixels must not change."""
    raw = emails["plain"].read_bytes()
    folded = fold_html(raw.replace(b"\r\n", b"\n"))
    assert folded is not None and folded != raw
    assert max(len(line) for line in folded.split(b"\n")) <= MAX_LINE_OCTETS
    copy = tmp_path / "email-folded.html"
    copy.write_bytes(folded)
    plain, refolded = screenshots(browser, [emails["plain"], copy], 375, scheme)
    assert plain == refolded


@pytest.mark.parametrize("width", [375, 600])
def test_a_chinese_paragraph_cut_by_wbr_for_8bit_shows_the_same_pixels(browser, tmp_path,
                                                                       width):
    """A ``<wbr>`` holding the line break between two ideographs changes neither wrap nor glyph."""
    text = "值得精读，调度器先预留块再决定抢占，抖动下降百分之十二点五。" * 30
    page = (f'<!doctype html><meta charset="utf-8"><body style="margin:8px">'
            f'<p style="font-size:15px;line-height:1.7"><b>要点</b>{text}</p></body>')
    raw = page.encode()
    folded = fold_html(raw)
    assert folded is not None and b"<wbr\n>" in folded
    files = [tmp_path / "raw.html", tmp_path / "folded.html"]
    files[0].write_bytes(raw)
    files[1].write_bytes(folded)
    plain, refolded = screenshots(browser, files, width)
    assert plain == refolded


@pytest.mark.slow  # axe's colour-contrast pass over a whole email, in 2 schemes at 2 widths
@pytest.mark.parametrize("name", ["plain", "for-you"])
def test_no_serious_accessibility_violations_in_either_scheme(browser, emails, name):
    axe = Axe()
    report = []
    for scheme in ("light", "dark"):
        for width in (375, 1280):
            with opened(browser, emails[name], width, scheme) as page:
                report += [f"[{scheme} {width}] {v['id']}: {v['help']} "
                           + "; ".join(node["html"][:120] for node in v["nodes"][:3])
                           for v in axe.run(page).response["violations"]
                           if v.get("impact") in SERIOUS]
    assert not report, "\n".join(report)


@pytest.mark.slow  # a 50-review week built, rendered and laid out at 600 px
def test_a_fifty_review_week_opens_its_first_card_on_the_first_screen(browser, tmp_path):
    """A realistic long week: 50 reviews in both languages, tiers given (22 must-read, 10
    medium, 18 skim), rendered zh-en within the 90 KB budget."""
    tiers = ["must-read"] * 22 + ["medium"] * 10 + ["skim"] * 18
    entries = [Entry(pr=51000 + i, title=f"调度器第 {i} 处改动：把 `block_pool.py` 的锁拆细",
                     body="值得一读。" + "评审正文讨论设计取舍、测试手法与兼容性。" * 12,
                     categories=[f"priority:{tier}", "v1"]) for i, tier in enumerate(tiers)]
    entries += [Entry(pr=51000 + i, lang="en", id=f"en-{i}",
                      title=f"Scheduler change {i}: finer locks in `block_pool.py`",
                      body="Worth a look. " + "The review weighs trade-offs and tests. " * 10,
                      published="2026-11-24T12:00:00+08:00") for i in range(len(tiers))]
    settings = load(None, {}, cwd=tmp_path)
    issue, *_ = assembled(settings, atom(entries))
    rendered, _ = Renderer().render_variant(issue, Variant("zh-en"), settings.site.base_url,
                                            Budget(90))
    path = tmp_path / "email-fifty.html"
    path.write_text(rendered.html, encoding="utf-8")
    tier = {item.pr: item.tier for item in issue.items}
    assert rendered.brief and {tier[pr] for pr in rendered.brief} <= {"medium", "skim"}
    with opened(browser, path, 600) as page:
        top = page.evaluate("document.querySelector('table.card').getBoundingClientRect().top"
                            " + window.scrollY")
        assert top <= 1000, top
        # The tiers' lines lead to their cards, and the titles left to the archive are listed
        # once, after the cards, each linking to its page.
        page.click("a[href='#tier-must-read']")
        assert page.evaluate("location.hash") == "#tier-must-read"
        listed = page.locator("#more ~ ol.toc li a").count()
        assert listed == len(rendered.brief)
