"""The archive's search (pipeline/core/site/search.py, words.py, pipeline/stages/search_index.py).

:func:`fragments` reads back Pagefind's fragments (gzip streams behind a ``pagefind_dcd``
signature), so these tests check what a reader's browser will search, not only that files
exist.
"""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.feeds import Entry
from support.project import SAMPLE_WEEK
from support.published_site import W47_ENTRIES, build_week

from pipeline.archive import SiteObject
from pipeline.archive.local import LocalArchive
from pipeline.core.site import search, words
from pipeline.core.site.site import SHORT_CACHE, Site
from pipeline.errors import RenderError
from pipeline.stages.publish import publish
from pipeline.stages.search_index import run_pagefind

SIGNATURE = b"pagefind_dcd"


def fragments(root: Path, year: str = "*") -> dict[str, dict[str, Any]]:
    """Each indexed record's fragment (of every year's bundle, or of ``year``'s), by its
    URL (``/reviews/<week>/<pr>.html``)."""
    found = {}
    for path in (root / search.BUNDLE).glob(f"{year}/fragment/*"):
        data = gzip.decompress(path.read_bytes())
        assert data.startswith(SIGNATURE)
        fragment = json.loads(data[len(SIGNATURE):])
        found[fragment["url"]] = fragment
    return found


# -- the pure part ------------------------------------------------------------------------------


def record_keys(issue) -> list[str]:
    return [f"reviews/{issue.id}/{item.pr}.html" for item in issue.items]


def test_records_are_one_a_review_by_year(settings, built):
    site = Site(settings.site)
    older, oldest = replace(built.issue, id="2026-W47"), replace(built.issue, id="2025-W01")
    odd = [replace(built.issue, id=bad)
           for bad in ("../2026-W01", "2026-W01/..", "x-W01", "٢٠٢٦-W01")]  # Arabic digits
    years = search.records(site, [built.issue, older, built.issue, oldest, *odd])
    assert list(years) == ["2025", "2026"]
    assert list(years["2025"]) == record_keys(oldest)
    assert list(years["2026"]) == record_keys(older) + record_keys(built.issue)


def test_a_record_holds_its_own_review_whole_and_no_other(settings, built):
    """The next review's tag line sits between the two on the page; this record must not hold it."""
    records = search.records(Site(settings.site), [built.issue])["2026"]
    items = built.issue.items
    for item, following in itertools.pairwise(items):
        text = words.html_text(records[f"reviews/{built.issue.id}/{item.pr}.html"])
        assert f"#{item.pr}" in text and f"#{following.pr}" not in text
        assert f"#{item.pr} · {' · '.join(item.areas)}" in text  # its own tag line
        for lang in ("zh", "en"):
            body = getattr(item, lang)
            assert body is not None and body.title.replace("`", "") in text.replace("`", "")


def test_chinese_is_cut_into_words_between_the_tags_only():
    html = ('<p title="内核约束">并入Triton内核，保持BF16舍入边界</p>'
            '<span data-pagefind-meta="title_zh:锁内快照"></span><p>读_remote_agents加锁</p>')
    cut = words.segment_html(html)
    assert cut.startswith('<p title="内核约束">')  # attributes as they were
    assert 'data-pagefind-meta="title_zh:锁内快照"' in cut
    assert words.html_text(cut).split() == [
        "并入", "Triton", "内核", "，", "保持", "BF16", "舍入", "边界", "读", "_remote_agents",
        "加锁"]
    # The words a reader types: 内核 is one word, 锁内 another; 核对 is not inside 内核.
    assert words.cut("内核约束耦合") == ["内核", "约束", "耦合"]
    assert "内" not in words.cut("锁内快照") and "核" not in words.cut("阅读时建议重点核对两点")


def test_a_years_words_hold_each_word_whole_and_its_parts():
    found = words.indexed_words([words.segment_html(
        "<h1>读 _remote_agents 加锁</h1><p>Scheduler.schedule kv-connector Qwen4Exp Café</p>")])
    assert {"remoteagents", "remote", "agents", "schedulerschedule", "scheduler", "schedule",
            "kvconnector", "kv", "connector", "qwen4exp", "qwen", "exp", "cafe", "读",
            "加锁"} <= found
    assert "" not in found and not any(char.isupper() for word in found for char in word)
    listed = words.vocabulary(["b", "a", "加锁", "a"])
    assert listed == '["a","b","加锁"]\n'.encode()


