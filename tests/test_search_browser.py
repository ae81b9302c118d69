"""The archive's search in headless Chromium, queried as a reader types on the two-issue archive
of tests/support/published_site.py (served on 127.0.0.1). Each result is one review, linking to
its article on the issue page of the search page's language; the expected reviews are read from
issue.json, never from the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK, sample_settings
from support.published_site import OLDER_WEEK, PublishedSite, served_archive, serving, start_server
from test_browser import WIDTHS, open_page, serious_violations

from pipeline.archive.local import LocalArchive
from pipeline.core.site.site import Site
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish

SEARCH = "search/index.html"
RESULT_LINKS = "#search-results a.hit"
#: Results shown before "Show more".
PAGE = 10
_HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[PublishedSite]:
    """The two-issue archive, published by the command line (so Pagefind ran), served."""
    project = tmp_path_factory.mktemp("search-site")
    with served_archive(project) as published:
        yield published


def search_for(page: Page, query: str) -> tuple[list[str], str]:
    """Type ``query`` into the search box; the links of the results shown, and what the
    page says it found."""
    box = page.locator("#search input")
    box.wait_for()
    box.fill(query)
    status = page.locator("#search-status")
    # Done when the message names the query and is no longer "searching", and every result
    # of the first page has rendered.
    page.wait_for_function(
        """q => { const s = document.getElementById('search-status').textContent;
                  return s.includes('“' + q + '”') && !/正在搜索|Searching/.test(s); }""",
        arg=query)
    said = status.inner_text()
    counted = re.findall(r"\d+", re.sub(r"“[^”]*”", "", said))
    shown = min(int(counted[0]) if counted else 0, PAGE)
    page.wait_for_function(
        "n => document.querySelectorAll('#search-results > li').length === n", arg=shown)
    hrefs: list[str] = page.eval_on_selector_all(RESULT_LINKS, "els => els.map(e => e.href)")
    return hrefs, said


def prs(site: PublishedSite, found: list[str], variant: str = "index.html") -> list[int]:
    """The PR numbers ``found`` links to, each link checked to be a review on the page of
    ``variant`` of the issue that holds it."""
    numbers = []
    for url in found:
        match = re.fullmatch(re.escape(site.base_url) + r"/issues/(\d{4}-W\d{2})/"
                             + re.escape(variant) + r"#pr-(\d+)", url)
        assert match, url
        assert int(match[2]) in {item["pr"] for item in site.issue(match[1])["items"]}, url
        numbers.append(int(match[2]))
    return numbers


def reviews(site: PublishedSite) -> list[dict[str, Any]]:
    return [item for week in site.weeks for item in site.issue(week)["items"]]


def text_of(item: dict[str, Any]) -> str:
    return " ".join([*item["areas"], *(f"{item[lang]['title']} {item[lang]['body_text']}"
                                       for lang in ("zh", "en") if item[lang])])


def saying(site: PublishedSite, words: str) -> set[int]:
    """The reviews whose area tags, titles or bodies hold ``words`` (case aside)."""
    return {item["pr"] for item in reviews(site) if words.lower() in text_of(item).lower()}


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
        found, _ = search_for(visit.page, query)
        assert site.url(f"issues/{week}/index.html#pr-{pr}") in found, found
        visit.page.click(f'{RESULT_LINKS}[href$="#pr-{pr}"]')
        visit.page.wait_for_load_state("load")
        assert visit.page.url == site.url(f"issues/{week}/index.html#pr-{pr}")
        assert visit.page.locator(f"#pr-{pr}").is_visible()
        visit.assert_clean()


@pytest.mark.parametrize(("query", "words", "traps"), [
    ("_remote_agents", ("_remote_agents",), ()),  # an identifier, whole or in part
    ("remote_agents", ("_remote_agents",), ()),
    # 核对 and 锁内 (核 or 内 beside another character) must not match 内核.
    ("内核", ("内核",), ("核对", "锁内")),
    ("消除竞态误判", ("消除竞态误判",), ()),  # typed whole: cut as the index was
    ("Triton内核", ("Triton", "内核"), ()),  # a Latin and a Chinese word, no space between
    ("内核 Triton", ("Triton", "内核"), ()),
    # A tag line counts for its review only: nixl tags #56317 and is a word of #53721;
    # #56366, before #56317 on the page, lacks it.
    ("NIXL", ("NIXL",), ()),
    # 2025's issue only has "KV", which Pagefind alone would take for kv-connector (a prefix).
    ("kv-connector", ("kv-connector",), ("KV blocks",)),
    ("精读", ("精读",), ()),  # every review of the sample issue: each one shown
    ("KV", ("KV",), ()),  # 2025-W52's bundle is merged into 2026's: one list, both years
], ids=["identifier", "identifier without its underscore", "Chinese word", "Chinese sentence",
        "Latin and Chinese words together", "two words", "a tag line", "no prefix match",
        "every review of an issue", "both years"])
def test_a_query_finds_exactly_the_reviews_holding_its_words(browser, site, query, words, traps):
    expected = set.intersection(*(saying(site, word) for word in words))
    assert expected
    assert all(saying(site, trap) - expected for trap in traps)  # what it must not find is there
    with open_page(browser, site, SEARCH, WIDTHS["desktop"]) as visit:
        found, said = search_for(visit.page, query)
        assert sorted(prs(site, found)) == sorted(expected), said
        assert f"{len(expected)} 篇评审" in said  # reviews counted, not pages
        visit.assert_clean()


@pytest.mark.parametrize(("variant", "query", "says", "language"), [
    ("en.html", "NIXL", "2 reviews match “NIXL”", "en"),
    ("en.html", "_remote_agents", "1 review matches “_remote_agents”", "en"),
    ("zh.html", "NIXL", "2 篇评审含“NIXL”", "zh"),
    ("index.html", "NIXL", "2 篇评审含“NIXL” · 2 reviews match “NIXL”", "both"),
])
def test_the_search_speaks_the_languages_of_its_page(browser, site, variant, query, says,
                                                     language):
    with open_page(browser, site, f"search/{variant}", WIDTHS["mobile"]) as visit:
        page = visit.page
        found, said = search_for(page, query)
        assert said == says
        prs(site, found, variant)  # each result on the issue page of the same language
        shown = "\n".join(page.locator(RESULT_LINKS).all_inner_texts())
        titles = {item["pr"]: item for item in reviews(site)}
        for pr in prs(site, found, variant):
            for lang in ("zh", "en"):
                title = titles[pr][lang]["title"].replace("`", "")
                assert (title in shown) == (language in (lang, "both")), (lang, title)
        heading = page.locator("h1").inner_text()
        assert bool(_HAN.search(heading)) == (language != "en")
        assert ("Search" in heading) == (language != "zh")
        # The language switch keeps the query.
        page.get_by_role("link", name="English", exact=True).click()
        page.wait_for_load_state("load")
        assert page.url == site.url("search/en.html") + "?q=" + quote(query, safe="")
        _, said = search_for(page, query)
        assert not _HAN.search(said)
        visit.assert_clean()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_search_page_has_no_serious_accessibility_violation(browser, site, width):
    with open_page(browser, site, SEARCH, width) as visit:
        search_for(visit.page, "kv")
        assert serious_violations(visit.page) == []
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
        assert not visit.page.locator("#search input").is_visible()  # a box that does nothing
        visit.page.get_by_role("link", name="Archive", exact=True).first.click()
        visit.page.wait_for_load_state("load")
        assert visit.page.url == site.url("index.html")
        assert SAMPLE_WEEK in visit.page.locator("body").inner_text()
        visit.assert_clean()


def published_in_process(project: Path, entries: list[Entry]) -> Iterator[PublishedSite]:
    """The sample week built from ``entries`` alone and published in-process into
    ``project/site``, served on 127.0.0.1 (its URL the ``base_url``) while the caller runs."""
    with serving(start_server(project / "site")) as base:
        feed = project / "feed.atom"
        feed.write_bytes(atom(entries))
        settings = sample_settings(project, feed=feed, extra=f'[site]\nbase_url = "{base}"\n')
        built = load_built(build(settings, week_id=SAMPLE_WEEK, feeds=[str(feed)],
                                 out=project / "build").out_dir)
        publish(built, LocalArchive(project / "site"), Site(settings.site))
        yield PublishedSite(project / "site", base, (SAMPLE_WEEK,))


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Iterator[PublishedSite]:
    """One issue whose review and titles try to inject markup, published in-process."""
    body = ("<script>window.pwned=1</script><img src=x onerror=window.pwned=2> 毒药评审 "
            "&lt;b&gt;粗&lt;/b&gt; \u202eevil\u202c $& $` " + "长" * 300)
    yield from published_in_process(tmp_path_factory.mktemp("hostile-search"), [
        Entry(pr=60001, title="毒药 <img src=x onerror=window.pwned=3>", lang="zh-CN",
              body="值得精读：" + body),
        Entry(pr=60001, title="Poison <script>window.pwned=4</script>", lang="en",
              id="en-60001", body="Must read: " + body)])


@pytest.mark.slow  # its fixture builds and publishes the hostile issue, Pagefind and all
def test_a_review_that_injects_markup_shows_as_text(browser, hostile_site):
    with open_page(browser, hostile_site, SEARCH, WIDTHS["desktop"]) as visit:
        page = visit.page
        found, _ = search_for(page, "毒药评审")
        assert found == [hostile_site.url(f"issues/{SAMPLE_WEEK}/index.html#pr-60001")]
        results = page.locator("#search-results")
        assert results.locator("img, script, b").count() == 0
        assert "毒药 <img src=x onerror=window.pwned=3>" in results.inner_text()
        assert page.evaluate("window.pwned") is None
        # A query that reads like a replacement pattern is shown as typed.
        _, said = search_for(page, "$& $`")
        assert "“$& $`”" in said
        visit.assert_clean()


@pytest.fixture(scope="module")
def busy_site(tmp_path_factory) -> Iterator[PublishedSite]:
    """One issue of twelve reviews, each about the scheduler (调度器), published in-process."""
    entries = []
    for n in range(12):
        pr = 61000 + n
        entries += [Entry(pr=pr, lang="zh-CN", title=f"调度器改动之{n}",
                          body=f"值得一读：调度器的第 {n} 处改动。"),
                    Entry(pr=pr, lang="en", id=f"en-{pr}", title=f"Scheduler change {n}",
                          body=f"Skim: the scheduler's change number {n}.")]
    yield from published_in_process(tmp_path_factory.mktemp("busy-search"), entries)


@pytest.mark.slow  # its fixture builds and publishes a twelve-review issue, Pagefind and all
def test_more_reviews_than_a_page_shows_are_a_click_away(browser, busy_site):
    expected = {item["pr"] for item in busy_site.issue(SAMPLE_WEEK)["items"]}
    assert len(expected) == 12 > PAGE
    with open_page(browser, busy_site, "search/en.html", WIDTHS["mobile"]) as visit:
        page = visit.page
        found, said = search_for(page, "调度器")
        assert said == "12 reviews match “调度器”" and len(found) == PAGE
        page.get_by_role("button", name="Show more").click()
        page.wait_for_function("() => document.querySelectorAll('#search-results > li')"
                               ".length === 12")
        assert not page.get_by_role("button", name="Show more").is_visible()
        hrefs = page.eval_on_selector_all(RESULT_LINKS, "els => els.map(e => e.href)")
        assert sorted(prs(busy_site, hrefs, "en.html")) == sorted(expected)
        visit.assert_clean()
