"""The s3 archive: boto3 over HTTP to a moto server on 127.0.0.1 (tests/support/servers.py).

Every request the adapter makes is also recorded on the wire through botocore's
``before-send`` hook, so "uploads nothing" is checked as "no PutObject left the process", not
only as a counter the adapter keeps itself. What moto cannot answer (access denied) is injected
on the same hook, shaped as S3 answers it.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from pipeline.archive import SiteObject
from pipeline.archive.local import LocalArchive
from pipeline.archive.s3 import S3Archive, normalise_prefix
from pipeline.config import Settings
from pipeline.errors import ArchiveError, ConfigError
from pipeline.wiring import open_archive

if TYPE_CHECKING:
    from pathlib import Path

    from support.servers import MotoServer

pytest_plugins = ["support.servers"]

BUCKET = "weekly-archive"
PREFIX = "weekly/"
HTML = "text/html; charset=utf-8"
ATOM = "application/atom+xml; charset=utf-8"
JSON = "application/json"
SHORT = "public, max-age=300"
LONG = "public, max-age=31536000, immutable"
ZH_PAGE = ("<!doctype html><html lang=\"zh-CN\"><title>vLLM PR 周报 2026-W48</title>"
           "<p>值得精读：调度器重构，吞吐 +4.6%。「引号」与 emoji 🚀</p></html>").encode()


def site(week: str = "2026-W48", page: bytes = ZH_PAGE) -> list[SiteObject]:
    """What one publish writes: an issue's pages, then index, feed and sitemap."""
    issue = f'{{"id": "{week}", "subject": "vLLM PR 周报 {week}"}}'.encode()
    return [
        SiteObject(f"issues/{week}/index.html", page, HTML, LONG),
        SiteObject(f"issues/{week}/email.html", page, HTML, LONG),
        SiteObject(f"issues/{week}/issue.json", issue, JSON, LONG),
        SiteObject("index.html", b"<!doctype html><title>index</title>", HTML, SHORT),
        SiteObject("feed.xml", b"<feed xmlns='http://www.w3.org/2005/Atom'/>", ATOM, SHORT),
        SiteObject("sitemap.xml", b"<urlset/>", "application/xml; charset=utf-8", SHORT),
    ]


@dataclass
class Wire:
    """Requests that left a client, by operation; optional canned answers per operation."""

    calls: Counter[str] = field(default_factory=Counter)
    headers: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    answers: dict[str, AWSResponse] = field(default_factory=dict)

    def before_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        self.calls[operation] += 1
        body = request.body
        if hasattr(body, "read"):  # botocore hands a seekable stream: read it, rewind it
            position = body.tell()
            body, _ = body.read(), body.seek(position)
        body = body if isinstance(body, bytes) else b""
        headers = {name: value.decode() if isinstance(value, bytes) else value
                   for name, value in request.headers.items()}
        self.headers.append((operation, headers, body))
        return self.answers.get(operation)


def watch(archive: S3Archive) -> Wire:
    wire = Wire()
    # botocore sends no request when a before-send handler answers; the stubs type every
    # handler as returning None.
    archive.client.meta.events.register("before-send.s3",
                                        cast(Callable[..., None], wire.before_send))
    return wire


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def s3_error(url: str, status: int, code: str, message: str) -> AWSResponse:
    """An error answer in S3's own XML shape."""
    body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
            f"<Message>{message}</Message><RequestId>1</RequestId></Error>").encode()
    # AWSResponse copies any mapping into its HeadersDict; the stubs ask for HTTPHeaders.
    headers = cast(HTTPHeaders, {"Content-Type": "application/xml"})
    return AWSResponse(url, status, headers, _Raw(body))


@pytest.fixture
def s3(moto_server: MotoServer) -> Any:
    """A set-up client (not the one under test) with the archive's bucket created."""
    client = moto_server.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def archive(s3: Any):
    a = S3Archive(BUCKET, PREFIX)
    yield a
    a.close()


def all_keys(s3: Any) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys += [item["Key"] for item in page.get("Contents", ())]
    return sorted(keys)