def test_pages_digest_changes_with_a_page_a_key_or_the_tool_only():
    pages = {"issues/2026-W47/index.html": "<main>a</main>", "issues/2026-W48/index.html": "b"}
    digest = search.pages_digest(pages, "pagefind 1")
    assert search.pages_digest(dict(reversed(pages.items())), "pagefind 1") == digest
    assert search.pages_digest({**pages, "issues/2026-W48/index.html": "c"}, "pagefind 1") \
        != digest
    assert search.pages_digest(pages, "pagefind 2") != digest
    # Where one page ends and the next begins is part of the digest.
    assert search.pages_digest({"a": "bc", "d": ""}, "t") != search.pages_digest(
        {"a": "b", "cd": ""}, "t")


def test_manifest_round_trips_and_an_unreadable_one_is_none():
    manifest = search.Manifest({"2026": search.YearIndex("d1", ("search/pagefind/2026/a",)),
                                "2025": search.YearIndex("d0", ("search/pagefind/2025/b",))})
    obj = manifest.to_object()
    assert obj.key == search.MANIFEST and obj.content_type.startswith("application/json")
    assert search.Manifest.parse(obj.data) == manifest
    assert manifest.files() == {"search/pagefind/2026/a", "search/pagefind/2025/b"}
    for torn in (obj.data[:-9], b"[]", b'{"years": {"2026": {"digest": "d"}}}', b"\xff",
                 b"[" * 200_000):  # nested past the parser's recursion limit
        assert search.Manifest.parse(torn) is None, torn
    legacy = search.Manifest.from_listing(b"search/pagefind/x.pf_meta\nsearch/pagefind/y.js\n")
    assert legacy.files() == {"search/pagefind/x.pf_meta", "search/pagefind/y.js"}


def test_bundle_objects_types_caches_and_order():
    files = {name: name.encode() for name in (
        "pagefind-entry.json", "pagefind.js", "pagefind-worker.js", "pagefind-ui.js",
        "pagefind-ui.css", "pagefind-highlight.js", "pagefind-modular-ui.js",
        "pagefind-component-ui.css", "wasm.unknown.pagefind", "pagefind.zh_0123abcd.pf_meta",
        "index/zh_1.pf_index", "fragment/zh_2.pf_fragment", "playground/index.html",
        search.WORDS, "x.css")}
    prefix = search.bundle_prefix("2026")
    objects = {o.key.removeprefix(prefix): o for o in search.bundle_objects(files, prefix)}
    # Not Pagefind's UIs: the search page shows the results itself.
    assert set(objects) == {"pagefind-entry.json", "pagefind.js", "pagefind-worker.js",
                            "wasm.unknown.pagefind", "pagefind.zh_0123abcd.pf_meta",
                            "index/zh_1.pf_index", "fragment/zh_2.pf_fragment", search.WORDS,
                            "x.css"}
    assert list(objects)[-1] == "pagefind-entry.json"  # names the rest: written last
    assert objects["pagefind.js"].content_type == "text/javascript; charset=utf-8"
    assert objects["x.css"].content_type == "text/css; charset=utf-8"
    assert objects["pagefind-entry.json"].content_type == "application/json; charset=utf-8"
    assert objects[search.WORDS].content_type == "application/json; charset=utf-8"
    assert objects[search.WORDS].cache_control == SHORT_CACHE
    for name in ("wasm.unknown.pagefind", "index/zh_1.pf_index", "fragment/zh_2.pf_fragment",
                 "pagefind.zh_0123abcd.pf_meta"):
        assert objects[name].content_type == "application/octet-stream"
    for name in ("index/zh_1.pf_index", "fragment/zh_2.pf_fragment",
                 "pagefind.zh_0123abcd.pf_meta"):
        assert objects[name].cache_control == search.IMMUTABLE_CACHE
    for name in ("pagefind-entry.json", "pagefind.js", "wasm.unknown.pagefind"):
        assert objects[name].cache_control == SHORT_CACHE


