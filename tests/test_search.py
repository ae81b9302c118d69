"""The archive's search (pipeline/core/search.py, pipeline/stages/search_index.py): which pages
are indexed, the bundle as site objects, and a real Pagefind run at the end of ``publish``.

Pagefind's fragments (one per indexed page: its URL, text and anchors) are gzip streams
behind a ``pagefind_dcd`` signature; :func:`fragments` reads them back, so these tests check
what a reader's browser will search, not only that files exist.
"""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLE_WEEK, Entry, atom

from pipeline.archive import SiteObject
from pipeline.archive.local import LocalArchive
from pipeline.core import search
from pipeline.core.site import SHORT_CACHE, Site
from pipeline.errors import RenderError
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish
from pipeline.stages.search_index import run_pagefind, search_objects

SIGNATURE = b"pagefind_dcd"


def fragments(root: Path) -> dict[str, dict[str, Any]]:
    """Each indexed page's fragment, by the URL a result links to."""
    found = {}
    for path in (root / search.BUNDLE / "fragment").iterdir():
        data = gzip.decompress(path.read_bytes())
        assert data.startswith(SIGNATURE)
        fragment = json.loads(data[len(SIGNATURE):])
        fragment["text"] = fragment["content"].replace("\u200b", "")  # word breaks it marks
        found[fragment["url"]] = fragment
    return found


@pytest.fixture
def built(settings, tmp_path):
    return load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b48").out_dir)


def built_from(settings, tmp_path: Path, week: str, entries: list[Entry]):
    feed = tmp_path / f"{week}.atom"
    feed.write_bytes(atom(entries))
    return load_built(build(settings, week_id=week, feeds=[str(feed)],
                            out=tmp_path / f"b-{week}").out_dir)


# -- the pure part ------------------------------------------------------------------------------


def test_pages_to_index_are_each_issues_bilingual_page_only(built):
    older = replace(built.issue, id="2026-W47")
    keys = search.pages_to_index([built.issue, older, built.issue])
    # Not zh.html / en.html nor the PR pages: they hold the same reviews again, and every
    # result would come twice.
    assert keys == ["issues/2026-W47/index.html", f"issues/{SAMPLE_WEEK}/index.html"]


def test_anchor_reviews_gives_each_reviews_first_heading_its_id():
    page = ('<main><h2 class="tier-head">必读</h2>'
            '<article class="item" id="pr-7"><p>x</p><h2><a href="u">标题</a></h2>'
            '<h2>Title</h2></article>'
            '<article class="item" id="pr-8"><p>no heading here</p></article>'
            '<article class="item" id="pr-9"><h2 id="kept">T</h2></article>'
            '<article id="pr-x"><h2>not a review</h2></article></main>')
    out = search.anchor_reviews(page)
    assert '<h2 id="pr-7"><a href="u">标题</a></h2><h2>Title</h2>' in out
    # An article without a heading lends its id to no other article's heading.
    assert out.count('id="pr-8"') == 1 and out.count('id="pr-9"') == 1
    assert '<h2 id="kept">' in out and "<h2>not a review</h2>" in out
    assert search.anchor_reviews(out) == out  # idempotent


def test_bundle_objects_types_caches_and_order():
    files = {name: name.encode() for name in (
        "pagefind-entry.json", "pagefind.js", "pagefind-worker.js", "pagefind-ui.js",
        "pagefind-ui.css", "pagefind-highlight.js", "pagefind-modular-ui.js",
        "pagefind-component-ui.css", "wasm.unknown.pagefind", "pagefind.zh_0123abcd.pf_meta",
        "index/zh_1.pf_index", "fragment/zh_2.pf_fragment", "playground/index.html")}
    objects = {o.key.removeprefix(search.BUNDLE): o for o in search.bundle_objects(files)}
    assert set(objects) == {"pagefind-entry.json", "pagefind.js", "pagefind-worker.js",
                            "pagefind-ui.js", "pagefind-ui.css", "wasm.unknown.pagefind",
                            "pagefind.zh_0123abcd.pf_meta", "index/zh_1.pf_index",
                            "fragment/zh_2.pf_fragment"}
    assert list(objects)[-1] == "pagefind-entry.json"  # names the rest: written last
    assert objects["pagefind.js"].content_type == "text/javascript; charset=utf-8"
    assert objects["pagefind-ui.css"].content_type == "text/css; charset=utf-8"
    assert objects["pagefind-entry.json"].content_type == "application/json; charset=utf-8"
    for name in ("wasm.unknown.pagefind", "index/zh_1.pf_index", "fragment/zh_2.pf_fragment",
                 "pagefind.zh_0123abcd.pf_meta"):
        assert objects[name].content_type == "application/octet-stream"
    for name in ("index/zh_1.pf_index", "fragment/zh_2.pf_fragment",
                 "pagefind.zh_0123abcd.pf_meta"):
        assert objects[name].cache_control == search.IMMUTABLE_CACHE
    for name in ("pagefind-entry.json", "pagefind.js", "wasm.unknown.pagefind"):
        assert objects[name].cache_control == SHORT_CACHE