# -- keys, headers, bytes -------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    ("", ""), ("/", ""), ("weekly", "weekly/"), ("/weekly", "weekly/"),
    ("weekly/", "weekly/"), ("/weekly//", "weekly/"), ("a/b", "a/b/"),
])
def test_prefix_is_normalised(given: str, expected: str) -> None:
    assert normalise_prefix(given) == expected


@pytest.mark.parametrize("bad", ["../up", "a/../b", "a//b", "we ekly", "./x"])
def test_unsafe_prefix_is_refused(bad: str) -> None:
    with pytest.raises(ArchiveError, match="unusable prefix"):
        normalise_prefix(bad)


def test_objects_land_under_the_prefix_with_their_headers(s3: Any, archive: S3Archive) -> None:
    objects = site()
    for obj in objects:
        assert archive.write(obj) is True

    assert all_keys(s3) == sorted(PREFIX + obj.key for obj in objects)
    for obj in objects:
        head = s3.head_object(Bucket=BUCKET, Key=PREFIX + obj.key)
        assert head["ContentType"] == obj.content_type
        assert head["CacheControl"] == obj.cache_control
        assert head["ETag"].strip('"') == obj.md5
        assert head["ContentLength"] == len(obj.data)
    assert archive.uploads == len(objects)
    assert archive.uploaded_bytes == sum(len(obj.data) for obj in objects)


def test_empty_prefix_writes_at_the_bucket_root(s3: Any) -> None:
    a = S3Archive(BUCKET)
    a.write(SiteObject("index.html", b"x", HTML, SHORT))
    assert all_keys(s3) == ["index.html"]
    assert a.read("index.html") == b"x"


def test_each_upload_carries_the_content_md5_s3_checks(archive: S3Archive) -> None:
    wire = watch(archive)
    obj = site()[0]
    archive.write(obj)

    (put,) = [(h, body) for op, h, body in wire.headers if op == "PutObject"]
    headers, body = put
    assert body == obj.data
    digest = hashlib.md5(obj.data, usedforsecurity=False).digest()
    assert headers["Content-MD5"] == base64.b64encode(digest).decode()


def test_a_body_damaged_in_transit_is_an_archive_error(archive: S3Archive) -> None:
    # moto does not check Content-MD5; S3 answers a mismatch like this.
    wire = watch(archive)
    wire.answers["PutObject"] = s3_error(
        "http://x", 400, "BadDigest", "The Content-MD5 you specified did not match.")
    with pytest.raises(ArchiveError, match=r"damaged in transit") as caught:
        archive.write(site()[0])
    assert isinstance(caught.value.__cause__, ClientError)
    assert archive.uploads == 0


# -- only what changed goes up --------------------------------------------------------------


def test_publishing_the_same_content_again_uploads_nothing(s3: Any) -> None:
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    first = S3Archive(BUCKET, PREFIX)
    for obj in site():
        first.write(obj)
    before = {obj.key: s3.head_object(Bucket=BUCKET, Key=PREFIX + obj.key)["LastModified"]
              for obj in site()}

    # A new process (the prefix spelt otherwise): the ETags come from one listing.
    again = S3Archive(BUCKET, "/weekly")
    wire = watch(again)
    assert again.list_issues() == ["2026-W48"]
    assert [again.write(obj) for obj in site()] == [False] * len(site())

    assert again.uploads == 0
    assert again.uploaded_bytes == 0
    assert again.skipped == len(site())
    assert wire.calls == Counter({"ListObjectsV2": 1})  # no PutObject, no HEAD per object
    versions = s3.list_object_versions(Bucket=BUCKET)["Versions"]
    assert len(versions) == len(site())  # versioning on: any upload would add one
    after = {obj.key: s3.head_object(Bucket=BUCKET, Key=PREFIX + obj.key)["LastModified"]
             for obj in site()}
    assert after == before


