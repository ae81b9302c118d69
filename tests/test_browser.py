"""The web archive in headless Chromium (Debian's ``chromium``) via Playwright: a two-issue archive
published by the real command line and served on 127.0.0.1; its index, an issue, a PR and an
area page at 375 px and 1280 px, in both colour schemes, with axe-core, without JavaScript, and
by following their links.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, Page
from support.chromium import artifacts_dir
from support.project import SAMPLE_WEEK
from support.published_site import OLDER_WEEK, PublishedSite, served_archive

#: The flags that work on these machines (closed network, root, no GPU); Playwright gives each
#: launch a fresh temporary profile (--user-data-dir) of its own.
WIDTHS = {"mobile": 375, "desktop": 1280}
PAGES = {"index": "index.html", "issue": f"issues/{SAMPLE_WEEK}/index.html",
         "pr": "pr/{pr}/index.html", "area": "areas/{area}/index.html"}
SERIOUS = ("critical", "serious")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[PublishedSite]:
    project = tmp_path_factory.mktemp("browser-site")
    with served_archive(project) as published:
        yield published


@dataclass
class Visit:
    """A page loaded at one width, with everything that went wrong while it loaded."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    bad_requests: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.console_errors == [], "console errors:\n" + "\n".join(self.console_errors)
        assert self.page_errors == [], "page errors:\n" + "\n".join(self.page_errors)
        assert self.bad_requests == [], "requests that failed or left the local server:\n" + \
            "\n".join(self.bad_requests)


@contextmanager
def open_page(browser: Browser, site: PublishedSite, key: str, width: int, *,
              javascript: bool = True) -> Iterator[Visit]:
    mobile = width < 600
    context = browser.new_context(
        viewport={"width": width, "height": 812 if mobile else 900},
        is_mobile=mobile, has_touch=mobile,
        java_script_enabled=javascript)
    page = context.new_page()
    visit = Visit(page)
    page.on("console", lambda msg: visit.console_errors.append(f"{msg.location}: {msg.text}")
            if msg.type == "error" else None)
    page.on("pageerror", lambda exc: visit.page_errors.append(str(exc)))
    page.on("requestfailed", lambda req: visit.bad_requests.append(
        f"{req.method} {req.url}: {req.failure}"))

    def on_response(response) -> None:
        if not response.url.startswith(site.base_url + "/"):
            visit.bad_requests.append(f"{response.request.method} {response.url}: "
                                      "not the local server")
        elif response.status >= 400:
            visit.bad_requests.append(f"{response.request.method} {response.url}: "
                                      f"HTTP {response.status}")

    page.on("response", on_response)
    try:
        response = page.goto(site.url(key), wait_until="load")
        assert response is not None and response.status == 200, key
        yield visit
    finally:
        context.close()


def busiest_area(site: PublishedSite) -> str:
    """The area with the most reviews across the archive (the sample's names are slugs)."""
    counts: dict[str, int] = {}
    for week in site.weeks:
        for item in site.issue(week)["items"]:
            for area in item["areas"]:
                counts[area] = counts.get(area, 0) + 1
    return max(sorted(counts), key=lambda area: counts[area])


def page_key(name: str, site: PublishedSite) -> str:
    """A PAGES entry made concrete: the sample week's first PR, its busiest area."""
    return PAGES[name].format(pr=site.issue(SAMPLE_WEEK)["items"][0]["pr"],
                              area=busiest_area(site))


@pytest.fixture
def visit(request, browser, site) -> Iterator[Visit]:
    page_name, width_name = request.param
    with open_page(browser, site, page_key(page_name, site), WIDTHS[width_name]) as opened:
        yield opened


BOTH = [(p, w) for p in PAGES for w in WIDTHS]
IDS = [f"{p}-{w}" for p, w in BOTH]


def serious_violations(page: Page) -> list[str]:
    """axe-core's critical and serious findings, in both colour schemes (the pages have a dark
    one: contrast in both), each with the elements it names."""
    report = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for violation in Axe().run(page).response["violations"]:
            if violation.get("impact") in SERIOUS:
                report.append(f"[{violation['impact']}, {scheme}] {violation['id']}: "
                              f"{violation['help']} ({violation['helpUrl']})")
                report += [f"    {' '.join(map(str, node['target']))}: {node['html'][:160]}"
                           for node in violation["nodes"]]
    return report


