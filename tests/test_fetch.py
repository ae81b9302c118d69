"""Fetch: files and http(s) URLs, with a conditional GET against a real server on loopback."""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.commands import newsletter_main
from support.http_server import Answer, HttpServer, Reply, Request
from support.project import make_project

from pipeline.errors import FeedError
from pipeline.sources.feeds import MAX_BYTES, fetch

FEED = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="zh-CN"><title>评审</title>'
    "<id>tag:t,2026:f</id><updated>2026-11-29T00:00:00Z</updated></feed>\n"
).encode()
ETAG = '"v1-5d41402a"'
LAST_MODIFIED = "Sun, 29 Nov 2026 14:30:00 GMT"
CONTENT_TYPE = "application/atom+xml; charset=utf-8"


def answer(request: Request) -> Reply:
    """FEED at /feed.atom with an ETag and Last-Modified, anything else a 404. Any conditional
    request is answered 304: a client asking so when it should not would get no body."""
    if request.path != "/feed.atom":
        return Reply(404, b"Not Found")
    if "if-none-match" in request.headers or "if-modified-since" in request.headers:
        return Reply(304, headers={"ETag": ETAG})
    return Reply(200, FEED, {"Content-Type": CONTENT_TYPE, "ETag": ETAG,
                             "Last-Modified": LAST_MODIFIED})


@pytest.fixture
def server(serve_http: Callable[[Answer], HttpServer]) -> HttpServer:
    return serve_http(answer)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "data" / "feeds"


def test_the_first_fetch_asks_unconditionally_and_caches_the_feed(server, cache):
    fetched = fetch(server.url("/feed.atom"), cache)
    assert (fetched.location, fetched.body) == (server.url("/feed.atom"), FEED)
    assert fetched.content_type == CONTENT_TYPE
    assert fetched.from_cache is False
    (request,) = server.requests
    assert "if-none-match" not in request.headers
    assert "if-modified-since" not in request.headers
    assert request.headers["user-agent"].startswith("vllm-pr-weekly/")
    cached = [p for p in cache.iterdir() if p.is_file()]
    assert any(p.read_bytes() == FEED for p in cached)
    assert not [p for p in cached if p.name.startswith(".tmp")]


def test_the_second_fetch_sends_the_validators_and_reads_a_304_from_the_cache(server, cache):
    fetch(server.url("/feed.atom"), cache)
    fetched = fetch(server.url("/feed.atom"), cache, total_seconds=5)  # well within the bound
    _, second = (r.headers for r in server.requests)
    assert second["if-none-match"] == ETAG
    assert second["if-modified-since"] == LAST_MODIFIED
    assert fetched.from_cache is True
    assert fetched.body == FEED
    assert fetched.content_type == CONTENT_TYPE


def test_without_a_cache_dir_every_fetch_is_in_full(server):
    fetch(server.url("/feed.atom"), None)
    fetched = fetch(server.url("/feed.atom"), None)
    assert (fetched.body, fetched.from_cache) == (FEED, False)
    assert all("if-none-match" not in r.headers for r in server.requests)


def test_304_after_the_cache_was_deleted_refetches_in_full_and_caches_again(server, cache):
    fetch(server.url("/feed.atom"), cache)

    def wipe_then_answer(request: Request) -> Reply:
        if "if-none-match" in request.headers:
            shutil.rmtree(cache)
        return answer(request)

    server.answer = wipe_then_answer
    fetched = fetch(server.url("/feed.atom"), cache)
    assert (fetched.body, fetched.from_cache) == (FEED, False)
    _, conditional, refetch = (r.headers for r in server.requests)
    assert conditional["if-none-match"] == ETAG
    assert "if-none-match" not in refetch
    assert "if-modified-since" not in refetch
    assert any(p.read_bytes() == FEED for p in cache.iterdir() if p.is_file())


@pytest.mark.parametrize("refused", [False, True], ids=["404", "connection refused"])
def test_http_404_or_a_refused_connection_is_a_feed_error_naming_the_url(server, cache,
                                                                         unused_port, refused):
    url = f"http://127.0.0.1:{unused_port}/feed.atom" if refused else server.url("/missing.atom")
    with pytest.raises(FeedError, match="cannot connect" if refused else "HTTP 404") as caught:
        fetch(url, cache)
    assert caught.value.url == url


def test_a_file_is_read(tmp_path):
    path = tmp_path / "feed.atom"
    path.write_bytes(FEED)
    fetched = fetch(str(path), None)
    assert (fetched.body, fetched.from_cache, fetched.content_type) == (FEED, False, None)


@pytest.mark.parametrize(("location", "said"), [
    ("nope.atom", "no such file"), ("", "is a folder"),
    ("ftp://example.org/feed.atom", "only files and http"),
])
def test_a_location_that_is_no_feed_is_a_feed_error(tmp_path, location, said):
    with pytest.raises(FeedError, match=said):
        fetch(location if "://" in location else str(tmp_path / location), None)


# -- bounds: total time for a URL, size for a file ----------------------------------------------

def drip(stop: threading.Event, request: Request) -> Iterator[bytes]:
    """One byte at a time, forever (until the test stops it): in the status line and headers
    for ``/headers``, in the body for anything else. Every read gets an answer well within the
    per-read timeout, so only a bound on the total time ends the fetch."""
    if request.path == "/headers":
        payload = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1_000_000
    else:
        yield f"HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\n\r\n".encode()
        payload = FEED * 100_000
    for byte in payload:
        if stop.wait(0.02):
            return
        yield bytes([byte])


@pytest.fixture
def dripping(serve_http: Callable[[Answer], HttpServer]) -> Iterator[str]:
    stop = threading.Event()
    yield serve_http(functools.partial(drip, stop)).url()
    stop.set()


@pytest.mark.parametrize("path", ["/body", "/headers"])
def test_a_server_that_drips_forever_is_cut_off_at_the_total_bound(dripping, cache, path):
    with pytest.raises(FeedError, match=r"not received in full within 0\.2 s") as caught:
        fetch(dripping + path, cache, total_seconds=0.2)
    assert caught.value.url == dripping + path
    assert not cache.exists() or not any(cache.iterdir())


def test_a_file_at_the_cap_is_read_and_one_byte_more_is_a_feed_error(tmp_path):
    path = tmp_path / "big.atom"
    with path.open("wb") as handle:
        handle.truncate(MAX_BYTES)  # sparse: costs no disk
    assert len(fetch(str(path), None).body) == MAX_BYTES
    with path.open("ab") as handle:
        handle.truncate(MAX_BYTES + 1)
    with pytest.raises(FeedError, match=f"larger than {MAX_BYTES:,} bytes"):
        fetch(str(path), None)


def test_an_oversized_feed_file_exits_2_with_one_line(tmp_path):
    path = tmp_path / "huge.atom"
    with path.open("wb") as handle:
        handle.truncate(MAX_BYTES + 1)
    make_project(tmp_path, feed="huge.atom")
    result = newsletter_main(["build", "--week", "2026-W48"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"newsletter: error: feed {path}: larger than {MAX_BYTES:,} bytes"]