def test_search_pages_load_the_newest_bundle_merge_the_others_and_say_what_to_do_without_js(
        settings):
    pages = {page.key: page for page in search.search_pages(Site(settings.site),
                                                            ["2024", "2026", "2025"])}
    assert list(pages) == ["search/index.html", "search/zh.html", "search/en.html"]
    base = settings.site.base_url.rstrip("/")
    for key, page in pages.items():
        assert page.content_type.startswith("text/html")
        html = page.data.decode()
        assert 'var YEARS = ["2026", "2025", "2024"];' in html
        # From the site's root, not [site] base_url: search loads on whatever port serves it.
        assert ('var BUNDLES = ["/search/pagefind/2026/", "/search/pagefind/2025/", '
                '"/search/pagefind/2024/"];') in html
        assert 'var LINK = "/issues/";' in html
        noscript = html[html.index("<noscript>"):html.index("</noscript>")]
        assert 'href="/index.html"' in noscript
        variant = key.removeprefix("search/")
        assert f'var VARIANT = "{variant}";' in html  # results link to this variant's pages
        assert f'<link rel="canonical" href="{base}/{key}">' in html
    # Each speaks its languages only, the bilingual one both.
    assert '<html lang="en">' in pages["search/en.html"].data.decode()
    for key, says in (("search/index.html", ("需要 JavaScript", "needs JavaScript")),
                      ("search/zh.html", ("需要 JavaScript",)),
                      ("search/en.html", ("needs JavaScript",))):
        html = pages[key].data.decode()
        assert all(text in html for text in says), key
        assert ("需要 JavaScript" in html) == ("需要 JavaScript" in says), key
        assert ("needs JavaScript" in html) == ("needs JavaScript" in says), key
    with pytest.raises(RenderError, match="no year"):
        search.search_pages(Site(settings.site), [])


# -- Pagefind itself ----------------------------------------------------------------------------


@pytest.mark.subprocess
def test_publish_indexes_and_lists_every_issue_the_archive_holds(settings, built, tmp_path):
    older = build_week(settings, tmp_path, "2026-W47", W47_ENTRIES)
    root = tmp_path / "site"
    archive = LocalArchive(root)
    publish(older, archive, Site(settings.site))
    shutil.rmtree(older.folder)  # a fresh runner: the older issue is only in the archive
    report = publish(built, archive, Site(settings.site))
    index = (root / "index.html").read_text()  # the index too is rebuilt from the archive
    assert "2026-W47" in index and "2026-W48" in index
    assert archive.list_issues() == ["2026-W47", "2026-W48"]
    assert "search/pagefind/2026/pagefind-entry.json" in report.written
    found = fragments(root)
    assert set(found) == {"/reviews/2026-W47/50001.html",
                          *(f"/{key}" for key in record_keys(built.issue))}
    for item in built.issue.items:  # each review a record, which names what a result shows
        fragment = found[f"/reviews/{SAMPLE_WEEK}/{item.pr}.html"]
        assert fragment["filters"] == {"year": ["2026"]}
        meta = fragment["meta"]
        assert (meta["week"], meta["pr"]) == (SAMPLE_WEEK, str(item.pr))
        assert meta["title_zh"] == item.zh.title.replace("`", "")
        assert meta["title_en"] == item.en.title.replace("`", "")
        assert meta["issue_en"].endswith("Nov 2026")
        assert fragment["content"].startswith(f"#{item.pr} · {' · '.join(item.areas)}")
    entry = json.loads((root / "search/pagefind/2026/pagefind-entry.json").read_text())
    assert list(entry["languages"]) == ["und"]  # one index, both languages, no stemming
    vocabulary = json.loads((root / "search/pagefind/2026" / search.WORDS).read_text())
    assert {"内核", "nixl", "remote", "agents", "50001"} <= set(vocabulary)
    assert vocabulary == sorted(vocabulary)
    # Nothing is published for the records: they are Pagefind's only.
    assert not (root / "reviews").exists()


def test_stale_files_are_the_bundle_files_neither_index_names():
    b = search.BUNDLE
    present = [f"{b}2026/pagefind-entry.json", f"{b}2026/pagefind.js",
               f"{b}2026/pagefind.aa.pf_meta", f"{b}2026/pagefind.bb.pf_meta",
               f"{b}2026/pagefind.cc.pf_meta", f"{b}2026/index/zh_1.pf_index",
               f"{b}2026/index/zh_2.pf_index", f"{b}2026/fragment/zh_3.pf_fragment",
               f"{b}pagefind.js", f"{b}pagefind.dd.pf_meta", "index.html", search.MANIFEST]
    live = [f"{b}2026/pagefind-entry.json", f"{b}2026/pagefind.js",
            f"{b}2026/pagefind.cc.pf_meta", f"{b}2026/index/zh_2.pf_index"]
    previous = search.Manifest({"2026": search.YearIndex("d", (
        f"{b}2026/pagefind.bb.pf_meta", f"{b}2026/fragment/zh_3.pf_fragment"))},
        legacy=frozenset({f"{b}pagefind.js"}))
    # The flat bundle of before years goes too, once no index names it; never a page.
    assert search.stale_files(present, live, previous) == [
        f"{b}2026/index/zh_1.pf_index", f"{b}2026/pagefind.aa.pf_meta", f"{b}pagefind.dd.pf_meta"]
    assert search.stale_files(present, live, None) == []  # no list of the last index: keep


