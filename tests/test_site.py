"""The site's pages and the publish step, on the local archive (S3 has its own tests)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SAMPLE_WEEK, Entry, atom

from pipeline.archive import SiteObject
from pipeline.archive.local import LocalArchive
from pipeline.core.site import LONG_CACHE, SHORT_CACHE, Site, identifiers
from pipeline.errors import ArchiveError
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish


@pytest.fixture
def built(settings, tmp_path):
    return load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b48").out_dir)


@pytest.fixture
def older(settings, tmp_path):
    feed = tmp_path / "w47.atom"
    feed.write_bytes(atom([
        Entry(pr=50001, title="上周的 PR", body="值得一读，上周的评审。",
              published="2026-11-17T10:00:00+08:00", lang="zh-CN"),
        Entry(pr=50001, title="Last week's PR", body="Skim, last week's review.",
              published="2026-11-17T12:00:00+08:00", lang="en", id="en-50001"),
    ]))
    return load_built(build(settings, week_id="2026-W47", feeds=[str(feed)],
                            out=tmp_path / "b47").out_dir)


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


def test_language_variants_have_lang_hreflang_and_explicit_links(settings, built):
    found = objects(Site(settings.site), built)
    base = settings.site.base_url
    en = found[f"issues/{SAMPLE_WEEK}/en.html"].data.decode()
    zh = found[f"issues/{SAMPLE_WEEK}/zh.html"].data.decode()
    both = found[f"issues/{SAMPLE_WEEK}/index.html"].data.decode()
    assert '<html lang="en">' in en and '<html lang="zh-CN">' in zh
    for page in (en, zh, both):
        assert f'hreflang="en" href="{base}/issues/{SAMPLE_WEEK}/en.html"' in page
        assert f'hreflang="zh-CN" href="{base}/issues/{SAMPLE_WEEK}/zh.html"' in page
        assert f'hreflang="x-default" href="{base}/issues/{SAMPLE_WEEK}/index.html"' in page
        # Every link between pages names its file: the site works on any static host.
        for href in re.findall(r'href="([^"]+)"', page):
            if href.startswith(base):
                assert re.search(r"\.(html|xml|json)(#.*)?$", href), href
    for item in built.data["items"]:
        assert item["en"]["title"].replace("'", "&#39;") in en
        assert item["zh"]["title"] not in en
        assert item["zh"]["title"] in zh and item["en"]["title"] not in zh
        assert f'href="{item["url"]}"' in both
        assert item["why"]["en"].replace("'", "&#39;").replace("“", "“") in en


def test_items_name_their_code_identifiers(settings, built):
    assert [str(c) for c in identifiers("<p><code>a</code> x <code>b&lt;c</code> "
                                        "<code>a</code></p>")] == ["a", "b&lt;c"]
    en = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/en.html"].data.decode()
    assert "Identifiers: <code>SupportsHMA</code>" in en


def test_public_email_has_no_personal_link(settings, built):
    email = objects(Site(settings.site), built)[f"issues/{SAMPLE_WEEK}/email.html"].data
    assert b"%%" not in email and b"token=" not in email
    assert f'href="{settings.site.app_url}/unsubscribe"'.encode() in email


def test_index_feed_sitemap_from_issue_files(settings, built, older):
    site = Site(settings.site)
    found = {o.key: o for o in site.index_objects([older.issue, built.issue])}
    assert sorted(found) == ["404.html", "feed.xml", "index.html", "sitemap.xml"]
    assert all(o.cache_control == SHORT_CACHE for o in found.values())
    index = found["index.html"].data.decode()
    assert index.index("2026-W48") < index.index("2026-W47")  # newest first
    assert f'action="{settings.site.app_url}/subscribe"' in index
    assert "上周的 PR" in index and "Last week&#39;s PR" in index
    assert found["feed.xml"].content_type.startswith("application/atom+xml")


def test_the_feed_carries_the_latest_issues_only(settings, built):
    import feedparser

    from pipeline.core.site import FEED_ISSUES

    many = []
    for n in range(1, FEED_ISSUES + 6):
        many.append(replace(built.issue, id=f"2025-W{n:02d}"))
    site = Site(settings.site)
    found = {o.key: o for o in site.index_objects(many)}
    feed = feedparser.parse(found["feed.xml"].data)
    assert len(feed.entries) == FEED_ISSUES
    assert feed.entries[0].link.endswith("/issues/2025-W25/index.html")
    assert found["index.html"].data.decode().count('href="http') >= FEED_ISSUES + 5


def test_no_subscribe_form_without_an_app(settings, built):
    site = Site(replace(settings.site, app_url=""))
    index = site.index_objects([built.issue])[0].data.decode()
    assert "<form" not in index and "/subscribe" not in index
    email = objects(site, built)[f"issues/{SAMPLE_WEEK}/email.html"].data.decode()
    assert f'href="{settings.site.base_url}/index.html"' in email


@pytest.mark.subprocess  # publish ends by running Pagefind (pipeline/stages/search_index.py)
def test_publish_writes_pages_then_index_and_twice_writes_nothing(settings, built, tmp_path):
    archive = LocalArchive(tmp_path / "site")
    first = publish(built, archive, Site(settings.site))
    assert first.written[:5] == [f"issues/{SAMPLE_WEEK}/{n}" for n in
                                 ("index.html", "zh.html", "en.html", "email.html",
                                  "issue.json")]
    assert first.written[5:9] == ["index.html", "feed.xml", "sitemap.xml", "404.html"]
    assert all(key.startswith("search/") for key in first.written[9:])
    second = publish(built, archive, Site(settings.site))
    assert second.written == [] and second.bytes_written == 0
    assert second.unchanged == len(first.written)


@pytest.mark.subprocess  # publish runs Pagefind
def test_index_is_rebuilt_from_the_archive_alone(settings, built, older, tmp_path):
    archive = LocalArchive(tmp_path / "site")
    publish(older, archive, Site(settings.site))
    # A fresh runner: only this week's build exists locally; the index still lists both.
    import shutil

    shutil.rmtree(older.folder)
    publish(built, archive, Site(settings.site))
    index = (tmp_path / "site" / "index.html").read_text()
    assert "2026-W47" in index and "2026-W48" in index
    assert archive.list_issues() == ["2026-W47", "2026-W48"]


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
    """An issue.json from before the ``github`` key still reads back; publish copies the file
    it read, not one laid out again from the records (which would add ``"github": null``
    and no longer match its own content_hash)."""
    from pipeline.core import issue_json
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