def test_search_page_loads_the_bundle_and_says_what_to_do_without_javascript(settings):
    page = search.search_page(Site(settings.site))
    assert page.key == "search/index.html" and page.content_type.startswith("text/html")
    html = page.data.decode()
    base = settings.site.base_url.rstrip("/")
    assert f'src="{base}/search/pagefind/pagefind-ui.js"' in html
    noscript = html[html.index("<noscript>"):html.index("</noscript>")]
    assert f'href="{base}/index.html"' in noscript
    assert "需要 JavaScript" in noscript and "needs JavaScript" in noscript


def test_every_site_page_links_to_the_search(settings, built):
    site = Site(settings.site)
    pages = [*site.issue_objects(built), *site.index_objects([built.issue])]
    base = settings.site.base_url.rstrip("/")
    for obj in pages:
        if obj.key.endswith(".html") and not obj.key.endswith("email.html"):
            assert f'href="{base}/search/index.html"' in obj.data.decode(), obj.key


# -- Pagefind itself ----------------------------------------------------------------------------


@pytest.mark.subprocess
def test_publish_indexes_every_issue_the_archive_holds(settings, built, tmp_path):
    older = built_from(settings, tmp_path, "2026-W47", [
        Entry(pr=50001, title="上周的调度器评审", body="值得一读，调度器预分配。",
              published="2026-11-17T10:00:00+08:00", lang="zh-CN"),
        Entry(pr=50001, title="Last week's scheduler review", body="Skim: preallocation.",
              published="2026-11-17T12:00:00+08:00", lang="en", id="en-50001")])
    root = tmp_path / "site"
    archive = LocalArchive(root)
    publish(older, archive, Site(settings.site))
    shutil.rmtree(older.folder)  # a fresh runner: the older issue is only in the archive
    report = publish(built, archive, Site(settings.site))
    assert "search/pagefind/pagefind-entry.json" in report.written
    found = fragments(root)
    assert {"/issues/2026-W47/index.html", f"/issues/{SAMPLE_WEEK}/index.html"} <= set(found)
    this_week = found[f"/issues/{SAMPLE_WEEK}/index.html"]
    anchors = {a["id"] for a in this_week["anchors"] if a["element"] == "h2"}
    assert anchors == {f"pr-{item.pr}" for item in built.issue.items}
    # Only <main> is indexed: the header's words are on every page and would match them all.
    assert "往期存档" not in this_week["text"]
    entry = json.loads((root / "search/pagefind/pagefind-entry.json").read_text())
    assert list(entry["languages"]) == ["zh"]  # one index holds both languages
    # The published pages are not the copies Pagefind read: no heading id added there.
    assert 'h2 id="pr-' not in (root / f"issues/{SAMPLE_WEEK}/index.html").read_text()


def test_stale_files_are_the_hashed_ones_neither_index_names():
    b = search.BUNDLE
    present = [f"{b}pagefind-entry.json", f"{b}pagefind.js", f"{b}pagefind.aa.pf_meta",
               f"{b}pagefind.bb.pf_meta", f"{b}pagefind.cc.pf_meta", f"{b}index/zh_1.pf_index",
               f"{b}index/zh_2.pf_index", f"{b}fragment/zh_3.pf_fragment", "index.html"]
    live = [f"{b}pagefind-entry.json", f"{b}pagefind.js", f"{b}pagefind.cc.pf_meta",
            f"{b}index/zh_2.pf_index"]
    previous = f"{b}pagefind.bb.pf_meta\n{b}fragment/zh_3.pf_fragment\n".encode()
    assert search.stale_files(present, live, previous) == [f"{b}index/zh_1.pf_index",
                                                          f"{b}pagefind.aa.pf_meta"]
    assert search.stale_files(present, live, None) == []  # no list of the last index: keep