def week_of(settings, tmp_path: Path, week: str):
    """A one-PR issue of ``week`` (its Tuesday), reviewed in Chinese and in English."""
    from datetime import timedelta

    from pipeline.week import iso_monday

    day = f"{iso_monday(week) + timedelta(days=1)}T10:00:00+08:00"
    n = int(week.replace("-W", ""))
    return build_week(settings, tmp_path, week, [
        Entry(pr=n, title=f"{week} 周", body=f"值得一读，{week} 周的评审。", published=day,
              lang="zh-CN"),
        Entry(pr=n, title=f"Week {week}", body=f"Skim: week {week}.", published=day,
              lang="en", id=f"en-{n}")])


@pytest.mark.subprocess
def test_old_index_files_go_once_two_newer_indexes_name_none_of_them(settings, built,
                                                                      tmp_path):
    """Search files stop growing, and a reader of the previous index still finds its chunks."""
    root = tmp_path / "site"
    archive = LocalArchive(root)

    def listed() -> set[str]:
        """The bundle's files the last publish wrote down as its index."""
        manifest = search.Manifest.parse((root / search.MANIFEST).read_bytes())
        assert manifest is not None
        return manifest.files()

    assert publish(week_of(settings, tmp_path, "2026-W45"), archive, Site(settings.site)
                   ).removed == 0
    first = listed()
    assert publish(week_of(settings, tmp_path, "2026-W46"), archive, Site(settings.site)
                   ).removed == 0
    second = listed()
    assert first <= set(archive.keys(search.BUNDLE))  # kept for readers of the first
    third = publish(built, archive, Site(settings.site))
    now = set(archive.keys(search.BUNDLE))
    gone = first - second - listed()
    assert gone and any(".pf_" in key for key in gone)  # a whole index's chunks
    assert third.removed == len(gone) and not (gone & now)
    assert second | listed() <= now  # the live index whole, the one before it too
    assert {"/reviews/2026-W45/202645.html",
            *(f"/{key}" for key in record_keys(built.issue))} <= set(fragments(root))


@pytest.mark.subprocess
def test_a_weekly_publish_indexes_only_the_year_that_changed(settings, built, tmp_path,
                                                             monkeypatch):
    """Last year's bundle is left as it was until one of its files goes missing."""
    import pipeline.stages.search_index as search_index

    indexed: list[list[str]] = []
    real = search_index.run_pagefind

    def counted(pages: dict[str, str]) -> dict[str, bytes]:
        indexed.append(sorted(key.split("/")[1] for key in pages))
        return real(pages)

    monkeypatch.setattr(search_index, "run_pagefind", counted)
    root = tmp_path / "site"
    archive = LocalArchive(root)
    publish(week_of(settings, tmp_path, "2025-W52"), archive, Site(settings.site))
    publish(week_of(settings, tmp_path, "2026-W01"), archive, Site(settings.site))
    last_year = {key: (root / key).read_bytes()
                 for key in archive.keys(search.bundle_prefix("2025"))}
    report = publish(built, archive, Site(settings.site))
    assert indexed == [["2025-W52"], ["2026-W01"],
                       ["2026-W01", *[SAMPLE_WEEK] * len(built.issue.items)]]
    assert not any(key.startswith(search.bundle_prefix("2025")) for key in report.written)
    assert {key: (root / key).read_bytes()
            for key in archive.keys(search.bundle_prefix("2025"))} == last_year
    assert set(fragments(root, "2025")) == {"/reviews/2025-W52/202552.html"}
    assert set(fragments(root, "2026")) == {"/reviews/2026-W01/202601.html",
                                            *(f"/{key}" for key in record_keys(built.issue))}
    for key in search.SEARCH_PAGES.values():
        page = (root / key).read_text()
        assert '"2026", "2025"' in page and "pagefind/2025/" in page
    # A bundle that lost a file is written whole again, though its pages did not change.
    lost = next(key for key in last_year if "/fragment/" in key)
    (root / lost).unlink()
    indexed.clear()
    publish(built, archive, Site(settings.site))
    assert indexed == [["2025-W52"]] and (root / lost).is_file()


