"""The one HTTP client against a real server on loopback: any status is an answer, the
bounds hold, and the conditional-GET cache turns a 304 into the kept body."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

import pytest
from support.http_server import Answer, HttpServer, Reply, Request

from pipeline.http import ConditionalCache, HttpError, Response, get_cached, post_json, request

BODY = b'{"title": "Fix the scheduler"}'
ETAG = '"v1"'
LAST_MODIFIED = "Sun, 29 Nov 2026 14:30:00 GMT"


def answer(request: Request) -> Reply:
    """``/doc`` with validators (a conditional GET gets 304), ``/big`` more bytes than a small
    bound, ``POST /echo`` its JSON back, anything else a 404 with a message."""
    if request.method == "POST":
        return Reply(201, request.body, {"Content-Type": "application/json"})
    if request.path == "/doc":
        if "if-none-match" in request.headers:
            return Reply(304, headers={"ETag": ETAG})
        return Reply(200, BODY, {"ETag": ETAG, "Last-Modified": LAST_MODIFIED,
                                 "Content-Type": "application/json"})
    if request.path == "/big":
        return Reply(200, b"x" * 5000)
    return Reply(404, b'{"message": "Not Found"}', {"Content-Type": "application/json"})


@pytest.fixture
def server(serve_http: Callable[[Answer], HttpServer]) -> HttpServer:
    return serve_http(answer)


def get(server: HttpServer, path: str, cache: ConditionalCache | None):
    return get_cached(server.url(path), {"User-Agent": "test"}, cache, timeout=5,
                      max_bytes=1000)


def test_a_second_get_asks_conditionally_and_reuses_the_kept_body(server, tmp_path):
    cache = ConditionalCache(tmp_path / "cache")
    first = get(server, "/doc", cache)
    assert (first.status, first.body, first.from_cache) == (200, BODY, False)
    assert "if-none-match" not in server.requests[0].headers
    again = get(server, "/doc", cache)
    assert (again.status, again.body, again.from_cache) == (200, BODY, True)
    asked = server.requests[1].headers
    assert asked["if-none-match"] == ETAG and asked["if-modified-since"] == LAST_MODIFIED
    assert again.headers["content-type"] == "application/json"
    assert len(server.requests) == 2
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".tmp")]


def test_a_304_after_the_cache_was_wiped_asks_again_in_full(server, tmp_path):
    cache = ConditionalCache(tmp_path / "cache")
    get(server, "/doc", cache)

    def wipe_then_answer(request: Request) -> Reply:
        if "if-none-match" in request.headers:
            shutil.rmtree(tmp_path / "cache")
        return answer(request)

    server.answer = wipe_then_answer
    again = get(server, "/doc", cache)
    assert (again.status, again.body, again.from_cache) == (200, BODY, False)
    assert "if-none-match" not in server.requests[-1].headers
    assert cache.body(server.url("/doc")) == BODY  # kept again


def test_without_a_cache_every_get_is_in_full(server):
    for _ in range(2):
        assert get(server, "/doc", None).from_cache is False
    assert all("if-none-match" not in r.headers for r in server.requests)


def test_an_error_status_is_an_answer_with_its_body(server, tmp_path):
    cache = ConditionalCache(tmp_path / "cache")
    missing = get(server, "/missing", cache)
    assert (missing.status, missing.reason) == (404, "Not Found")
    assert json.loads(missing.body) == {"message": "Not Found"}
    assert not (tmp_path / "cache").exists()  # only a 200 is kept


def test_a_body_over_the_bound_is_refused(server):
    with pytest.raises(HttpError) as caught:
        get(server, "/big", None)
    assert (caught.value.kind, caught.value.limit) == ("too large", 1000)


def test_a_closed_port_is_unreachable_and_worth_another_try(unused_port):
    with pytest.raises(HttpError) as caught:
        request(f"http://127.0.0.1:{unused_port}/", {}, timeout=2, max_bytes=10)
    assert caught.value.kind == "unreachable" and caught.value.transient
    assert isinstance(caught.value.__cause__, OSError)


def test_post_json_sends_json_and_returns_any_status(server):
    echoed = post_json(server.url("/echo"), b'{"a": 1}', {"Authorization": "Bearer k"},
                       timeout=5, max_bytes=1000)
    assert (echoed.status, echoed.body) == (201, b'{"a": 1}')
    (seen,) = server.requests
    assert (seen.method, seen.path) == ("POST", "/echo")
    assert seen.headers["content-type"].startswith("application/json")
    assert seen.headers["authorization"] == "Bearer k"


def test_an_unwritable_cache_is_no_error(server, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = ConditionalCache(blocker / "cache")
    assert get(server, "/doc", cache).body == BODY
    assert get(server, "/doc", cache).from_cache is False


def test_the_cache_keeps_body_and_validators_by_url(tmp_path):
    cache = ConditionalCache(tmp_path)
    assert cache.validators("http://x/a") == {} and cache.body("http://x/a") is None
    cache.put("http://x/a", Response(200, b"abc", {"etag": '"e"', "content-type": "text/x"}))
    assert cache.body("http://x/a") == b"abc" and cache.body("http://x/b") is None
    assert cache.validators("http://x/a") == {"etag": '"e"', "last_modified": "",
                                              "content_type": "text/x"}


@pytest.mark.parametrize(("header", "seconds"), [
    ("120", 120.0), (" 1.5 ", 1.5), ("Thu, 03 Dec 2026 12:01:00 GMT", 60.0),
    ("Thu, 03 Dec 2026 11:00:00 GMT", 0.0), ("-5", None), ("nan", None), ("soon", None),
    ("", None), (None, None),
])
def test_retry_after_reads_seconds_or_an_http_date(header: str | None,
                                                   seconds: float | None) -> None:
    from datetime import UTC, datetime

    from pipeline.http import retry_after

    assert retry_after(header, datetime(2026, 12, 3, 12, 0, tzinfo=UTC)) == seconds
