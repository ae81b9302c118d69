"""PR facts from GitHub, against a loopback server answering in GitHub's documented shapes."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.commands import newsletter_main
from support.feeds import Entry, built_issue, feed_project
from support.http_server import Answer, HttpServer, Reply, Request
from support.project import SAMPLE_WEEK

from pipeline.config import SiteSettings
from pipeline.core.issue import issue_json
from pipeline.core.issue.pulls import link_files, title_tags
from pipeline.core.site.site import Site
from pipeline.sources.github import GithubClient, parse_pull
from pipeline.stages.build import build
from pipeline.stages.built import load_built

FIXTURES = Path(__file__).resolve().parent / "data" / "github"
REPO = "vllm-project/vllm"


def rate_limited(request: Request) -> Reply:
    """What GitHub answers once the hour's requests are spent, until 2100-01-01: far away."""
    return Reply(403, b'{"message": "API rate limit exceeded"}',
                 {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "4102444800"})


def pulls(request: Request) -> Reply:
    """tests/data/github/ in GitHub's shapes, with ETags; anything else is a 404."""
    path = request.path.split("?")[0]
    prefix = f"/repos/{REPO}/pulls/"
    name = None
    if path.startswith(prefix):
        rest = path[len(prefix):].split("/")
        name = (f"pull-{rest[0]}.json" if len(rest) == 1
                else f"files-{rest[0]}.json" if rest[1:] == ["files"] else None)
    fixture = FIXTURES / name if name else None
    if fixture is None or not fixture.exists():
        return Reply(404)
    body = fixture.read_bytes()
    etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
    if request.headers.get("if-none-match") == etag:
        return Reply(304, headers={"ETag": etag})
    return Reply(200, body, {"Content-Type": "application/json; charset=utf-8", "ETag": etag,
                             "x-ratelimit-remaining": "4999"})


@pytest.fixture
def github(serve_http: Callable[[Answer], HttpServer]) -> HttpServer:
    return serve_http(pulls)


def test_the_pull_and_its_files_are_asked_with_the_token_and_githubs_headers(github, tmp_path):
    """The facts read from the answers: test_a_build_shows_the_facts_and_the_github_headline."""
    client = GithubClient(github.url(), "t0ken", tmp_path / "github")
    assert client.pull(REPO, 53721) is not None
    files = client.files(REPO, 53721)
    assert files and "tests/v1/kv_connector/unit/test_moriio_connector.py" in files
    first, second = github.requests
    assert first.path == f"/repos/{REPO}/pulls/53721"
    headers = first.headers
    assert headers["authorization"] == "Bearer t0ken"
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == "2022-11-28"
    assert headers["user-agent"].startswith("vllm-pr-weekly/")
    assert second.path == f"/repos/{REPO}/pulls/53721/files?per_page=100"
    assert client.problems() == []


def test_a_short_rate_limit_is_waited_out(github, tmp_path):
    waits: list[float] = []
    github.answer = rate_limited

    def recover(seconds: float) -> None:
        waits.append(seconds)
        github.answer = pulls

    client = GithubClient(github.url(), None, tmp_path / "github", sleep=recover,
                          clock=lambda: 4102444800 - 3)
    facts = client.pull(REPO, 56317)
    assert waits == [3] and facts is not None and facts.author == "nixl-dev"
    assert client.problems() == []


@pytest.mark.parametrize(("title", "tags"), [
    ("[Bugfix][ROCm] Fix the MoE kernel", ("Bugfix", "ROCm")),
    ("[KV Connector] NIXL push registration", ("KV Connector",)),
    ("[Frontend][Rust]", ("Frontend", "Rust")),
    ("[Bugfix] [Core] [V1] spaced stack", ("Bugfix", "Core", "V1")),
    ("Fix the scheduler [WIP]", ("WIP",)),
    ("[Misc][Doc] fix `foo[0]` docs", ("Misc", "Doc", "0")),
    ("[ Model ] padded", ("Model",)),
    ("[CI/Build][torch.compile] odd ones", ("CI/Build", "torch.compile")),
    ("[] empty and [[nested]]", ("nested",)),
    ("No tags at all", ()),
    ("[中文标签] unicode", ("中文标签",)),
])
def test_title_tags(title, tags):
    assert title_tags(title) == tags


def test_only_backticked_paths_of_the_pr_become_links():
    files = ("tests/v1/kv_connector/unit/test_moriio_connector.py", "vllm/v1/core/sched.py")
    html = ('<p>See <code>test_moriio_connector.py</code>, '
            '<code>vllm/v1/core/sched.py</code>, <code>foo.py</code> and '
            'test_moriio_connector.py in prose.</p>')
    out = link_files(html, files, "https://github.com/vllm-project/vllm/pull/53721")
    anchor = hashlib.sha256(files[0].encode()).hexdigest()
    assert (f'<a href="https://github.com/vllm-project/vllm/pull/53721/files#diff-{anchor}">'
            '<code>test_moriio_connector.py</code></a>') in out
    assert out.count("<a ") == 2
    assert "<code>foo.py</code> and" in out and "test_moriio_connector.py in prose" in out
    assert link_files(html, (), "https://x") == html


def _project(tmp_path: Path) -> Path:
    return feed_project(tmp_path, [
        Entry(pr=53721, title="MoRI-IO 连接器支持 SWA+HMA",
              body="值得精读，对照 `test_moriio_connector.py` 阅读。"),
        Entry(pr=56317, title="Both", body="Must read, lock it.", lang="en", id="en-56317"),
        Entry(pr=56317, title="NIXL 加锁", body="值得精读。", lang="zh-CN", id="zh-56317",
              published="2026-11-25T10:00:00+08:00"),
    ])