def _entry_names_files_that_exist(root: Path, year: str) -> bool:
    prefix = root / search.bundle_prefix(year)
    entry = json.loads((prefix / search.ENTRY).read_text())
    return all((prefix / f"pagefind.{lang['hash']}.pf_meta").is_file()
               for lang in entry["languages"].values())


@pytest.mark.subprocess
def test_a_publish_that_failed_half_way_leaves_no_year_naming_deleted_chunks(
        settings, tmp_path, monkeypatch):
    """The next publish neither skips a year a failed one rewrote nor deletes chunks it names."""
    import pipeline.stages.search_index as search_index

    root = tmp_path / "site"
    archive = LocalArchive(root)
    publish(week_of(settings, tmp_path, "2025-W52"), archive, Site(settings.site))
    newer = week_of(settings, tmp_path, "2026-W02")
    publish(newer, archive, Site(settings.site))
    entry = root / search.bundle_prefix("2025") / search.ENTRY
    as_first = entry.read_bytes()
    page = root / "issues/2025-W52/issue.json"
    original = page.read_bytes()
    page.write_bytes(original.replace("值得一读，".encode(), "值得一读，勘误：".encode(), 1))
    assert page.read_bytes() != original
    # 2026's bundle lost a file, so it is indexed again too, and that fails.
    (root / next(iter(archive.keys(search.bundle_prefix("2026") + "fragment/")))).unlink()
    real = search_index.run_pagefind

    def fails_on_2026(pages: dict[str, str]) -> dict[str, bytes]:
        if any("2026-W" in key for key in pages):
            raise RenderError("search index", "Pagefind exited 1: injected")
        return real(pages)

    monkeypatch.setattr(search_index, "run_pagefind", fails_on_2026)
    assert "injected" in publish(newer, archive, Site(settings.site)).search_problem
    assert _entry_names_files_that_exist(root, "2025")
    page.write_bytes(original)
    monkeypatch.setattr(search_index, "run_pagefind", real)
    report = publish(newer, archive, Site(settings.site))
    assert report.search_problem == ""
    for year in ("2025", "2026"):
        assert _entry_names_files_that_exist(root, year), year
    assert entry.read_bytes() == as_first  # indexed again from the issue as it is now


#: ``publish_issue`` of the issue in argv[2] with the settings of argv[1], held just before its
#: search index goes live (its entry file, written after the chunks it names) until a line
#: comes on stdin.
PAUSED_PUBLISH = """\
import sys
from pathlib import Path
from pipeline.archive.local import LocalArchive
from pipeline.cli.common import publish_issue
from pipeline.config import load
from pipeline.core.site import search
from pipeline.stages.built import load_built

write = LocalArchive.write

def paused(self, obj):
    if obj.key.endswith(search.ENTRY):
        print("paused", flush=True)
        sys.stdin.readline()
    return write(self, obj)

LocalArchive.write = paused
publish_issue(load(Path(sys.argv[1]), {}), load_built(Path(sys.argv[2])))
"""


