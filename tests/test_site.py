"""The site's pages and the publish step, on the local archive (S3 has its own tests)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from support.project import SAMPLE_WEEK
from support.published_site import W47_ENTRIES, build_week

from pipeline.archive import SiteObject
from pipeline.archive.local import LocalArchive
from pipeline.core.site.site import LONG_CACHE, SHORT_CACHE, Site, identifiers
from pipeline.errors import ArchiveError
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish


@pytest.fixture
def older(settings, tmp_path):
    return build_week(settings, tmp_path, "2026-W47", W47_ENTRIES)


def objects(site: Site, built) -> dict[str, SiteObject]:
    return {o.key: o for o in site.issue_objects(built)}


def test_issue_objects_keys_types_and_cache(settings, built):
    found = objects(Site(settings.site), built)
    assert sorted(found) == sorted(f"issues/{SAMPLE_WEEK}/{name}" for name in
                                   ("index.html", "zh.html", "en.html", "email.html",
                                    "issue.json"))
    for key, obj in found.items():
        assert obj.cache_control == LONG_CACHE
        expected = "application/json" if key.endswith(".json") else "text/html"
        assert obj.content_type.startswith(expected) and "charset=utf-8" in obj.content_type
    assert json.loads(found[f"issues/{SAMPLE_WEEK}/issue.json"].data) == built.data


def test_language_variants_hold_their_languages_and_explicit_links(settings, built):
    found = objects(Site(settings.site), built)
    en = found[f"issues/{SAMPLE_WEEK}/en.html"].data.decode()
    zh = found[f"issues/{SAMPLE_WEEK}/zh.html"].data.decode()
    both = found[f"issues/{SAMPLE_WEEK}/index.html"].data.decode()
    for page in (en, zh, both):
        # Every link between pages names its file: the site works on any static host.
        for href in re.findall(r'href="([^"]+)"', page):
            if href.startswith("/"):
                assert re.search(r"\.(html|xml|json)(#.*)?$", href), href
    for item in built.data["items"]:
        assert item["en"]["title"].replace("'", "&#39;") in en
        assert item["zh"]["title"] not in en
        assert item["zh"]["title"] in zh and item["en"]["title"] not in zh
        assert f'href="{item["url"]}"' in both
        # Each item links to its PR page; the ranking rationale stays off public pages.
        assert f'href="/pr/{item["pr"]}/index.html"' in both
        for page in (en, zh, both):
            assert item["why"]["en"].replace("'", "&#39;") not in page
            assert item["why"]["zh"] not in page
    for page in (en, zh, both):
        assert "排序依据" not in page and "Why here" not in page


def test_items_name_their_code_identifiers(settings, built):
    assert [str(c) for c in identifiers("<p><code>a</code> x <code>b&lt;c</code> "
                                        "<code>a</code></p>")] == ["a", "b&lt;c"]
    en = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/en.html"].data.decode()
    assert "Identifiers: <code>SupportsHMA</code>" in en


def footer_lines(email: str) -> list[str]:
    """The text of each paragraph of the email's footer (after its last card)."""
    foot = email[email.index("你收到这封邮件"):]
    return [re.sub(r"<[^>]+>", "", line).strip()
            for line in re.findall(r"<p\b[^>]*>(.*?)</p>", "<p>" + foot, re.S)]


def test_public_email_has_no_personal_link(settings, built):
    """Links needing a reader's token (400 without one) go; archive and "Subscribe here" stay."""
    email = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/email.html"].data.decode()
    assert "%%" not in email and "token=" not in email
    assert "/unsubscribe" not in email and "/preferences" not in email
    app, base = settings.site.app_url, settings.site.base_url
    assert f'href="{app}/subscribe"' in email and f'href="{base}/"' in email
    assert footer_lines(email)[:4] == [
        "你收到这封邮件，是因为订阅了 vLLM PR 周报。 往期存档",
        "这封邮件是别人转发给你的？ 在这里订阅",
        "You receive this because you subscribed to vLLM PR Weekly. Archive",
        "Was this forwarded to you? Subscribe here"]