@pytest.mark.subprocess
def test_old_index_files_go_once_two_newer_indexes_name_none_of_them(settings, built,
                                                                      tmp_path):
    """Each publish writes a new index; the files only the index before last named are
    deleted (after the new entry file is in place), so the search files stop growing and a
    reader of the previous index still finds its chunks."""
    def week(n: int):
        day = f"2026-11-{3 + 7 * (n - 45):02d}T10:00:00+08:00"
        return built_from(settings, tmp_path, f"2026-W{n}", [
            Entry(pr=40000 + n, title=f"第 {n} 周", body=f"值得一读，第 {n} 周的评审。",
                  published=day, lang="zh-CN"),
            Entry(pr=40000 + n, title=f"Week {n}", body=f"Skim: week {n}.", published=day,
                  lang="en", id=f"en-{n}")])

    root = tmp_path / "site"
    archive = LocalArchive(root)

    def listed() -> set[str]:
        """The bundle's files the last publish wrote down as its index."""
        return set((root / search.MANIFEST).read_text().splitlines())

    assert publish(week(45), archive, Site(settings.site)).removed == 0
    first = listed()
    assert publish(week(46), archive, Site(settings.site)).removed == 0
    second = listed()
    assert first <= set(archive.keys(search.BUNDLE))  # kept for readers of the first
    third = publish(built, archive, Site(settings.site))
    now = set(archive.keys(search.BUNDLE))
    gone = first - second - listed()
    assert gone and any(".pf_" in key for key in gone)  # a whole index's chunks
    assert third.removed == len(gone) and not (gone & now)
    assert second | listed() <= now  # the live index whole, the one before it too
    assert {"/issues/2026-W45/index.html", f"/issues/{SAMPLE_WEEK}/index.html"} <= \
        set(fragments(root))


@pytest.mark.subprocess
def test_the_archives_pr_pages_are_not_indexed_twice(settings, built, tmp_path):
    root = tmp_path / "site"
    publish(built, LocalArchive(root), Site(settings.site))
    assert (root / f"pr/{built.issue.items[0].pr}/index.html").is_file()
    assert sorted(fragments(root)) == [f"/issues/{SAMPLE_WEEK}/index.html"]


@pytest.mark.subprocess
def test_a_second_publish_of_the_same_archive_writes_no_search_file(settings, built, tmp_path):
    archive = LocalArchive(tmp_path / "site")
    first = publish(built, archive, Site(settings.site))
    search_keys = [key for key in first.written if key.startswith("search/")]
    assert len(search_keys) >= 8
    again = publish(built, LocalArchive(tmp_path / "site"), Site(settings.site))
    assert again.written == []


@pytest.mark.subprocess
def test_hostile_reviews_are_indexed_as_text(settings, tmp_path):
    hostile = ("<script>window.pwned=1</script><img src=x onerror=alert(1)> 毒药评审 "
               "%%unsubscribe_url%% \u202eevil\u202c " + "长" * 500 + " " + "x" * 500)
    issue = built_from(settings, tmp_path, SAMPLE_WEEK, [
        Entry(pr=60001, title="毒药 <script>alert(1)</script>", body="值得精读：" + hostile,
              lang="zh-CN"),
        Entry(pr=60001, title="Poison <img src=x onerror=alert(1)>", body="Must read: "
              + hostile, lang="en", id="en-60001")])
    root = tmp_path / "site"
    publish(issue, LocalArchive(root), Site(settings.site))
    (fragment,) = fragments(root).values()
    # The page shows the markup as text, so the index holds it as text: pagefind.js escapes
    # < and > before it builds an excerpt (tests/test_search_browser.py runs it in Chromium).
    assert "毒药评审" in fragment["text"] and "window.pwned=1" in fragment["text"]
    assert {a["id"] for a in fragment["anchors"] if a["element"] == "h2"} == {"pr-60001"}