def _build(cwd: Path, url: str, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], cwd,
                             NEWSLETTER_GITHUB_ENABLED="true", NEWSLETTER_GITHUB_API_URL=url)
    return result, built_issue(cwd)


def test_a_build_shows_the_facts_and_the_github_headline(github, tmp_path, monkeypatch):
    cwd = _project(tmp_path)
    result, data = _build(cwd, github.url(), monkeypatch)
    assert result.returncode == 0, result.stderr
    item = next(i for i in data["items"] if i["pr"] == 53721)
    assert item["github"] == {
        "title": "[KV Connector][ROCm] MoRI-IO connector: support SWA + HMA",
        "author": "mori-dev", "state": "merged", "merged_at": "2026-11-24T03:11:59Z",
        "additions": 412, "deletions": 57, "changed_files": 6,
        "labels": ["kv-connector", "rocm", "v1"], "tags": ["KV Connector", "ROCm"]}
    assert item["areas"] == ["kv-connector", "rocm", "v1"]  # the feed gave none
    # The PR's own title is the English headline, marked as such, with no body: a headline
    # is not a translation, so the item is still missing its English text.
    assert item["en"] == {"title": "[KV Connector][ROCm] MoRI-IO connector: support SWA + HMA",
                          "body_html": "", "body_text": "", "source": "github-title"}
    # The English subject names it too, not the Chinese title.
    assert data["subject"]["en"].startswith(
        "vLLM PR Weekly · No. 1 · 23–29 Nov · [KV Connector][ROCm]")
    assert ("missing-language", 53721) in {(p["code"], p.get("pr")) for p in data["problems"]}
    assert not [p for p in data["problems"] if p["code"] == "github-unavailable"]
    folder = cwd / "build" / "issues" / SAMPLE_WEEK
    text = (folder / "email-en.txt").read_text()
    assert ("GitHub: @mori-dev · merged 2026-11-24 · +412/\u221257 · [KV Connector] [ROCm]"
            in text)
    assert "GitHub: @nixl-dev · open · +108/\u22124 · [Bugfix] [KV Connector]" in text
    assert next(i for i in data["items"] if i["pr"] == 56317)["github"]["merged_at"] is None
    assert ("[KV Connector][ROCm] MoRI-IO connector: support SWA + HMA (The PR's own title "
            "on GitHub (a headline only))") in " ".join(text.split())  # wrapped at 78
    html = (folder / "email-zh-en.html").read_text()
    assert "GitHub: @mori-dev · merged 2026-11-24" in html
    anchor = hashlib.sha256(b"tests/v1/kv_connector/unit/test_moriio_connector.py").hexdigest()
    assert f"/pull/53721/files#diff-{anchor}" in html
    built = load_built(folder)
    pages = {o.key: o.data.decode() for o in Site(SiteSettings()).issue_objects(built)}
    en_page = pages[f"issues/{SAMPLE_WEEK}/en.html"]
    assert ("GitHub: @mori-dev · merged 2026-11-24 · +412/\u221257 · [KV Connector] [ROCm]"
            in en_page)
    assert "The PR&#39;s own title on GitHub (a headline only)" in en_page
    assert "authorization" not in github.requests[0].headers  # no GITHUB_TOKEN, no key
    # A second build asks with If-None-Match and reads the same facts from its cache.
    served = len(github.requests)
    again, same = _build(cwd, github.url(), monkeypatch)
    assert again.returncode == 0 and same == data
    assert [reply.status for reply in github.replies[served:]] == [304] * served
    assert all(r.headers["if-none-match"].startswith('"') for r in github.requests[served:])


@pytest.mark.parametrize("mode", ["rate-limited", "offline"])
def test_a_rate_limited_or_offline_build_is_green_without_facts(github, tmp_path, unused_port,
                                                                 mode, monkeypatch):
    """A rate limit far off is not waited for: one request, then none for the rest of the build."""
    github.answer = rate_limited  # and offline, nothing listens on the port asked
    url = f"http://127.0.0.1:{unused_port}" if mode == "offline" else github.url()
    result, data = _build(_project(tmp_path), url, monkeypatch)
    assert result.returncode == 0, result.stderr
    assert all(item["github"] is None for item in data["items"])
    (unavailable,) = [p for p in data["problems"] if p["code"] == "github-unavailable"]
    assert unavailable["severity"] == "warning"
    assert len(github.requests) == (mode == "rate-limited")


def test_disabled_by_default_means_no_facts(tmp_path):
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], _project(tmp_path))
    assert result.returncode == 0, result.stderr
    assert all(item["github"] is None for item in built_issue(tmp_path)["items"])


def test_an_issue_from_before_github_facts_still_renders_on_the_site(settings, tmp_path):
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "out").out_dir)
    data = json.loads(json.dumps(built.data))
    for item in data["items"]:
        del item["github"]  # an issue.json written before the key existed
    pages = Site(settings.site).issue_objects(replace(built, issue=issue_json.from_dict(data)))
    assert all(b"GitHub: @" not in page.data for page in pages)


def test_a_github_title_and_labels_carry_no_bidi_or_invisible_character():
    facts = parse_pull({"title": "[Bugfix]\u202e TRELA\u200b x\n y", "state": "open",
                        "labels": [{"name": "rocm\u2066"}, {"name": "\u200b"}]})
    assert facts.title == "[Bugfix] TRELA x y"
    assert facts.labels == ("rocm",)