def test_the_archive_copys_links_to_the_app_answer(tmp_path):
    from support.app_server import free_port, project_settings, request, serve_app

    settings = project_settings(tmp_path, free_port())
    issue = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b").out_dir)
    email = objects(Site(settings.site), issue)[f"issues/{SAMPLE_WEEK}/email.html"].data
    app_links = sorted(set(re.findall(rf'href="({re.escape(settings.site.app_url)}[^"]*)"',
                                      email.decode())))
    with serve_app(settings):
        answers = {url: request("GET", url).status for url in app_links}
    assert answers == {f"{settings.site.app_url}/subscribe": 200}


def test_index_feed_sitemap_from_issue_files(settings, built, older):
    site = Site(settings.site)
    found = {o.key: o for o in site.index_objects([older.issue, built.issue])}
    assert {"404.html", "feed.xml", "index.html", "sitemap.xml", "robots.txt",
            "areas/index.html", "static/card.png"} <= set(found)
    assert all(o.cache_control == SHORT_CACHE for k, o in found.items() if k != "static/card.png")
    assert found["static/card.png"].content_type == "image/png"
    index = found["index.html"].data.decode()
    assert index.index("2026-W48") < index.index("2026-W47")  # newest first
    assert f'action="{settings.site.app_url}/subscribe"' in index
    assert "上周的 PR" in index and "Last week&#39;s PR" in index
    assert found["feed.xml"].content_type.startswith("application/atom+xml")


def test_the_feed_carries_the_latest_issues_only(settings, built):
    import feedparser  # type: ignore[import-untyped]

    from pipeline.core.site.site import FEED_ISSUES

    many = []
    for n in range(1, FEED_ISSUES + 6):
        many.append(replace(built.issue, id=f"2025-W{n:02d}"))
    site = Site(settings.site)
    found = {o.key: o for o in site.index_objects(many)}
    feed = feedparser.parse(found["feed.xml"].data)
    assert len(feed.entries) == FEED_ISSUES
    assert feed.entries[0].link.endswith("/issues/2025-W25/index.html")
    assert found["index.html"].data.decode().count('href="/issues/') >= FEED_ISSUES + 5


def test_no_subscribe_form_without_an_app(settings, built):
    site = Site(replace(settings.site, app_url=""))
    index = site.index_objects([built.issue])[0].data.decode()
    assert "<form" not in index and "/subscribe" not in index
    email = objects(site, built)[f"issues/{SAMPLE_WEEK}/email.html"].data.decode()
    assert "%%" not in email and "/unsubscribe" not in email and "/preferences" not in email
    assert f'href="{settings.site.base_url}/"' in email  # the archive link stays


@pytest.mark.subprocess  # publish ends by running Pagefind (pipeline/stages/search_index.py)
def test_publish_writes_pages_then_index_and_twice_writes_nothing(settings, built, tmp_path):
    archive = LocalArchive(tmp_path / "site")
    first = publish(built, archive, Site(settings.site))
    assert first.written[:5] == [f"issues/{SAMPLE_WEEK}/{n}" for n in
                                 ("index.html", "zh.html", "en.html", "email.html",
                                  "issue.json")]
    rest = [key for key in first.written[5:] if not key.startswith("search/")]
    searched = first.written[5 + len(rest):]
    assert searched and all(key.startswith("search/") for key in searched)  # after the rest
    assert rest[-5:] == ["index.html", "feed.xml", "sitemap.xml", "robots.txt", "404.html"]
    prs = [key for key in rest if key.startswith("pr/")]
    assert prs == [f"pr/{item.pr}/index.html" for item in sorted(built.issue.items,
                                                                 key=lambda i: i.pr)]
    # PR and area pages come before the index, feed and sitemap that list them.
    assert max(rest.index(k) for k in rest if k.startswith(("pr/", "areas/"))) < \
        rest.index("index.html")
    second = publish(built, archive, Site(settings.site))
    assert second.written == [] and second.bytes_written == 0
    # Every page compared and unchanged; the year's search bundle, whose pages did not
    # change, is not even indexed again (only its search page and manifest are compared).
    bundle = [key for key in searched if key.startswith("search/pagefind/")]
    assert bundle and second.unchanged == len(first.written) - len(bundle)