@pytest.mark.subprocess
@pytest.mark.subprocess
def test_a_page_pagefind_would_skip_is_a_render_error(settings, built, tmp_path):
    archive = LocalArchive(tmp_path / "site")
    publish(built, archive, Site(settings.site))
    older = replace(built.issue, id="2026-W47")
    archive.write(SiteObject("issues/2026-W47/index.html",
                             b"<html><body><p>no main</p></body></html>", "text/html",
                             SHORT_CACHE))
    with pytest.raises(RenderError, match=r"indexed 1 of 2 pages: each needs a <main>"):
        search_objects(archive, Site(settings.site), [built.issue, older])


def test_page_count_reads_the_entry_file():
    entry = json.dumps({"languages": {"zh": {"page_count": 3}, "en": {"page_count": 2}}})
    assert search.page_count({search.ENTRY: entry.encode()}) == 5
    assert search.page_count({}) == 0 and search.page_count({search.ENTRY: b"[]"}) == 0


@pytest.mark.subprocess
def test_a_missing_pagefind_is_one_render_error(tmp_path):
    with pytest.raises(RenderError, match="cannot run Pagefind"):
        run_pagefind({"a/index.html": "<p>x</p>"}, tmp_path / "no-such-binary")


@pytest.mark.subprocess
def test_a_pagefind_that_exits_non_zero_is_named(tmp_path):
    with pytest.raises(RenderError, match="Pagefind exited 1"):
        run_pagefind({"a/index.html": "<p>x</p>"}, Path(shutil.which("false") or "/bin/false"))


@pytest.mark.subprocess
def test_a_broken_search_index_publishes_the_pages_and_says_why(settings, built, tmp_path,
                                                                monkeypatch):
    import pipeline.stages.search_index as search_index

    monkeypatch.setattr(search_index, "pagefind_executable",
                        lambda: Path(shutil.which("false") or "/bin/false"))
    root = tmp_path / "site"
    report = publish(built, LocalArchive(root), Site(settings.site))
    assert "Pagefind exited 1" in report.search_problem
    assert (root / "index.html").is_file() and (root / f"issues/{SAMPLE_WEEK}/index.html").is_file()
    assert not any(key.startswith("search/") for key in report.written)
    assert report.areas == tuple(sorted({a for item in built.issue.items for a in item.areas}))


# -- S3 -----------------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_publish_to_s3_stores_the_search_files_with_their_headers(moto_server, settings, built):
    from pipeline.archive.s3 import S3Archive

    client = moto_server.client("s3")
    client.create_bucket(Bucket="weekly-archive")
    with S3Archive("weekly-archive", "weekly/") as archive:
        report = publish(built, archive, Site(settings.site))
    assert search.MANIFEST in report.written  # the list of this index's files
    keys = [key for key in report.written
            if key.startswith("search/") and key != search.MANIFEST]
    heads = {key: client.head_object(Bucket="weekly-archive", Key="weekly/" + key)
             for key in keys}
    expected = {o.key: o for o in search.bundle_objects(
        {key.removeprefix(search.BUNDLE): b"" for key in keys if key != search.SEARCH_PAGE})}
    assert search.SEARCH_PAGE in heads and len(expected) == len(keys) - 1
    assert heads[search.SEARCH_PAGE]["ContentType"] == "text/html; charset=utf-8"
    for key, obj in expected.items():
        assert (heads[key]["ContentType"], heads[key]["CacheControl"]) == (
            obj.content_type, obj.cache_control), key
    wasm = next(key for key in keys if key.endswith(".pagefind"))
    assert heads[wasm]["ContentType"] == "application/octet-stream"
    assert heads["search/pagefind/pagefind-ui.js"]["ContentType"].startswith("text/javascript")
    # The index a browser reads from the bucket is the one written: its entry names its meta.
    entry = json.loads(client.get_object(Bucket="weekly-archive",
                                         Key="weekly/search/pagefind/pagefind-entry.json")
                       ["Body"].read())
    meta = f"search/pagefind/pagefind.{entry['languages']['zh']['hash']}.pf_meta"
    assert meta in heads
