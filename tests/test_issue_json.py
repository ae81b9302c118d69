"""issue.json: docs/architecture.md's shape, identical bytes for identical input, an honest
hash; read back into the same records, and written again into the same bytes."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime

import feedparser  # type: ignore[import-untyped]
import pytest
from support.feeds import Entry
from support.project import SAMPLE_FEED, SAMPLE_WEEK, SEED, SEED_PRS

from pipeline.core.issue import issue_json
from pipeline.errors import BlockedError
from pipeline.model import LAYOUTS, Issue, Item, Pair, Problem, PullFacts, Skipped, Text, Week
from pipeline.stages.build import build
from pipeline.stages.built import load_built

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
    # Must-reads in full, the longer review first; then the scoped one; then the medium.
    assert [item["pr"] for item in data["items"]] == [
        55823, 53721, 56366, 51794, 56317, 55309, 56671, 54934]
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
    assert [p["code"] for p in data["problems"]] == ["mostly-must-read"]  # 7 of 8
    assert re.match(r"^[0-9a-f]{64}$", data["content_hash"])
    scoped = next(i for i in data["items"] if i["pr"] == 56671)
    assert scoped["tier"] == "must-read"
    assert scoped["scope_note"] == "只需读 27 行中的 fixture 本体"
    assert "27" in scoped["why"]["zh"] and "27" in scoped["why"]["en"]


def test_identical_input_gives_identical_bytes_and_a_hash_of_json_and_every_artifact(settings,
                                                                                    tmp_path):
    built = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "a")
    second = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "b")
    assert built.files == second.files
    for name, content in built.files.items():
        assert (tmp_path / "a" / name).read_bytes() == content == (tmp_path / "b" / name
                                                                   ).read_bytes()
    artifacts = {k: v for k, v in built.files.items() if k != "issue.json"}
    assert issue_json.content_hash(built.data, artifacts) == built.data["content_hash"]
    changed = dict(artifacts, **{"email-en.txt": artifacts["email-en.txt"] + b" "})
    assert issue_json.content_hash(built.data, changed) != built.data["content_hash"]
    edited = dict(built.data, repo="someone/else")
    assert issue_json.content_hash(edited, artifacts) != built.data["content_hash"]


def test_problems_and_skipped_shapes(settings, write_feed, tmp_path):
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
    assert item["zh"] is not None
    assert item["en"] is None and item["zh"]["title"] == "标题"


def test_sample_feed_carries_each_seed_pr_twice_and_its_review_verbatim():
    text = SAMPLE_FEED.read_text(encoding="utf-8")
    for pr in SEED_PRS:
        assert text.count(f"https://github.com/vllm-project/vllm/pull/{pr}") == 2
    blocks = [b.strip() for b in SEED.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    seeds = list(zip(blocks[1::2], blocks[2::2], strict=True))
    parsed = feedparser.parse(SAMPLE_FEED.read_bytes())
    chinese = {
        int(e.link.rsplit("/", 1)[1]): (e.title, e.content[0].value)
        for e in parsed.entries if e.content[0].language.lower().startswith("zh")
    }
    assert [chinese[pr] for pr in SEED_PRS] == seeds


# -- read back: issue_json.from_dict ---------------------------------------------------------


def _sample(settings, folder):
    """The sample issue as build wrote it: its file's bytes, its JSON, its artifacts."""
    built = build(settings, week_id=SAMPLE_WEEK, out=folder)
    raw = (folder / "issue.json").read_bytes()
    artifacts = {k: v for k, v in built.files.items() if k != "issue.json"}
    return raw, json.loads(raw), artifacts


def test_the_sample_reads_back_as_records_and_writes_again_as_the_same_bytes(settings, tmp_path):
    raw, data, artifacts = _sample(settings, tmp_path / "o")
    issue = issue_json.from_dict(data)
    assert issue_json.to_dict(issue, artifacts) == data  # the content_hash too
    assert issue_json.dumps(issue_json.with_hash(issue, data["content_hash"])) == raw
    assert issue_json.from_dict(issue_json.to_dict(issue, artifacts)) == issue
    assert issue.id == issue.week.id == "2026-W48"
    assert issue.week.start == datetime(2026, 11, 22, 16, tzinfo=UTC)
    assert issue.week.tz == "Asia/Shanghai"
    assert [item.pr for item in issue.items] == [item["pr"] for item in data["items"]]
    scoped = next(item for item in issue.items if item.pr == 56671)
    assert scoped.scope_note == "只需读 27 行中的 fixture 本体"
    assert scoped.zh is not None and scoped.zh.source == "feed"
    assert all(item.reviewed_at.tzinfo is not None for item in issue.items)
    assert issue.subject == data["subject"]
    assert [p.code for p in issue.problems] == ["mostly-must-read"]