class FailingArchive(LocalArchive):
    """Fails on one key, like a network error half-way through a publish."""

    def __init__(self, root: Path, fail_on: str) -> None:
        super().__init__(root)
        self.fail_on = fail_on

    def write(self, obj: SiteObject) -> bool:
        if obj.key == self.fail_on:
            raise ArchiveError("simulated failure", key=obj.key)
        return super().write(obj)


@pytest.mark.subprocess  # publish runs Pagefind
def test_a_failure_half_way_leaves_the_index_pointing_at_existing_pages(settings, built,
                                                                          older, tmp_path):
    root = tmp_path / "site"
    publish(older, LocalArchive(root), Site(settings.site))
    before = (root / "index.html").read_bytes()
    with pytest.raises(ArchiveError):
        publish(built, FailingArchive(root, f"issues/{SAMPLE_WEEK}/email.html"),
                Site(settings.site))
    assert (root / "index.html").read_bytes() == before
    assert "2026-W48" not in before.decode()


def test_keys_cannot_escape_the_archive(tmp_path):
    archive = LocalArchive(tmp_path / "site")
    for key in ("../outside.html", "/etc/passwd", "issues/../../x", "a//b/../c", "a//b",
                "./x", "x/"):
        with pytest.raises(ArchiveError):
            archive.write(SiteObject(key, b"x", "text/plain", SHORT_CACHE))
    assert not (tmp_path / "outside.html").exists()


def test_the_archive_gets_issue_json_byte_for_byte_as_built(settings, tmp_path):
    """Laid out again, an old file would gain ``"github": null`` and no longer match its hash."""
    from pipeline.core.issue import issue_json
    from pipeline.stages.built import artifact_names

    folder = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "out").out_dir
    data = json.loads((folder / "issue.json").read_bytes())
    for item in data["items"]:
        del item["github"]
    raw = {name: (folder / name).read_bytes() for name in artifact_names()}
    data["content_hash"] = issue_json.content_hash(data, raw)
    (folder / "issue.json").write_bytes(issue_json.dumps(data))

    built = load_built(folder)
    [published] = [o for o in Site(settings.site).issue_objects(built)
                   if o.key.endswith("/issue.json")]
    assert published.data == (folder / "issue.json").read_bytes()
    assert b'"github"' not in published.data


# -- PR pages, area pages, the index headline ------------------------------------

HOSTILE_AREAS = ("../x", "<script>alert(1)</script>", "%%unsubscribe_url%%", "a" * 500,
                 "调度器", "KV Connector", "..", "/etc/passwd", "kv-connector")


def hostile(issue):
    """``issue`` with feed text at its worst: hostile area names and titles with HTML."""
    items = []
    for n, item in enumerate(issue.items):
        en = replace(item.en, title=f"<img src=x onerror=alert({n})> & <b>bold</b>")
        items.append(replace(item, areas=HOSTILE_AREAS if n % 2 == 0 else (HOSTILE_AREAS[n],),
                             en=en))
    return replace(issue, items=tuple(items))


def by_key(site: Site, issues) -> dict[str, SiteObject]:
    return {o.key: o for o in site.index_objects(issues)}


