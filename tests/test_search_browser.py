"""The archive's search in headless Chromium (issue #16, items 3 and 6).

The two-issue archive of tests/support/published_site.py (built and published by the real
command line, so ``publish`` ran Pagefind) is served on 127.0.0.1. A Chinese query and an
English query each find the right PR's review (its ``#pr-<number>`` anchor on the issue page),
a review that tries to inject markup shows as text, the search page has no serious axe
violation in either colour scheme, and with JavaScript off every page still reads and the
search page says what to do instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Page
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK
from support.published_site import OLDER_WEEK, PublishedSite, served_archive, start_server
from test_browser import SERIOUS, WIDTHS, open_page

from pipeline.archive.local import LocalArchive
from pipeline.config import load
from pipeline.core.site.site import Site
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish

SEARCH = "search/index.html"
RESULT_LINKS = ".pagefind-ui__result a"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[PublishedSite]:
    """The two-issue archive, published by the command line (so Pagefind ran), served."""
    project = tmp_path_factory.mktemp("search-site")
    with served_archive(project) as published:
        yield published


def search_for(page: Page, query: str) -> list[str]:
    """Type ``query`` into the search box; the links of the results (sub-results too)."""
    box = page.locator(".pagefind-ui__search-input")
    box.wait_for()
    box.fill(query)
    message = page.locator(".pagefind-ui__message").filter(has_text=query)
    message.wait_for()
    # Pagefind shows the count at once and each result when its fragment has loaded (five
    # at first): wait for all of those, not the first, or a slow one is missed.
    counted = re.search(r"\d+", message.inner_text())
    shown = min(int(counted.group()) if counted else 1, 5)
    page.wait_for_function(
        "n => [...document.querySelectorAll('li.pagefind-ui__result')]"
        ".filter(li => li.querySelector('a.pagefind-ui__result-link')).length >= n", arg=shown)
    hrefs: list[str] = page.eval_on_selector_all(RESULT_LINKS, "els => els.map(e => e.href)")
    return hrefs


@pytest.mark.slow  # the first to run publishes the module's archive and its Pagefind index
@pytest.mark.parametrize(("query", "week", "pr"), [
    ("竞态", SAMPLE_WEEK, 56317),           # 消除竞态误判: a word inside a Chinese sentence
    ("投机解码", SAMPLE_WEEK, 54934),
    ("placeholder", SAMPLE_WEEK, 56366),
    ("抢占", OLDER_WEEK, 50101),             # the older issue, read back from the archive
    ("preemption", OLDER_WEEK, 50101),
])
def test_a_query_finds_the_right_review(browser, site, query, week, pr):
    with open_page(browser, site, SEARCH, WIDTHS["desktop"]) as visit:
        found = search_for(visit.page, query)
        assert site.url(f"issues/{week}/index.html#pr-{pr}") in found, found
        visit.page.click(f'{RESULT_LINKS}[href$="#pr-{pr}"]')
        visit.page.wait_for_load_state("load")
        assert visit.page.url == site.url(f"issues/{week}/index.html#pr-{pr}")
        assert visit.page.locator(f"#pr-{pr}").is_visible()
        visit.assert_clean()


def test_one_query_finds_reviews_of_both_years_bundles(browser, site):
    """2025-W52's bundle is merged into 2026's: one box, one result list, both years (the
    2026 bundle holds no 2025 page: tests/test_search.py reads each year's fragments)."""
    with open_page(browser, site, SEARCH, WIDTHS["desktop"]) as visit:
        found = search_for(visit.page, "Scheduler")
        weeks = {week for week in site.weeks for url in found
                 if url.startswith(site.url(f"issues/{week}/index.html"))}
        assert weeks == {SAMPLE_WEEK, OLDER_WEEK}, found
        assert all(url.startswith(site.url("issues/")) for url in found), found
        visit.assert_clean()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_search_page_has_no_serious_accessibility_violation(browser, site, width):
    with open_page(browser, site, SEARCH, width) as visit:
        search_for(visit.page, "scheduler")
        serious = []
        for scheme in ("light", "dark"):
            visit.page.emulate_media(color_scheme=scheme)
            serious += [f"[{scheme}] {v['id']}: {v['help']} "
                        f"{[n['html'][:120] for n in v['nodes']]}"
                        for v in Axe().run(visit.page).response["violations"]
                        if v.get("impact") in SERIOUS]
        assert serious == []
        overflow = visit.page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width
        visit.assert_clean()


def test_pages_read_without_javascript_and_the_search_page_says_what_to_do(browser, site):
    titles = [item["zh"]["title"] for item in site.issue(SAMPLE_WEEK)["items"]]
    with open_page(browser, site, f"issues/{SAMPLE_WEEK}/index.html", WIDTHS["mobile"],
                   javascript=False) as visit:
        text = visit.page.locator("body").inner_text()
        assert all(title in text for title in titles)
        visit.page.get_by_role("link", name="搜索 · Search").click()
        visit.page.wait_for_load_state("load")
        assert visit.page.url == site.url(SEARCH)
        text = visit.page.locator("body").inner_text()
        assert "搜索需要 JavaScript" in text and "Search needs JavaScript" in text
        visit.page.get_by_role("link", name="Archive", exact=True).first.click()
        visit.page.wait_for_load_state("load")
        assert visit.page.url == site.url("index.html")
        assert SAMPLE_WEEK in visit.page.locator("body").inner_text()
        visit.assert_clean()


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Iterator[PublishedSite]:
    """One issue whose review and titles try to inject markup, published in-process."""
    project = tmp_path_factory.mktemp("hostile-search")
    server = start_server(project / "site")
    base = f"http://127.0.0.1:{server.server_port}"
    body = ("<script>window.pwned=1</script><img src=x onerror=window.pwned=2> 毒药评审 "
            "&lt;b&gt;粗&lt;/b&gt; \u202eevil\u202c " + "长" * 300)
    feed = project / "feed.atom"
    feed.write_bytes(atom([
        Entry(pr=60001, title="毒药 <img src=x onerror=window.pwned=3>", lang="zh-CN",
              body="值得精读：" + body),
        Entry(pr=60001, title="Poison <script>window.pwned=4</script>", lang="en",
              id="en-60001", body="Must read: " + body)]))
    (project / "newsletter.toml").write_text(
        f'[feed]\nurls = ["{feed}"]\n[site]\nbase_url = "{base}"\n', encoding="utf-8")
    settings = load(project / "newsletter.toml", {})
    built = load_built(build(settings, week_id=SAMPLE_WEEK, feeds=[str(feed)],
                             out=project / "build").out_dir)
    publish(built, LocalArchive(project / "site"), Site(settings.site))
    try:
        yield PublishedSite(Path(project / "site"), base, (SAMPLE_WEEK,))
    finally:
        server.shutdown()
        server.server_close()


def test_a_review_that_injects_markup_shows_as_text(browser, hostile_site):
    with open_page(browser, hostile_site, SEARCH, WIDTHS["desktop"]) as visit:
        page = visit.page
        found = search_for(page, "毒药评审")
        assert hostile_site.url(f"issues/{SAMPLE_WEEK}/index.html#pr-60001") in found
        results = page.locator("#search")
        assert results.locator("img, script, b").count() == 0
        assert "毒药 <img src=x onerror=window.pwned=3>" in results.inner_text()
        assert page.evaluate("window.pwned") is None
        visit.assert_clean()