def _odd_issue() -> Issue:
    """Every kind of value issue.json holds, with the odd ones: empty, null, far from ASCII."""
    when = datetime(2026, 11, 23, 1, 2, 3, tzinfo=UTC)
    texts = Text("标题 «quoted» \u202eRTL\u202c 🚀", "<p>a &amp; b<br>\u0000</p>", "",
                 "machine:gpt-4o-mini")
    facts = PullFacts(title="[Bugfix][ROCm] x", author="dév", state="merged",
                      merged_at=when, additions=0, deletions=12, changed_files=1,
                      labels=(), tags=("Bugfix", "ROCm"))
    return Issue(
        id="2026-W48",
        week=Week("2026-W48", datetime(2026, 11, 22, 16, tzinfo=UTC),
                  datetime(2026, 11, 29, 16, tzinfo=UTC), "Asia/Shanghai"),
        repo="vllm-project/vllm",
        items=(
            Item(pr=1, url="https://github.com/vllm-project/vllm/pull/1", tier="must-read",
                 scope_note="只需读 27 行", why=Pair("为什么 \n", "why\t"), reviewed_at=when,
                 areas=(), reading_minutes=Pair(0, 99), zh=texts,
                 en=Text("“Quotes” & <b>", "<p>x</p>", "x\n\ny"),
                 note=Pair("编辑按", None), github=facts),
            Item(pr=999_999_999, url="", tier="skip", scope_note=None, why=Pair("", ""),
                 reviewed_at=when, areas=("kv-cache", "rocm"), reading_minutes=Pair(1, 1),
                 zh=None, en=Text("", "", "", "editor"), note=None, github=None),
        ),
        subject={"zh-en": "周报 · 𝒲eekly", "en": ""},
        preheader={},
        skipped=(Skipped("tag:x,2026:1", "", "", "link is not a pull request"),),
        problems=(Problem("missing-language", "blocking", "no English", pr=1),
                  Problem("over-size-limit", "warning", "big", layout="zh-en"),
                  Problem("unrated", "warning", "no verdict")),
        archive_url="https://example.org/issues/2026-W48/index.html",
        hidden=(3, 56317),
    )


def _through_the_file(issue: Issue) -> Issue:
    return issue_json.from_dict(json.loads(issue_json.dumps(issue_json.to_dict(issue, {}))))


@pytest.mark.parametrize("empty", [False, True], ids=["odd", "empty"])
def test_odd_values_and_an_empty_issue_round_trip(empty):
    issue = _odd_issue()
    if empty:
        issue = replace(issue, items=(), skipped=(), problems=(), subject={}, preheader={})
    assert issue_json.from_dict(issue_json.to_dict(issue, {})) == issue
    assert _through_the_file(issue) == issue


def test_the_prs_the_editor_hid_are_listed_not_problems_and_absent_when_none():
    data = issue_json.to_dict(_odd_issue(), {})
    assert data["hidden"] == [3, 56317]
    assert "hidden" not in {p["code"] for p in data["problems"]}
    plain = issue_json.to_dict(replace(_odd_issue(), hidden=()), {})
    assert "hidden" not in plain  # an issue without hides keeps the bytes it had before


def test_what_build_keeps_for_itself_comes_back_as_the_defaults():
    item = _odd_issue().items[0]
    assert item.github is not None
    working = replace(item, original_lang="en", scopes=Pair("只需读 27 行", None),
                      github=replace(item.github, files=("a.py",)))
    back = _through_the_file(replace(_odd_issue(), items=(working,))).items[0]
    assert back.github is not None
    assert (back.original_lang, back.scopes, back.github.files) == ("zh", Pair(None, None), ())
    assert back == item