def test_a_pr_reviewed_in_two_weeks_has_one_page_listing_both_newest_first(settings, built,
                                                                           older):
    pr = built.issue.items[0].pr
    again = replace(older.issue, items=(replace(older.issue.items[0], pr=pr),))
    found = by_key(Site(settings.site), [again, built.issue])
    page = found[f"pr/{pr}/index.html"].data.decode()
    new_link = f'href="/issues/2026-W48/index.html#pr-{pr}"'
    old_link = f'href="/issues/2026-W47/index.html#pr-{pr}"'
    assert page.index(new_link) < page.index(old_link)  # newest first
    assert page.count('<article class="item"') == 2
    assert '<section lang="zh-CN">' in page and '<section lang="en">' in page
    assert f'href="{built.issue.items[0].url}"' in page  # the PR on GitHub
    assert built.issue.items[0].why.en not in page and "排序依据" not in page


def test_the_areas_index_links_each_area_with_its_count_of_reviews(settings, built, older):
    tagged = replace(older.issue, items=tuple(replace(i, areas=("rocm",))
                                              for i in older.issue.items))
    areas = by_key(Site(settings.site), [tagged, built.issue])["areas/index.html"].data.decode()
    rocm = [i for i in built.issue.items if "rocm" in i.areas]
    assert 'href="/areas/rocm/index.html">rocm</a>' in areas
    assert f"{len(rocm) + len(tagged.items)} reviews" in areas


def test_an_area_of_many_reviews_is_paged_fifty_a_page_linked_both_ways(settings, built):
    """120 reviews: 50, 50 and 20 a page, linked both ways; the feed holds the newest 50."""
    import feedparser

    from pipeline.core.site.site_pages import AREA_PAGE_SIZE

    many = replace(built.issue, items=tuple(
        replace(built.issue.items[n % len(built.issue.items)], pr=100_000 + n, areas=("rocm",))
        for n in range(120)))
    found = by_key(Site(settings.site), [many])
    base = f"{settings.site.base_url}/areas/rocm"  # canonical: absolute
    here = "/areas/rocm"  # links between pages: from the site's root
    keys = ["areas/rocm/index.html", "areas/rocm/page/2/index.html",
            "areas/rocm/page/3/index.html"]
    assert [k for k in found if k.startswith("areas/rocm/") and k.endswith(".html")] == keys
    assert "areas/rocm/page/4/index.html" not in found and AREA_PAGE_SIZE == 50
    shown = []
    for n, key in enumerate(keys, 1):
        page = found[key].data.decode()
        shown.append([int(m) for m in re.findall(r'href="[^"]*/pr/(\d+)/index.html"', page)])
        own = f"{base}/index.html" if n == 1 else f"{base}/page/{n}/index.html"
        assert f'<link rel="canonical" href="{own}">' in page
        assert f'<span aria-current="page">{n}</span>' in page
        assert ('rel="prev"' in page) is (n > 1) and ('rel="next"' in page) is (n < 3)
        if n > 1:
            before = f"{here}/index.html" if n == 2 else f"{here}/page/{n - 1}/index.html"
            assert f'<a rel="prev" href="{before}">' in page
        if n < 3:
            assert f'<a rel="next" href="{here}/page/{n + 1}/index.html">' in page
        assert "120 reviews" in page  # the count is the area's, on every page
    assert [len(prs) for prs in shown] == [50, 50, 20]
    assert [pr for prs in shown for pr in prs] == [item.pr for item in many.items]  # once each
    feed = feedparser.parse(found["areas/rocm/feed.xml"].data)
    assert len(feed.entries) == 50