@pytest.mark.slow  # the first to run builds the module's published archive; axe runs twice
@pytest.mark.parametrize("visit", BOTH, ids=IDS, indirect=True)
def test_page_loads_cleanly_fits_and_has_no_serious_accessibility_violation(visit: Visit,
                                                                             request):
    page = visit.page
    page.wait_for_load_state("networkidle")
    visit.assert_clean()
    assert page.title(), "the page has no <title>"
    width = page.evaluate("window.innerWidth")
    assert page.viewport_size is not None
    assert width == page.viewport_size["width"], "the viewport meta is not honoured"
    overflow = page.evaluate("document.documentElement.scrollWidth")
    if width < 600:
        wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
            .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className
            : '') + ': ' + (e.textContent || '').trim().slice(0, 60))""")
        assert overflow <= width, f"horizontal overflow at {width}px: {overflow}px wide; " \
            f"widest elements: {wide}"
    shot = artifacts_dir("browser") / f"{request.node.callspec.id}.png"
    shot.unlink(missing_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000, shot
    serious = serious_violations(page)
    assert serious == [], "axe-core found critical or serious violations:\n" + "\n".join(serious)
    visit.assert_clean()


def visible_text(page: Page) -> str:
    return page.locator("body").inner_text()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_language_switch_works_without_javascript(browser, site, width):
    items = site.issue(SAMPLE_WEEK)["items"]
    zh_titles = [item["zh"]["title"] for item in items]
    en_titles = [item["en"]["title"] for item in items]
    issue_url = site.url(f"issues/{SAMPLE_WEEK}/")
    with open_page(browser, site, PAGES["issue"], width, javascript=False) as visit:
        page = visit.page
        text = visible_text(page)
        assert all(t in text for t in zh_titles + en_titles), "the bilingual page lacks titles"

        for name, file, lang, shown, hidden in (("English", "en.html", "en", en_titles, zh_titles),
                                                ("中文", "zh.html", "zh-CN", zh_titles, en_titles)):
            page.get_by_role("link", name=name, exact=True).click()
            page.wait_for_load_state("load")
            assert page.url == issue_url + file
            assert page.evaluate("document.documentElement.lang") == lang
            text = visible_text(page)
            assert [t for t in shown if t not in text] == []
            assert [t for t in hidden if t in text] == [], f"other titles on the {name} page"

        page.get_by_role("link", name="中文 + English", exact=True).click()
        page.wait_for_load_state("load")
        assert page.url == issue_url + "index.html"
        visit.assert_clean()


def links(page: Page) -> list[str]:
    """Every ``<a href>`` of the page, as the browser resolves it."""
    hrefs: list[str] = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    return hrefs


@pytest.mark.slow  # opens each issue page, then each PR page they link to
def test_every_link_of_the_index_and_the_issue_pages_resolves(browser, site):
    with open_page(browser, site, PAGES["index"], WIDTHS["desktop"]) as visit:
        page = visit.page
        from_index = [u for u in links(page) if "/issues/" in urlsplit(u).path]
        assert sorted(set(from_index)) == sorted(
            site.url(f"issues/{week}/index.html") for week in site.weeks), from_index
        # The issues' own files, linked from their pages or not, and what those pages link to.
        to_check = [site.url(f"issues/{week}/{name}") for week in site.weeks for name in
                    ("index.html", "zh.html", "en.html", "email.html", "issue.json")]
        for issue_page in from_index:
            page.goto(issue_page)
            to_check += links(page)
        into_issues = [u for u in to_check if "/issues/" in urlsplit(u).path]
        assert all(u.startswith(site.base_url + "/issues/") for u in into_issues), into_issues
        assert [u for u in into_issues if u.endswith("/")] == []  # they name index.html
        prs = {u for u in to_check if "/pr/" in u}
        items = [item for week in site.weeks for item in site.issue(week)["items"]]
        assert prs == {site.url(f"pr/{item['pr']}/index.html") for item in items}
        assert any("/areas/" in u for u in to_check)
        for pr_page in sorted(prs):  # they link back to issues and to areas: one level more
            page.goto(pr_page)
            to_check += links(page)
        internal = {u.split("#", 1)[0] for u in to_check if u.startswith(site.base_url + "/")}
        statuses = {url: page.request.get(url).status for url in sorted(internal)}
        assert {u: s for u, s in statuses.items() if s != 200} == {}
        visit.assert_clean()


@pytest.mark.parametrize("week", [SAMPLE_WEEK, OLDER_WEEK])
def test_hreflang_alternates_resolve(browser, site, week):
    expected = {"zh-CN": "zh.html", "en": "en.html", "x-default": "index.html"}
    for variant, lang in (("index.html", "zh-CN"), ("zh.html", "zh-CN"), ("en.html", "en")):
        with open_page(browser, site, f"issues/{week}/{variant}", WIDTHS["desktop"]) as visit:
            page = visit.page
            assert page.evaluate("document.documentElement.lang") == lang
            alternates = dict(page.eval_on_selector_all(
                "head link[rel=alternate][hreflang]",
                "els => els.map(e => [e.hreflang, e.href])"))
            assert alternates == {
                tag: site.url(f"issues/{week}/{name}") for tag, name in expected.items()}
            for tag, url in alternates.items():
                response = page.request.get(url)
                assert response.status == 200, url
                if tag != "x-default":
                    assert f'<html lang="{tag}"' in response.text(), url
            visit.assert_clean()


def luminance(rgb: str) -> float:
    """WCAG relative luminance of a computed ``rgb(r, g, b)`` colour."""
    channels = [int(c) / 255 for c in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("name", ["issue", "pr"])
def test_dark_mode_cards_stand_out_and_dividers_stay_dark(browser, site, name):
    with open_page(browser, site, page_key(name, site), WIDTHS["mobile"]) as visit:
        page = visit.page
        page.emulate_media(color_scheme="dark")
        colours = page.evaluate("""() => {
            const style = e => getComputedStyle(e);
            const card = document.querySelector('article.item');
            const divider = document.querySelector('article.item > section + section');
            return {page: style(document.body).backgroundColor,
                    card: style(card).backgroundColor,
                    divider: style(divider).borderTopColor};
        }""")
        assert contrast(colours["card"], colours["page"]) >= 1.2, colours
        assert luminance(colours["divider"]) < 0.1, colours  # a dark line, not a light one
        page.emulate_media(color_scheme="light")
        light = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert light != colours["page"], "the dark scheme did not apply"
        visit.assert_clean()