def test_a_github_headline_comes_back_as_the_text_the_file_holds():
    odd = _odd_issue()
    issue = replace(odd, items=(replace(odd.items[0], en=None), *odd.items[1:]))
    back = _through_the_file(issue)
    assert back.items[0].en == Text("[Bugfix][ROCm] x", "", "", "github-title")
    assert issue_json.to_dict(back, {}) == issue_json.to_dict(issue, {})


def test_keys_that_may_be_null_may_be_missing_and_older_files_read_as_the_defaults():
    data = issue_json.to_dict(replace(_odd_issue(), number=7), {})
    del data["number"], data["hidden"], data["items"][0]["zh"]["source"]
    issue = issue_json.from_dict(data)
    assert issue.items[0].zh is not None
    assert (issue.number, issue.hidden, issue.items[0].zh.source) == (0, (), "feed")
    for item in data["items"]:
        for key in ("scope_note", "note", "zh", "en", "github", "areas"):
            del item[key]
    del data["problems"][0]["pr"]
    issue = issue_json.from_dict(data)
    assert all((i.scope_note, i.note, i.zh, i.en, i.github, i.areas) == (None, None, None,
                                                                          None, None, ())
               for i in issue.items)
    assert issue.problems[0].pr is None


def test_load_built_refuses_another_schema_version(settings, tmp_path):
    _, data, artifacts = _sample(settings, tmp_path / "o")
    data["schema_version"] = 2
    data["content_hash"] = issue_json.content_hash(data, artifacts)  # a future build's own
    (tmp_path / "o" / "issue.json").write_bytes(issue_json.dumps(data))
    with pytest.raises(BlockedError, match=r"issue.json: not an issue this version reads: "
                                           r"schema_version 2, expected 1; rebuild the issue"):
        load_built(tmp_path / "o")


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d["items"].append(5), r"items\[2\] must be an object, found a number"),
    (lambda d: d["items"][0]["why"].update(en=7), r"items\[0\]\.why\.en must be a string, "
                                                   "found a number"),
    (lambda d: d["items"][1].pop("pr"), r"items\[1\]\.pr must be a whole number, found nothing"),
    (lambda d: d["items"][1].update(pr=True), r"items\[1\]\.pr must be a whole number, found "
                                              "true or false"),
    (lambda d: d["items"][0].update(reviewed_at="soon"), r"items\[0\]\.reviewed_at 'soon' is "
                                                         "not a date and time"),
    (lambda d: d["items"][0].update(reviewed_at="0001-01-01T00:00:00+05:00"),
     r"items\[0\]\.reviewed_at '0001-01-01T00:00:00\+05:00' is not a date and time"),
    (lambda d: d["items"][0]["github"].update(tags=[1]), r"items\[0\]\.github\.tags must be a "
                                                         "list of strings"),
    (lambda d: d["items"][0].update(zh=[]), r"items\[0\]\.zh must be an object or null, "
                                            "found an array"),
    (lambda d: d["problems"][0].update(severity="fatal"), r"problems\[0\]\.severity must be "
                                                          "blocking or warning"),
    (lambda d: d["subject"].update(en=None), "subject must be an object of strings"),
    (lambda d: d["skipped"][0].pop("reason"), r"skipped\[0\]\.reason must be a string"),
    (lambda d: d.update(hidden=["56317"]), "hidden must be a list of whole numbers"),
])
def test_a_malformed_issue_is_one_value_error_saying_where(change, said):
    data = json.loads(json.dumps(issue_json.to_dict(_odd_issue(), {})))
    change(data)
    with pytest.raises(ValueError, match=f"^not an issue: {said}"):
        issue_json.from_dict(data)


def test_a_time_without_a_zone_is_utc():
    data = issue_json.to_dict(_odd_issue(), {})
    data["items"][0]["reviewed_at"] = "2026-11-23T09:02:03"
    data["items"][1]["reviewed_at"] = "2026-11-23T09:02:03+08:00"
    first, second = issue_json.from_dict(data).items
    assert first.reviewed_at == datetime(2026, 11, 23, 9, 2, 3, tzinfo=UTC)
    assert second.reviewed_at == datetime(2026, 11, 23, 1, 2, 3, tzinfo=UTC)