def test_hostile_area_names_and_titles_stay_text_and_inside_the_archive(settings, built,
                                                                        tmp_path):
    import feedparser

    from pipeline.archive import check_key

    issue = hostile(built.issue)
    site = Site(settings.site)
    objs = [*site.issue_objects(replace(built, issue=issue)), *site.index_objects([issue])]
    archive = LocalArchive(tmp_path / "site")
    for obj in objs:
        assert check_key(obj.key) == obj.key  # S3 keys pass the same check
        archive.write(obj)
    root = (tmp_path / "site").resolve()
    written = [p for p in root.rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(root) for p in written)
    assert not (tmp_path / "x").exists() and not (tmp_path / "etc").exists()
    slugs = sorted(p.parent.name for p in root.glob("areas/*/index.html"))
    assert "调度器" in slugs and "kv-connector" in slugs and "x" in slugs
    assert all(len(slug) <= 60 and slug not in (".", "..") for slug in slugs)
    for obj in objs:
        if obj.key.endswith((".html", ".xml")) and not obj.key.endswith("email.html"):
            text = obj.data.decode()
            assert "<script" not in text and "<img src=x" not in text, obj.key
            assert "<b>bold</b>" not in text, obj.key
    kv = (root / "areas/kv-connector/index.html").read_text()
    assert "KV Connector / kv-connector" in kv  # names folding to one slug share a page
    cjk = by_key(site, [issue])["areas/调度器/feed.xml"].data
    feed = feedparser.parse(cjk)
    assert not feed.bozo
    assert feed.feed.id == f"{settings.site.base_url}/areas/%E8%B0%83%E5%BA%A6%E5%99%A8/feed.xml"
    assert all("<img" in e.title for e in feed.entries)  # the title, as text


def test_index_headlines_issues_by_number_and_dates_and_lists_every_title(settings, built):
    from pipeline.core.site.site import INDEX_TITLES

    numbered = replace(built.issue, number=3)
    index = by_key(Site(settings.site), [numbered])["index.html"].data.decode()
    assert "第 3 期 · 2026 年 11 月 23 日 – 29 日" in index
    assert "No. 3 · 23–29 Nov 2026" in index
    for item in built.issue.items:
        assert item.zh.title in index
    many = replace(numbered, items=numbered.items * 2)
    big = by_key(Site(settings.site), [many])["index.html"].data.decode()
    rest = len(many.items) - INDEX_TITLES
    assert rest > 0 and f"+{rest} more" in big and f"另有 {rest} 篇" in big
    unnumbered = by_key(Site(settings.site), [built.issue])["index.html"].data.decode()
    assert "No. 0" not in unnumbered and "第 0 期" not in unnumbered


@pytest.mark.parametrize(("start", "end", "zh", "en"), [
    ((2026, 11, 23), (2026, 11, 30), "2026 年 11 月 23 日 – 29 日", "23–29 Nov 2026"),
    ((2026, 11, 30), (2026, 12, 7), "2026 年 11 月 30 日 – 12 月 6 日", "30 Nov – 6 Dec 2026"),
    ((2026, 12, 28), (2027, 1, 4), "2026 年 12 月 28 日 – 2027 年 1 月 3 日",
     "28 Dec 2026 – 3 Jan 2027"),
], ids=["one month", "two months", "two years"])
def test_headline_dates_across_months_and_years(start: tuple[int, int, int],
                                                end: tuple[int, int, int], zh: str, en: str):
    from datetime import UTC, datetime

    from pipeline.core.site.site_pages import headline_dates

    # A week's boundaries: midnight, UTC.
    monday, next_monday = (datetime(*day, tzinfo=UTC) for day in (start, end))
    assert headline_dates(monday, next_monday, "UTC") == {"zh": zh, "en": en}