def test_changed_content_is_uploaded_and_only_it(s3: Any, archive: S3Archive) -> None:
    for obj in site():
        archive.write(obj)
    wire = watch(archive)
    changed = SiteObject("index.html", b"<!doctype html><title>index 2</title>", HTML, SHORT)

    results = {obj.key: archive.write(obj) for obj in [*site()[:3], changed, *site()[4:]]}

    assert results == {obj.key: obj.key == "index.html" for obj in site()}
    assert wire.calls == Counter({"PutObject": 1})  # the cache was already filled
    assert s3.get_object(Bucket=BUCKET, Key=PREFIX + "index.html")["Body"].read() == changed.data
    assert archive.uploads == len(site()) + 1
    # And the ETag it recorded for the new bytes makes the next write a no-op.
    assert archive.write(changed) is False


# -- listing: the archive is its own source of truth ----------------------------------------


def test_list_issues_finds_exactly_the_weeks_holding_issue_json(
        s3: Any, archive: S3Archive) -> None:
    for week in ("2026-W47", "2026-W48", "2025-W52"):
        for obj in site(week):
            archive.write(obj)
    put = s3.put_object
    put(Bucket=BUCKET, Key=PREFIX + "issues/2026-W49/index.html", Body=b"pages only")
    put(Bucket=BUCKET, Key=PREFIX + "issues/notaweek/issue.json", Body=b"{}")
    put(Bucket=BUCKET, Key=PREFIX + "issues/2026-W50/old/issue.json", Body=b"{}")
    put(Bucket=BUCKET, Key="issues/2026-W01/issue.json", Body=b"{}")  # outside the prefix
    put(Bucket=BUCKET, Key="weekly-old/issues/2026-W02/issue.json", Body=b"{}")  # look-alike

    assert archive.list_issues() == ["2025-W52", "2026-W47", "2026-W48"]


def test_listing_past_a_thousand_objects(s3: Any, moto_server: MotoServer) -> None:
    # S3's own page size (1,000), without a page_size: 1,050 objects need two pages. Seeded
    # in moto's memory; the listing under test goes over HTTP.
    moto_server.seed_objects(BUCKET, {
        f"{PREFIX}issues/{2000 + n // 53:04d}-W{n % 53 + 1:02d}/issue.json": b"{}"
        for n in range(1, 1051)})
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}issues/2099-W01/index.html", Body=b"")

    archive = S3Archive(BUCKET, PREFIX)
    wire = watch(archive)
    weeks = archive.list_issues()

    assert wire.calls["ListObjectsV2"] == 2
    assert len(weeks) == len(set(weeks)) == 1050
    assert weeks == sorted(weeks)
    assert weeks[0] == "2000-W02" and weeks[-1] == "2019-W44"


# -- reading, refusing, failing -------------------------------------------------------------


def test_an_empty_bucket_holds_no_issue_and_no_key(archive: S3Archive) -> None:
    assert archive.list_issues() == [] and archive.keys("") == []
    assert archive.read("issues/2026-W48/issue.json") is None


@pytest.mark.parametrize("key", ["../x", "/abs", "issues/../../x", "a//b/../c", "", "a b",
                                 "areas/x\n/index.html"])
def test_unsafe_keys_are_refused_before_any_request(archive: S3Archive, key: str) -> None:
    wire = watch(archive)
    with pytest.raises(ArchiveError, match="refusing"):
        archive.write(SiteObject(key, b"x", HTML, SHORT))
    with pytest.raises(ArchiveError, match="refusing"):
        archive.read(key)
    assert wire.calls == Counter()


def test_a_missing_bucket_is_named(moto_server: MotoServer) -> None:
    a = S3Archive("no-such-bucket", PREFIX)
    for attempt in (a.list_issues, lambda: a.read("index.html"),
                    lambda: a.write(site()[0])):
        with pytest.raises(ArchiveError) as caught:
            attempt()
        message = str(caught.value)
        assert "bucket no-such-bucket does not exist" in message
        assert "\n" not in message
        assert isinstance(caught.value.__cause__, ClientError)


def test_a_bucket_gone_after_listing_fails_the_upload_naming_the_key(
        s3: Any, archive: S3Archive) -> None:
    assert archive.list_issues() == []  # listed: the next write goes straight to PutObject
    s3.delete_bucket(Bucket=BUCKET)
    with pytest.raises(ArchiveError, match=rf"cannot write weekly/index\.html: bucket {BUCKET} "
                                           "does not exist") as caught:
        archive.write(site()[3])
    assert caught.value.key == "index.html"


