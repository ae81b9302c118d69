"""Feeds written to break a build, run through the real command line: each must end in exit 0
with the hostile part neutralised or skipped with a reason (a crash shows as a negative return
code, and fails like any other wrong exit code).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.commands import newsletter_main as run
from support.feeds import Entry, atom, built_issue, feed_project, raw_atom
from support.markup import nesting
from support.project import SAMPLE_FEED, SAMPLE_WEEK

from pipeline.core.issue.sanitize import MAX_BODY_CHARS, MAX_NESTING
from pipeline.model import LAYOUTS

#: Every character that reorders or hides text.
BIDI = ("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\ufeff"
        "\u061c\u200e\u200f\u2060\u2061\u2062\u2063\u2064")
UNSAFE = re.compile(f"[{BIDI}\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")
PR = 60001


def build(tmp_path: Path, feed: bytes) -> dict[str, Any]:
    result = run(["build", "--week", SAMPLE_WEEK], feed_project(tmp_path, feed))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return built_issue(tmp_path)


def raw_entry(lang: str, title: str, body: str) -> str:
    """An entry whose title and content are given as the XML text itself (so ``&amp;#1;`` is
    an HTML character reference inside the feed's HTML)."""
    return (f'<entry xml:lang="{lang}"><id>tag:t,2026:{PR}/{lang}</id>'
            f'<title type="html">{title}</title>'
            f'<link rel="alternate" href="https://github.com/vllm-project/vllm/pull/{PR}"/>'
            "<published>2026-11-24T10:00:00+08:00</published>"
            f'<content type="html">{body}</content></entry>')


# -- bidi and invisible characters ----------------------------------------------------

@pytest.mark.subprocess  # publishing runs Pagefind
def test_bidi_and_invisible_characters_reach_no_subject_page_mail_or_feed(tmp_path):
    zh_title = "修复\u202eSECURITY ALERT\u202c 调度器 &amp;#x202E;死锁\u200b\u2066x\u2069"
    en_title = "Fix \u202eSECURITY ALERT\u202c scheduler &amp;#x2067;deadlock\ufeff\u200d"
    body = ("&lt;p&gt;值得精读\u202e。调度器\u2067在 &amp;#x202E;负载下\u200b死锁&lt;/p&gt;")
    en_body = ("&lt;p&gt;Must read\u202e. The scheduler &amp;#x2066;deadlocks\u200f under "
               "load&lt;/p&gt;")
    feed = raw_atom(raw_entry("zh-CN", zh_title, body) + raw_entry("en", en_title, en_body),
                    feed_lang=None)
    data = build(tmp_path, feed)
    (item,) = data["items"]
    assert item["zh"]["title"] == "修复SECURITY ALERT 调度器 死锁x"
    assert item["en"]["title"] == "Fix SECURITY ALERT scheduler deadlock"
    for layout in LAYOUTS:
        subject = data["subject"][layout]
        assert not UNSAFE.search(subject), (layout, subject)
        assert "SECURITY ALERT" in subject
    published = run(["publish", "--week", SAMPLE_WEEK], tmp_path)
    assert published.returncode == 0, published.stderr
    site = tmp_path / "build" / "site"
    outputs = [p for p in (tmp_path / "build").rglob("*") if p.is_file()
               and p.suffix in (".json", ".html", ".txt", ".xml")]
    assert site / "feed.xml" in outputs
    assert any(p.parent.parent.name == "issues" and p.name == "index.html" for p in outputs)
    assert len([p for p in outputs if p.name.startswith("email-")]) == 2 * len(LAYOUTS)
    for path in outputs:
        text = path.read_text(encoding="utf-8")
        assert not UNSAFE.search(text), path
        # Nor as character references a browser or feed reader would decode again.
        assert not re.search(r"&#x0*(202[a-e]|206[6-9]|200[b-f]|feff);", text, re.I), path
        if path.name in ("issue.json", "feed.xml") or path.name.startswith("email-"):
            assert "SECURITY ALERT" in text, path


# -- control characters decoded by the sanitizer ------------------------------------

def test_control_character_references_in_content_and_titles_build(tmp_path):
    refs = "&amp;#1; &amp;#xFFFE; &amp;#x0B; &amp;#x1F; &amp;#x81; &amp;#xFDD0;"
    feed = raw_atom(
        raw_entry("zh-CN", f"调度器 {refs} 死锁", f"&lt;p&gt;值得精读。{refs} 内容&lt;/p&gt;")
        + raw_entry("en", f"Scheduler {refs} deadlock", f"&lt;p&gt;Must read. {refs} x&lt;/p&gt;"),
        feed_lang=None)
    data = build(tmp_path, feed)
    (item,) = data["items"]
    assert item["pr"] == PR
    assert item["en"]["title"] == "Scheduler deadlock"
    assert "内容" in item["zh"]["body_html"]
    for path in (tmp_path / "build").rglob("*.*"):
        assert not UNSAFE.search(path.read_text(encoding="utf-8")), path


# -- nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["b", "blockquote", "div", "ul"])
def test_seven_hundred_nested_tags_build_flattened_and_say_so(tmp_path, tag):
    # Past both bounds (256 before nh3, 32 after) and within MAX_BODY_CHARS, so the text at
    # the bottom is still there to keep (10,000 levels are cut first: the test below).
    deep = f"<{tag}>" * 700 + "深处的文字" + f"</{tag}>" * 700
    feed = atom([
        Entry(pr=PR, title="嵌套", body=f"<p>值得精读。</p>{deep}", content_type="html"),
        Entry(pr=PR, title="Nesting", body="Must read. Deep text.", lang="en", id="en"),
    ])
    data = build(tmp_path, feed)
    (item,) = data["items"]
    body = item["zh"]["body_html"]
    assert "深处的文字" in body
    assert nesting(body) <= MAX_NESTING
    # Flattened, not stripped: an allowed tag keeps its outer levels (div is not allowed at all).
    assert (f"<{tag}>" in body) is (tag != "div")
    # And said: the editor proofing the issue learns the feed's body was changed.
    said = [(p["code"], p.get("pr")) for p in data["problems"] if p["code"].startswith("body-")]
    assert said == [("body-flattened", PR)]
    for layout in ("zh-en", "en-zh", "zh"):
        email = tmp_path / "build" / "issues" / SAMPLE_WEEK / f"email-{layout}.html"
        assert "深处的文字" in email.read_text(encoding="utf-8")


# -- thousands of categories --------------------------------------------------

@pytest.mark.subprocess  # publishing runs Pagefind
@pytest.mark.slow
def test_thousands_of_categories_leave_the_email_whole_and_the_archive_small(tmp_path):
    """An item keeps 8 areas, an issue 64 names: the email stays whole and the archive small."""
    terms = "".join(f'<category term="area-{n:04}"/>' for n in range(3_000))
    feed = SAMPLE_FEED.read_bytes().replace(b'<category term="nixl"/>',
                                            terms.encode(), 1)
    data = build(tmp_path, feed)
    assert not [p for p in data["problems"] if p["code"] in ("items-shrunk", "over-size-limit")]
    (dropped,) = [p for p in data["problems"] if p["code"] == "areas-dropped"]
    (item,) = [item for item in data["items"] if item["pr"] == dropped["pr"]]
    assert dropped["severity"] == "warning" and "2,994 of its 3,002" in dropped["message"]
    # kv-connector, which two other PRs carry too, then the first in sorted order
    assert item["areas"] == [f"area-{n:04}" for n in range(7)] + ["kv-connector"]
    for layout in LAYOUTS:  # every item keeps its card
        email = (tmp_path / "build" / "issues" / SAMPLE_WEEK / f"email-{layout}.html").read_text()
        assert all(f'id="pr-{i["pr"]}"' in email for i in data["items"]), layout
    published = run(["publish", "--week", SAMPLE_WEEK], tmp_path)
    assert published.returncode == 0, published.stderr
    written = re.search(r"(\d+) object\(s\) written", published.stdout)
    areas = list((tmp_path / "build" / "site" / "areas").iterdir())
    assert written and int(written[1]) < 100, published.stdout  # the sample's: 58
    assert len(areas) < 30  # the sample's: 14


# -- PR numbers -------------------------------------------------------------------------

@pytest.mark.parametrize("content_type", ["html", "text"])
def test_a_body_of_megabytes_is_cut_said_and_costs_no_more_than_a_long_review(tmp_path,
                                                                            content_type):
    """Cut at ``MAX_BODY_CHARS``, the review is kept and the proof says how long it was."""
    unit = "<b>`x`</b> 细节 &amp; " if content_type == "html" else "细节 `x` & more\n"
    huge = "值得精读。" + unit * (3_000_000 // len(unit))
    feed = atom([
        Entry(pr=PR, title="巨大", body=huge, content_type=content_type),
        Entry(pr=PR, title="Huge", body="Must read. A normal review.", lang="en", id="en"),
    ])
    data = build(tmp_path, feed)
    (item,) = data["items"]
    assert item["tier"] == "must-read"  # the verdict is read from what is kept
    assert len(item["zh"]["body_text"]) <= MAX_BODY_CHARS
    assert "细节" in item["zh"]["body_html"]
    (said,) = [p for p in data["problems"] if p["code"] == "body-shortened"]
    assert said["pr"] == PR and said["severity"] == "warning"
    length = re.search(r"body is ([\d,]+) characters; only its first 20,000 are kept",
                       said["message"])
    assert length and int(length[1].replace(",", "")) > 2_900_000, said["message"]
    assert item["en"]["body_text"] == "Must read. A normal review."  # the other is untouched


#: A PR number of 1 to 9 ASCII digits above 0 is one; the rest are skipped with a reason.
NUMBERS = {"huge": "9" * 5000, "ten digits": "1234567890", "zero": "0", "zeros": "000",
           "arabic-indic": "\u0661\u0662\u0663", "full-width": "\uff11\uff12",
           "superscript": "1\u00b2", "largest": "999999999"}


def test_a_pr_number_outside_1_to_9_digits_is_skipped_and_the_rest_previews(tmp_path):
    huge = NUMBERS["huge"]
    link = f'<a href="https://github.com/vllm-project/vllm/pull/{huge}">#{huge}</a>'
    cited = f"<p>Must read. See {link} and #{huge} and vllm-project/vllm#{huge}.</p>"
    feed = atom([  # cited in both languages, the proof reads it in every layout
        Entry(pr=PR, title="正常", body=f"<p>值得精读。见 {link}。</p>", content_type="html"),
        Entry(pr=PR, title="Fine", body=cited, content_type="html", lang="en", id="en"),
        *(Entry(link=f"https://github.com/vllm-project/vllm/pull/{number}", title=name, id=name)
          for name, number in NUMBERS.items()),
        Entry(link="https://github.com/vllm-project/vllm/pull/999999999", title="Largest",
              body="Must read.", lang="en", id="largest-en"),
    ])
    result = run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"],
                 feed_project(tmp_path, feed))
    assert result.returncode == 0, result.stderr
    data = built_issue(tmp_path)
    assert sorted(item["pr"] for item in data["items"]) == [PR, 999_999_999]
    assert huge in next(i for i in data["items"] if i["pr"] == PR)["en"]["body_html"]
    reasons = {entry["id"]: entry["reason"] for entry in data["skipped"]}
    assert "5,000 digits" in reasons["huge"]
    for name in ("huge", "ten digits", "zero", "zeros"):
        assert "is not 1 to 9 digits above 0" in reasons[name] and len(reasons[name]) < 100
    for name in ("arabic-indic", "full-width", "superscript"):
        assert reasons[name] == "link is not a pull request"


# -- dates and ids ----------------------------------------------------------------------

def test_invalid_dates_and_an_id_used_for_two_prs_are_skipped_with_reasons(tmp_path):
    feed = atom([
        Entry(pr=PR, title="正常", body="值得精读。"),
        Entry(pr=PR, title="Fine", body="Must read.", lang="en", id="en"),
        Entry(pr=60002, title="小时", published="2026-11-24T99:00:00+08:00", id="hour-99"),
        Entry(pr=60003, title="二月", published="2026-02-30T10:00:00+08:00", id="feb-30"),
        Entry(pr=60004, title="旧", published="2026-11-24T10:00:00+08:00", id="twice"),
        Entry(pr=60005, title="新", published="2026-11-25T10:00:00+08:00", id="twice"),
    ])
    data = build(tmp_path, feed)
    skipped = {(entry["id"], entry["link"].rsplit("/", 1)[1]): entry["reason"]
               for entry in data["skipped"]}
    assert "hour must be in 0..23" in skipped[("hour-99", "60002")]
    assert "day is out of range" in skipped[("feb-30", "60003")]
    assert "PR #60005" in skipped[("twice", "60004")]
    assert sorted(item["pr"] for item in data["items"]) == [PR, 60005]
    assert {p["message"] for p in data["problems"] if p["code"] == "skipped-entry"} >= {
        f"feed entry twice skipped: {skipped[('twice', '60004')]}"}
