"""issue.json: DESIGN.md's shape, identical bytes for identical input, an honest hash."""

from __future__ import annotations

import json
import re

from conftest import SAMPLE_FEED, SAMPLE_WEEK, SEED_PRS

from pipeline.core import issue_json
from pipeline.model import LAYOUTS
from pipeline.stages.build import build

Z_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def test_shape_follows_design(settings, tmp_path):
    built = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "out")
    data = json.loads((tmp_path / "out" / "issue.json").read_text(encoding="utf-8"))
    assert data == built.data
    assert data["schema_version"] == 1
    assert data["id"] == "2026-W48"
    assert data["week"] == {"start": "2026-11-22T16:00:00Z", "end": "2026-11-29T16:00:00Z",
                            "tz": "Asia/Shanghai"}
    assert data["repo"] == "vllm-project/vllm"
    assert set(data["subject"]) == set(LAYOUTS) == set(data["preheader"])
    assert all("\n" not in s and "\r" not in s for s in data["subject"].values())
    assert [item["pr"] for item in data["items"]] == [
        53721, 55309, 55823, 51794, 56671, 56366, 56317, 54934]
    assert sorted(item["pr"] for item in data["items"]) == sorted(SEED_PRS)
    for item in data["items"]:
        assert set(item) == {"pr", "url", "tier", "scope_note", "why", "reviewed_at", "areas",
                             "reading_minutes", "note", "zh", "en", "github"}
        assert item["note"] is None
        assert item["url"] == f"https://github.com/vllm-project/vllm/pull/{item['pr']}"
        assert set(item["why"]) == {"zh", "en"} and all(item["why"].values())
        assert Z_TIME.match(item["reviewed_at"])
        assert item["areas"] == sorted(item["areas"])
        assert set(item["reading_minutes"]) == {"zh", "en"}
        for lang in ("zh", "en"):
            assert set(item[lang]) == {"title", "body_html", "body_text", "source"}
            assert item[lang]["source"] == "feed"
    assert data["skipped"] == []
    assert data["problems"] == []
    assert re.match(r"^[0-9a-f]{64}$", data["content_hash"])


def test_the_scoped_review_keeps_its_note(settings, tmp_path):
    data = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o").data
    item = next(i for i in data["items"] if i["pr"] == 56671)
    assert item["tier"] == "must-read"
    assert item["scope_note"] == "只需读 27 行中的 fixture 本体"
    assert "27" in item["why"]["zh"] and "27" in item["why"]["en"]


def test_identical_input_gives_identical_bytes(settings, tmp_path):
    first = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "a")
    second = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b")
    assert first.files == second.files
    for name, content in first.files.items():
        assert (tmp_path / "a" / name).read_bytes() == content == (tmp_path / "b" / name
                                                                   ).read_bytes()


def test_content_hash_covers_json_and_every_artifact(settings, tmp_path):
    built = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o")
    artifacts = {k: v for k, v in built.files.items() if k != "issue.json"}
    assert issue_json.content_hash(built.data, artifacts) == built.data["content_hash"]
    changed = dict(artifacts, **{"email-en.txt": artifacts["email-en.txt"] + b" "})
    assert issue_json.content_hash(built.data, changed) != built.data["content_hash"]
    edited = dict(built.data, repo="someone/else")
    assert issue_json.content_hash(edited, artifacts) != built.data["content_hash"]


def test_problems_and_skipped_shapes(settings, write_feed, tmp_path):
    from conftest import Entry

    feed = write_feed([
        Entry(pr=1, body="没有结论的评审。"),
        Entry(pr=None, link="https://github.com/vllm-project/vllm/issues/5", title="issue"),
    ])
    data = build(settings, week_id=SAMPLE_WEEK, feeds=[str(feed)], out=tmp_path / "o").data
    assert data["skipped"] == [{"id": "tag:test,2026:None/1",
                                "link": "https://github.com/vllm-project/vllm/issues/5",
                                "title": "issue", "reason": "link is not a pull request"}]
    codes = [(p["code"], p["severity"]) for p in data["problems"]]
    # Blocking first: PR 1 has no English text.
    assert codes[0] == ("missing-language", "blocking")
    assert ("unrated", "warning") in codes and ("skipped-entry", "warning") in codes
    missing = data["problems"][0]
    assert missing["pr"] == 1 and "English" in missing["message"]
    item = data["items"][0]
    assert item["en"] is None and item["zh"]["title"] == "标题"


def test_sample_feed_is_what_the_readme_says():
    text = SAMPLE_FEED.read_text(encoding="utf-8")
    for pr in SEED_PRS:
        assert text.count(f"https://github.com/vllm-project/vllm/pull/{pr}") == 2


def test_sample_feed_carries_the_seed_reviews_verbatim():
    import feedparser
    from conftest import SEED

    blocks = [b.strip() for b in SEED.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    seeds = list(zip(blocks[1::2], blocks[2::2], strict=True))
    parsed = feedparser.parse(SAMPLE_FEED.read_bytes())
    chinese = {
        int(e.link.rsplit("/", 1)[1]): (e.title, e.content[0].value)
        for e in parsed.entries if e.content[0].language.lower().startswith("zh")
    }
    assert [chinese[pr] for pr in SEED_PRS] == seeds