@pytest.mark.subprocess
@pytest.mark.slow  # three publishes, one in a process of its own
def test_a_second_publish_while_one_is_under_way_is_refused_and_search_survives(
        settings, tmp_path):
    """The second would delete the first's new chunks as stale: the lease refuses it (exit 5)."""
    from pipeline.cli.common import publish_issue
    from pipeline.errors import LockedError

    root = settings.resolve(settings.archive.dir)
    publish_issue(settings, week_of(settings, tmp_path, "2026-W45"))  # a manifest to go by
    first = subprocess.Popen(
        [sys.executable, "-c", PAUSED_PUBLISH, str(settings.base_dir / "newsletter.toml"),
         str(week_of(settings, tmp_path, "2026-W47").folder)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = week_of(settings, tmp_path, "2026-W48")
    try:
        assert first.stdout is not None and first.stdin is not None  # piped
        assert first.stdout.readline() == "paused\n", first.stderr
        with pytest.raises(LockedError, match=r"publish to .* holds its lock"):
            publish_issue(settings, second)
        first.stdin.write("go\n")
        first.stdin.flush()
    finally:
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert _entry_names_files_that_exist(root, "2026")
    publish_issue(settings, second)  # once the first is done
    assert _entry_names_files_that_exist(root, "2026")
    assert {f"/reviews/2026-W{n}/2026{n}.html" for n in (45, 47, 48)} <= set(fragments(root))


@pytest.mark.subprocess
def test_an_archive_with_the_one_bundle_of_before_moves_to_yearly_bundles(settings, built,
                                                                         tmp_path):
    """The first publish keeps the old bundle's files for its readers, the next deletes them."""
    root = tmp_path / "site"
    archive = LocalArchive(root)
    publish(built, archive, Site(settings.site))
    flat = {"pagefind-entry.json": b"{}", "pagefind.js": b"js", "pagefind.zh_1.pf_meta": b"m",
            "index/zh_1.pf_index": b"i"}
    for path, data in flat.items():
        archive.write(SiteObject(search.BUNDLE + path, data, "x", SHORT_CACHE))
    listing = "".join(f"{search.BUNDLE}{path}\n" for path in flat)
    archive.write(SiteObject(search.LEGACY_MANIFEST, listing.encode(), "text/plain",
                             SHORT_CACHE))
    (root / search.MANIFEST).unlink()
    first = publish(built, archive, Site(settings.site))
    assert first.removed == 1 and not (root / search.LEGACY_MANIFEST).exists()
    assert all((root / search.BUNDLE / path).is_file() for path in flat)  # its readers'
    second = publish(built, archive, Site(settings.site))
    assert second.removed == len(flat)
    assert not any((root / search.BUNDLE / path).exists() for path in flat)
    assert set(fragments(root)) == {f"/{key}" for key in record_keys(built.issue)}


@pytest.mark.subprocess
def test_hostile_reviews_are_indexed_as_text(settings, tmp_path):
    hostile = ("<script>window.pwned=1</script><img src=x onerror=alert(1)> 毒药评审 "
               "%%unsubscribe_url%% \u202eevil\u202c " + "长" * 500 + " " + "x" * 500)
    issue = build_week(settings, tmp_path, SAMPLE_WEEK, [
        Entry(pr=60001, title="毒药 <script>alert(1)</script>", body="值得精读：" + hostile,
              lang="zh-CN"),
        Entry(pr=60001, title="Poison <img src=x onerror=alert(1)>", body="Must read: "
              + hostile, lang="en", id="en-60001")])
    root = tmp_path / "site"
    publish(issue, LocalArchive(root), Site(settings.site))
    (fragment,) = fragments(root).values()
    # The page shows the markup as text, so the index holds it as text: pagefind.js escapes
    # < and > before it builds an excerpt, and the search page sets a title as text
    # (tests/test_search_browser.py runs both in Chromium).
    assert "毒药 评审" in fragment["content"] and "window.pwned=1" in fragment["content"]
    assert fragment["meta"]["title_zh"] == "毒药 <script>alert(1)</script>"


@pytest.mark.subprocess
def test_a_record_pagefind_would_skip_is_a_render_error():
    from pipeline.stages.search_index import bundle_objects

    records = {"reviews/2026-W48/1.html": "<html><body><main><p>一</p></main></body></html>",
               "reviews/2026-W48/2.html": "<html><body><p>no main</p></body></html>"}
    with pytest.raises(RenderError,
                       match=r"indexed 1 of 2 records of 2026: each needs a <main>"):
        bundle_objects("2026", records)


def test_page_count_reads_the_entry_file():
    entry = json.dumps({"languages": {"zh": {"page_count": 3}, "en": {"page_count": 2}}})
    assert search.page_count({search.ENTRY: entry.encode()}) == 5
    assert search.page_count({}) == 0 and search.page_count({search.ENTRY: b"[]"}) == 0


@pytest.mark.subprocess
def test_a_missing_pagefind_is_one_render_error(tmp_path):
    with pytest.raises(RenderError, match="cannot run Pagefind"):
        run_pagefind({"a/index.html": "<p>x</p>"}, tmp_path / "no-such-binary")


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
    prefix = search.bundle_prefix("2026")
    expected = {o.key: o for o in search.bundle_objects(
        {key.removeprefix(prefix): b"" for key in keys
         if key not in search.SEARCH_PAGES.values()}, prefix)}
    assert len(expected) == len(keys) - len(search.SEARCH_PAGES)
    for page in search.SEARCH_PAGES.values():
        assert heads[page]["ContentType"] == "text/html; charset=utf-8"
    for key, obj in expected.items():
        assert (heads[key]["ContentType"], heads[key]["CacheControl"]) == (
            obj.content_type, obj.cache_control), key
    # The index a browser reads from the bucket is the one written: its entry names its meta.
    entry = json.loads(client.get_object(Bucket="weekly-archive",
                                         Key=f"weekly/{prefix}pagefind-entry.json")
                       ["Body"].read())
    meta = f"{prefix}pagefind.{entry['languages']['und']['hash']}.pf_meta"
    assert meta in heads
