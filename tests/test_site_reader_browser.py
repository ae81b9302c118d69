"""The local archive in headless Chromium as a reader meets it on whatever port serves it: built
with the default ``[site] base_url`` (port 8000), served on another port, every request for
another server a failure (test_browser.open_page), so links and the search must work from where
the reader is.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.chromium import artifacts_dir
from support.feeds import atom
from support.project import SAMPLE_WEEK, make_project
from support.published_site import OLDER_ENTRIES, OLDER_WEEK, PublishedSite, serving, start_server
from test_browser import WIDTHS, open_page

from pipeline.archive.local import LocalArchive
from pipeline.config import load
from pipeline.core.site.site import Site
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish

DEFAULT_BASE = "http://127.0.0.1:8000"
EN_NOTE = "Start with the tests."
ZH_NOTE = "先看连接器的改动。"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[PublishedSite]:
    project = tmp_path_factory.mktemp("any-port")
    older = project / "older.atom"
    older.write_bytes(atom(OLDER_ENTRIES[:2]))  # one PR, reviewed in both languages
    make_project(project, extra='[archive]\ntarget = "local"\ndir = "site"\n')
    (project / "editorial").mkdir()
    (project / "editorial" / f"{SAMPLE_WEEK}.toml").write_text(
        f'[55823]\nnote = "{EN_NOTE}"\n\n[53721.zh]\nnote = "{ZH_NOTE}"\n', encoding="utf-8")
    settings = load(project / "newsletter.toml", {})
    assert settings.site.base_url == DEFAULT_BASE  # the embedded default's
    archive = LocalArchive(project / "site")
    for week, feeds in ((OLDER_WEEK, [str(older)]), (SAMPLE_WEEK, [])):
        built = build(settings, week_id=week, feeds=feeds, out=project / "build" / week,
                      archive_weeks=archive.list_issues())  # as the command line does
        publish(load_built(built.out_dir), archive, Site(settings.site))
    with serving(start_server(project / "site")) as url:
        # The URL it is served at, for open_page; its pages keep DEFAULT_BASE.
        yield PublishedSite(project / "site", url, (SAMPLE_WEEK, OLDER_WEEK))


@pytest.mark.slow  # the first to use `served` (two weeks built and indexed), five pages, a search
def test_a_page_served_on_another_port_leads_everywhere_and_its_search_works(browser, served):
    with open_page(browser, served, "index.html", WIDTHS["desktop"]) as seen:
        page = seen.page
        page.locator("ol.issues h2 a").first.click()
        page.wait_for_url(served.url(f"issues/{SAMPLE_WEEK}/index.html"))
        page.get_by_role("link", name="English", exact=True).click()
        page.wait_for_url(served.url(f"issues/{SAMPLE_WEEK}/en.html"))
        page.locator("article .pr-page").first.click()
        page.wait_for_url(f"{served.base_url}/pr/*/index.html")
        page.locator("article .areas a[href*='/areas/']").first.click()
        page.wait_for_url(f"{served.base_url}/areas/*/index.html")
        page.locator("a.brand").click()
        page.wait_for_url(served.url("index.html"))
        page.locator("a.search-link").click()
        page.wait_for_url(served.url("search/index.html"))
        box = page.locator("#search input")
        box.wait_for()
        box.fill("Scheduler")  # Pagefind and the words loaded from this server
        result = page.locator("#search-results a.hit").first
        result.wait_for()
        assert (result.get_attribute("href") or "").startswith("/issues/")
        result.click()
        page.wait_for_url(f"{served.base_url}/issues/*/index.html*")
        seen.assert_clean()


@pytest.mark.subprocess  # the archive it reads is the module's, published with Pagefind
def test_the_feeds_and_the_canonical_links_keep_the_configured_base_url(served):
    page = (served.root / "issues" / SAMPLE_WEEK / "index.html").read_text(encoding="utf-8")
    canonical = f'<link rel="canonical" href="{DEFAULT_BASE}/issues/{SAMPLE_WEEK}/index.html">'
    assert canonical in page
    feed = (served.root / "feed.xml").read_text(encoding="utf-8")
    assert f'href="{DEFAULT_BASE}/issues/{SAMPLE_WEEK}/index.html"' in feed
    assert f"<loc>{DEFAULT_BASE}/index.html</loc>" in (
        served.root / "sitemap.xml").read_text(encoding="utf-8")


@pytest.mark.parametrize("width", [375, 1280])
def test_the_issue_page_opens_with_its_contents_and_a_language_switch(browser, served, width):
    with open_page(browser, served, f"issues/{SAMPLE_WEEK}/index.html", width) as seen:
        page = seen.page
        switch = page.locator("nav.switch a")
        assert switch.all_inner_texts() == ["中文 + English", "中文", "English"]
        assert all(switch.nth(n).is_visible() for n in range(3))
        contents = page.locator("nav.contents")
        assert contents.is_visible()
        assert contents.locator("h2").inner_text().upper() == "本期目录 · IN THIS ISSUE"
        entries = contents.locator("ol > li > a")
        cards = page.locator("article.item").evaluate_all("els => els.map(e => e.id)")
        hrefs = entries.evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert hrefs == [f"#{card}" for card in cards] and len(cards) == 8
        for n in reversed(range(len(hrefs))):  # from the bottom up: each click must scroll
            entries.nth(n).click()
            top = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top",
                                hrefs[n][1:])
            assert 0 <= top < (812 if width < 600 else 900) / 2, (hrefs[n], top)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(artifacts_dir("browser") / f"contents-{width}.png"))
        switch.nth(2).click()
        page.wait_for_url(served.url(f"issues/{SAMPLE_WEEK}/en.html"))
        assert page.locator("nav.contents h2").inner_text().upper() == "IN THIS ISSUE"
        assert "23–29 Nov" in page.title()  # the English subject names its week
        seen.assert_clean()


def test_each_note_reads_under_its_own_languages_label_only(browser, served):
    expected = {"zh.html": [f"编者按: {ZH_NOTE}"], "en.html": [f"Editor's note: {EN_NOTE}"],
                "index.html": [f"编者按: {ZH_NOTE}", f"Editor's note: {EN_NOTE}"]}
    for name, notes in expected.items():
        with open_page(browser, served, f"issues/{SAMPLE_WEEK}/{name}", WIDTHS["desktop"]) as seen:
            shown = seen.page.locator(".note").evaluate_all(
                "els => els.map(e => [e.closest('[lang]').lang, e.innerText])")
            assert sorted(text for _, text in shown) == sorted(notes), (name, shown)
            for lang, text in shown:  # each inside its own language's section
                assert lang == ("zh-CN" if text.startswith("编者按") else "en"), (name, shown)
            seen.assert_clean()


def test_at_375_px_no_area_link_breaks_inside_itself(browser, served):
    """A hyphenated area link (kv-offload) moves to the next line whole on a phone."""
    with open_page(browser, served, f"issues/{SAMPLE_WEEK}/index.html", 375) as seen:
        links = seen.page.locator("article .areas a").evaluate_all(
            "els => els.map(a => [a.textContent, a.getClientRects().length])")
        assert any("-" in text for text, _ in links)
        assert [text for text, lines in links if lines != 1] == [], links
        seen.assert_clean()


def test_the_index_numbers_its_issues_from_the_first_and_counts_their_reviews(browser, served):
    """The default sets no [issue] first_week: later issues count the weeks since the first.
    One review is counted in the singular."""
    with open_page(browser, served, "index.html", WIDTHS["desktop"]) as seen:
        headlines = seen.page.locator("ol.issues > li > h2").all_inner_texts()
        assert headlines == ["第 49 期 · 2026 年 11 月 23 日 – 29 日\nNo. 49 · 23–29 Nov 2026",
                             "第 1 期 · 2025 年 12 月 22 日 – 28 日\nNo. 1 · 22–28 Dec 2025"]
        counts = seen.page.locator("ol.issues > li > p.meta").all_inner_texts()
        assert counts == [f"8 篇评审 · 8 reviews · {SAMPLE_WEEK}",
                          f"1 篇评审 · 1 review · {OLDER_WEEK}"], counts
        seen.assert_clean()