def test_every_page_names_its_sender_as_the_email_does(settings, built, tmp_path):
    """CAN-SPAM's spirit on the web: publisher and postal address at every page's foot, escaped."""
    from pipeline.config import load
    from pipeline.core.email.render import Footer

    configured = tmp_path / "sender.toml"
    configured.write_text('[delivery]\npublisher = "vLLM 周报 <b>team</b>"\n'
                          'postal_address = """1 Example Road\nShanghai"""\n', encoding="utf-8")
    footer = Footer.configured(load(configured, {}).delivery, load(configured, {}).site)
    site = Site(settings.site, footer=footer)
    from pipeline.core.site.search import search_pages

    pages = {**{o.key: o.data for o in site.issue_objects(built)},
             **{o.key: o.data for o in site.index_objects([built.issue])},
             **{o.key: o.data for o in search_pages(site, ["2026"])}}
    html = {key: data.decode() for key, data in pages.items()
            if key.endswith(".html") and key != f"issues/{SAMPLE_WEEK}/email.html"}
    assert {"index.html", "404.html", "areas/index.html", f"issues/{SAMPLE_WEEK}/en.html",
            "search/index.html", "search/en.html"} <= set(html) \
        and any(k.startswith("pr/") for k in html)
    for key, page in html.items():
        foot = page[page.index("<footer>"):]
        assert "vLLM 周报 &lt;b&gt;team&lt;/b&gt;" in foot, key
        assert "1 Example Road Shanghai" in foot and "Sent by" in foot, key
    # Without a footer (a Site made for a test or a tool) the pages name no sender.
    bare = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/en.html"].data.decode()
    assert "Sent by" not in bare


def test_the_public_issue_json_does_not_name_the_prs_the_editor_hid(settings, tmp_path):
    folder = settings.resolve(settings.paths.editorial_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SAMPLE_WEEK}.toml").write_text("[56317]\nhide = true\n", encoding="utf-8")
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b").out_dir)
    assert built.issue.hidden == (56317,)
    public = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/issue.json"].data
    data = json.loads(public)
    assert "hidden" not in data and b"56317" not in public
    assert data["content_hash"] == built.content_hash


@pytest.mark.parametrize(("base_url", "root"), [("http://127.0.0.1:8000", ""),
                                                ("https://news.example.org/weekly/", "/weekly")])
def test_pages_link_from_the_sites_root_and_feeds_and_sitemap_stay_absolute(
        settings, built, older, base_url, root):
    """Root paths let a page served on another port or host reach its neighbours."""
    from urllib.parse import urlsplit

    site = Site(replace(settings.site, base_url=base_url))
    base = base_url.rstrip("/")
    origin = base[:len(base) - len(urlsplit(base).path)]
    found = {o.key: o.data.decode() for o in
             [*site.issue_objects(built), *site.index_objects([older.issue, built.issue])]
             if not o.key.endswith(".png")}
    absolute_only = re.compile(r'<link rel="(?:canonical|alternate)" hreflang="[^"]+" href="|'
                               r'<link rel="canonical" href="')
    for key, page in found.items():
        if not key.endswith(".html") or key.endswith("email.html"):
            continue
        for tag in re.findall(r"<[^>]+>", page):
            urls = re.findall(r'(?:href|src|action)="([^"]+)"', tag)
            for url in urls:
                if url.startswith(settings.site.app_url + "/"):
                    continue  # the subscription app is a site of its own
                if absolute_only.match(tag):
                    assert url.startswith(base + "/"), (key, tag)
                elif url.startswith(("/", "#")):
                    assert url.startswith(f"{root}/") or url.startswith("#"), (key, url)
                else:  # GitHub, and the og:image / share card in <meta>, never a page link
                    assert not url.startswith(origin), (key, url)
        assert f'<link rel="canonical" href="{base}/' in page or key == "404.html", key
        search_page = key.rsplit("/", 1)[-1] if key.startswith("issues/") else "index.html"
        assert f'href="{root}/search/{search_page}"' in page, key
        assert f'<meta property="og:url" content="{base}/' in page, key
    issue_page = found[f"issues/{SAMPLE_WEEK}/index.html"]
    assert f'href="{root}/issues/{SAMPLE_WEEK}/en.html"' in issue_page
    for key in ("feed.xml", "sitemap.xml", *(k for k in found if k.endswith("feed.xml"))):
        links = re.findall(r'(?:href="|<loc>|<id>)([^"<]+)', found[key])
        assert links and all(link.startswith(base + "/") for link in links), (key, links)
    assert f"Sitemap: {base}/sitemap.xml" in found["robots.txt"]