def test_access_denied(archive: S3Archive) -> None:
    wire = watch(archive)
    wire.answers["ListObjectsV2"] = s3_error("http://x", 403, "AccessDenied", "Access Denied")
    with pytest.raises(ArchiveError, match=rf"access denied to bucket {BUCKET}") as caught:
        archive.write(site()[0])
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, ClientError)


def test_unreachable_endpoint(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch,
                              unused_port: int) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{unused_port}")
    a = S3Archive(BUCKET, PREFIX)
    with pytest.raises(ArchiveError, match="cannot reach S3") as caught:
        a.read("index.html")
    assert isinstance(caught.value.__cause__, EndpointConnectionError)


def test_missing_credentials(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    a = S3Archive(BUCKET, PREFIX)
    with pytest.raises(ArchiveError, match="no usable AWS credentials") as caught:
        a.list_issues()
    assert isinstance(caught.value.__cause__, NoCredentialsError)


# -- the real publish step over S3 ----------------------------------------------------------


@pytest.mark.subprocess  # publish ends by running Pagefind
@pytest.mark.slow  # three builds and four publishes to moto, each running Pagefind
def test_publish_over_s3_rebuilds_the_index_uploads_only_changes_and_retires_pages(
        s3: Any, settings: Settings, tmp_path: Path) -> None:
    from support.project import SAMPLE_WEEK
    from support.published_site import W47_ENTRIES, build_week

    from pipeline.core.site.site import Site
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built
    from pipeline.stages.publish import publish

    older = build_week(settings, tmp_path, "2026-W47", W47_ENTRIES)
    this = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b48").out_dir)
    site_ = Site(settings.site)

    publish(older, S3Archive(BUCKET, PREFIX), site_)
    # A fresh runner: a new archive object, and only this week's build on disk.
    runner = S3Archive(BUCKET, PREFIX)
    publish(this, runner, site_)
    index = s3.get_object(Bucket=BUCKET, Key=PREFIX + "index.html")
    assert index["ContentType"] == "text/html; charset=utf-8"
    page = index["Body"].read().decode("utf-8")
    assert "2026-W47" in page and SAMPLE_WEEK in page and "上周的 PR" in page
    feed_head = s3.head_object(Bucket=BUCKET, Key=PREFIX + "feed.xml")
    assert feed_head["ContentType"].startswith("application/atom+xml")

    again = S3Archive(BUCKET, PREFIX)
    wire = watch(again)
    report = publish(this, again, site_)
    assert report.written == [] and report.bytes_written == 0
    assert (again.uploads, again.uploaded_bytes) == (0, 0)
    assert wire.calls["PutObject"] == 0
    assert again.list_issues() == ["2026-W47", SAMPLE_WEEK]

    # A PR hidden after publishing: its PR and area pages and feed go once the index stops
    # naming them; nothing else does.
    gone = {PREFIX + key for key in ("pr/56671/index.html", "areas/tests/index.html",
                                     "areas/tests/feed.xml")}
    before = set(all_keys(s3))
    assert gone <= before
    editorial = settings.resolve(settings.paths.editorial_dir)
    editorial.mkdir()
    (editorial / f"{SAMPLE_WEEK}.toml").write_text("[56671]\nhide = true\n", encoding="utf-8")
    hidden = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b2").out_dir)
    runner = S3Archive(BUCKET, PREFIX)
    wire = watch(runner)
    report = publish(hidden, runner, site_)
    assert sorted(PREFIX + key for key in report.retired) == sorted(gone)
    after = set(all_keys(s3))
    assert before - after == gone and wire.calls["DeleteObjects"] >= 1
    assert "56671" not in s3.get_object(Bucket=BUCKET, Key=PREFIX + "sitemap.xml")[
        "Body"].read().decode()


# -- open_archive ---------------------------------------------------------------------------


def test_open_archive_local(settings: Settings, tmp_path: Path) -> None:
    archive = open_archive(settings)
    assert isinstance(archive, LocalArchive)
    assert archive.name == "local"
    assert archive.root == (tmp_path / "build" / "site").resolve()


def test_open_archive_s3(s3: Any, settings: Settings) -> None:
    conf = replace(settings.archive, target="s3", bucket=BUCKET, prefix="/weekly")
    archive = open_archive(replace(settings, archive=conf))
    assert isinstance(archive, S3Archive)
    assert (archive.name, archive.bucket, archive.prefix) == ("s3", BUCKET, PREFIX)
    archive.write(site()[2])
    assert archive.list_issues() == ["2026-W48"]


@pytest.mark.parametrize(("bucket", "prefix", "key"), [
    ("", "", "bucket"), (BUCKET, "../elsewhere", "prefix")])
def test_open_archive_s3_refuses_no_bucket_or_an_unsafe_prefix(
        settings: Settings, bucket: str, prefix: str, key: str) -> None:
    conf = replace(settings.archive, target="s3", bucket=bucket, prefix=prefix)
    with pytest.raises(ConfigError, match=rf"\[archive\] {key}"):
        open_archive(replace(settings, archive=conf))


# -- what callers ask of any archive --------------------------------------------------------


def test_each_archive_describes_where_it_is(archive: S3Archive, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert archive.describe() == f"s3://{BUCKET}/{PREFIX}"
    assert LocalArchive(tmp_path / "site").describe() == f"{tmp_path / 'site'}/"
    monkeypatch.chdir(tmp_path)  # inside the working directory: shown relative to it
    assert LocalArchive(tmp_path / "build" / "site").describe() == "build/site/"


def test_with_closes_the_client_the_archive_built(s3: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []
    with S3Archive(BUCKET, PREFIX) as opened:
        monkeypatch.setattr(opened.client, "close", lambda: closed.append("built"))
        opened.write(site()[0])
    assert closed == ["built"]
    with S3Archive(BUCKET, PREFIX, client=s3) as lent:  # a client passed in stays its owner's
        monkeypatch.setattr(s3, "close", lambda: closed.append("lent"))
        assert lent.client is s3
    assert closed == ["built"]


def test_an_area_page_of_a_chinese_area_round_trips(s3: Any) -> None:
    """S3 keys take any script as UTF-8, and a rewrite of the same bytes is known unchanged."""
    from pipeline.core.issue.interests import area_slug

    key = f"areas/{area_slug('调度器')}/index.html"
    first = S3Archive(BUCKET, PREFIX)
    assert first.write(SiteObject(key, ZH_PAGE, HTML, SHORT)) is True
    assert PREFIX + key in all_keys(s3)
    first.close()
    again = S3Archive(BUCKET, PREFIX)  # a fresh runner: ETags from the listing
    assert again.write(SiteObject(key, ZH_PAGE, HTML, SHORT)) is False
    assert again.read(key) == ZH_PAGE
    again.close()


def test_keys_and_delete_work_on_the_prefix_only(s3: Any, archive: S3Archive,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """For the search clean-up: batched deletes, absent keys fine, nothing outside the prefix."""
    from pipeline.archive import s3 as s3_module
    from pipeline.model import SiteObject

    monkeypatch.setattr(s3_module, "DELETE_BATCH", 2)
    wire = watch(archive)
    for n in range(7):
        archive.write(SiteObject(f"search/pagefind/index/zh_{n}.pf_index", b"x",
                                 "application/octet-stream", "no-cache"))
    archive.write(SiteObject("index.html", b"<html>", "text/html", "no-cache"))
    s3.put_object(Bucket=BUCKET, Key="elsewhere/search/pagefind/index/zh_1.pf_index", Body=b"")
    chunks = archive.keys("search/pagefind/")
    assert len(chunks) == 7 and chunks == sorted(chunks)
    assert archive.delete([*chunks[:6], "search/pagefind/never-there"]) == 6
    assert wire.calls["DeleteObjects"] == 3
    assert archive.keys("search/") == [chunks[-1]]
    assert "weekly/index.html" in all_keys(s3)
    assert "elsewhere/search/pagefind/index/zh_1.pf_index" in all_keys(s3)
    fresh = S3Archive(BUCKET, PREFIX)  # a new runner lists the bucket itself
    try:
        assert fresh.keys("search/pagefind/") == [chunks[-1]]
    finally:
        fresh.close()
