"""The proof report: the right problems for an issue that has them, none for a clean one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.feeds import Entry
from support.project import SAMPLE_WEEK, SEED_PRS, sample_settings

from pipeline.core.email.render import Budget
from pipeline.core.proof import link_verdict, proof
from pipeline.errors import BlockedError
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built

REPO = "vllm-project/vllm"


def built_issue(settings, tmp_path: Path, feeds: list[Path] | None = None) -> BuiltIssue:
    return load_built(build(settings, week_id=SAMPLE_WEEK, feeds=[str(f) for f in feeds or []],
                            out=tmp_path / "issue").out_dir)


def codes(report) -> list[tuple[str, str]]:
    return [(p.severity, p.code) for p in report.problems]


def assert_blocking_first(report) -> None:
    severities = [p.severity for p in report.problems]
    assert severities == sorted(severities, key=lambda s: s != "blocking"), severities


def test_the_clean_sample_has_no_problem_but_the_weeks_question(built):
    report = proof(built, budget=Budget(90), repo=REPO)
    # 7 of its 8 reviews say must-read: the report asks whether they all are.
    assert [(p.code, p.severity) for p in report.problems] == [("mostly-must-read", "warning")]
    assert not report.has_blocking
    assert report.issue_id == SAMPLE_WEEK and report.content_hash == built.content_hash
    assert [s.layout for s in report.sizes] == list(LAYOUTS)
    for size in report.sizes:
        assert size.status == "ok" and size.budget == 90_000
        assert size.bytes == len(built.html(size.layout).encode("utf-8"))
        # Two placeholders per layout, each weighed as a real signed link.
        assert size.weight > size.bytes
        assert 0 < size.percent < 90
    ranking = report.ranking
    assert sorted(r.pr for r in ranking) == sorted(SEED_PRS)
    assert [r.pr for r in ranking] == [item["pr"] for item in built.data["items"]]
    first = ranking[0]
    assert first.tier == "must-read" and first.zh and first.en
    assert first.why.zh and first.why.en and first.reading_minutes.en >= 1
    assert ranking[-1].tier == "medium"
    assert report.hidden == () and report.skipped == ()


def test_a_feed_with_problems(settings, tmp_path, write_feed):
    feed = write_feed([
        # Chinese only: a missing language, blocking.
        Entry(pr=101, title="只有中文", body="值得精读：只有中文版。", lang="zh-CN"),
        # Both languages, no verdict: unrated.
        Entry(pr=102, title="没有结论", body="这个 PR 改了调度器。", lang="zh-CN"),
        Entry(pr=102, title="No verdict", body="This PR changes the scheduler.", lang="en"),
        # Another repository: skipped and reported.
        Entry(pr=103, repo="someone/else", title="别的仓库", body="值得精读。"),
        # A hostile link in the review body: the sanitizer drops it before it reaches HTML.
        Entry(pr=104, title="恶意链接", lang="zh-CN", content_type="html",
              body='值得一读：<a href="javascript:alert(1)">点我</a>。'),
        Entry(pr=104, title="Hostile link", lang="en", content_type="html",
              body='Skim: <a href="javascript:alert(1)">click</a>.'),
    ])
    built = built_issue(settings, tmp_path, [feed])
    report = proof(built, budget=Budget(90), repo=REPO)
    found = codes(report)
    assert ("blocking", "missing-language") in found
    assert ("warning", "unrated") in found
    assert ("warning", "skipped-entry") in found
    missing = next(p for p in report.problems if p.code == "missing-language")
    assert missing.pr == 101
    assert report.has_blocking and report.blocking[0].code == "missing-language"
    assert_blocking_first(report)
    # Sanitized away: nothing of the script link reached any layout, so no link problem.
    assert all("javascript:" not in built.html(layout) for layout in LAYOUTS)
    assert not [c for c in found if c[1] in ("unsafe-link", "suspicious-link")]
    assert [s.link for s in report.skipped] == ["https://github.com/someone/else/pull/103"]
    ranked = {r.pr: r for r in report.ranking}
    assert ranked[101].en is None and ranked[102].tier == "unrated"
    assert report.ranking[-1].pr == 102  # unrated: last


def test_over_budget_is_blocking_and_near_it_a_warning(tmp_path):
    tiny = sample_settings(tmp_path, extra="[issue]\nsize_budget_kb = 1\n")
    built = built_issue(tiny, tmp_path)
    report = proof(built, budget=Budget(1), repo=REPO)
    over = [p for p in report.problems if p.code == "over-size-limit"]
    # Build already recorded each layout as over; the proof does not say it twice.
    assert sorted(str(p.layout) for p in over) == sorted(LAYOUTS)  # none without a layout
    assert all(p.severity == "blocking" for p in over)
    assert all(s.status == "over" and s.budget == 1000 for s in report.sizes)
    assert report.has_blocking
    assert_blocking_first(report)


def test_the_proof_weighs_against_the_budget_it_is_given(built):
    sizes = {s.layout: s for s in proof(built, budget=Budget(90), repo=REPO).sizes}
    zh_en = sizes["zh-en"].weight
    near = proof(built, budget=Budget(zh_en // 1000 + 1), repo=REPO)
    assert ("zh-en", "near-size-limit", "warning") in {
        (p.layout, p.code, p.severity) for p in near.problems}
    assert not near.has_blocking
    over = proof(built, budget=Budget(zh_en // 1000 - 1), repo=REPO)
    flagged = {p.layout for p in over.problems if p.code == "over-size-limit"}
    assert "zh-en" in flagged and "zh" not in flagged
    message = next(p.message for p in over.problems if p.layout == "zh-en")
    assert "% of the" in message and "KB" in message
    assert over.has_blocking


HOSTILE = (
    '<a href="javascript:alert(1)">a</a>'
    '<a href=" JaVaScRiPt:alert(2)">b</a>'
    '<a href="data:text/html,hi">c</a>'
    '<a href="mailto:someone@example.org">d</a>'
    '<a href="https://github.com/evil/fork/pull/1">e</a>'
    '<a href="https://github.com/vllm-project/vllm/blob/main/setup.py">f</a>'
    '<a href="https://github.com/vllm-project/vllm/pull/53721/files">g</a>'
    '<img src="https://example.org/pixel.png">'
    '<img src="https://example.org/logo.png" alt="">'
)


def edited(built: BuiltIssue, layout: str, extra: str) -> BuiltIssue:
    html = built.html(layout).replace("</body>", extra + "</body>")
    return replace(built, artifacts={**built.artifacts, f"email-{layout}.html": html})


def test_hostile_links_in_a_hand_edited_issue(settings, tmp_path):
    built = built_issue(settings, tmp_path)
    tampered = edited(built, "en", HOSTILE)
    report = proof(tampered, budget=Budget(90), repo=REPO)
    messages = {code: [p for p in report.problems if p.code == code]
                for code in {p.code for p in report.problems}}
    unsafe = messages["unsafe-link"]
    assert len(unsafe) == 3 and all(p.severity == "blocking" for p in unsafe)
    assert all(p.layout == "en" for p in unsafe)
    suspicious = sorted(p.message for p in messages["suspicious-link"])
    assert len(suspicious) == 3 and all(p.severity == "warning"
                                        for p in messages["suspicious-link"])
    assert any("mailto:" in m and "not an http(s) link" in m for m in suspicious)
    assert any("evil/fork" in m and "not to a PR of vllm-project/vllm" in m for m in suspicious)
    assert any("blob/main/setup.py" in m for m in suspicious)
    assert not any("53721/files" in p.message for p in report.problems)  # a PR of the repo
    (no_alt,) = messages["image-without-alt"]
    assert "pixel.png" in no_alt.message and "logo.png" not in no_alt.message
    assert report.has_blocking
    assert_blocking_first(report)
    # Only the edited layout is affected; the placeholders of the others are expected.
    assert {p.layout for p in report.problems if p.code != "mostly-must-read"} == {"en"}

    # Why in memory: an issue edited on disk is refused before any proof can be made.
    path = built.folder / "email-en.html"
    path.write_text(tampered.html("en"), encoding="utf-8")
    with pytest.raises(BlockedError, match="changed since it was built"):
        load_built(built.folder)


def test_template_leftovers_are_blocking(built):
    html_left = edited(built, "zh", "<p>{{ item.title }}</p><mj-text>x</mj-text>")
    report = proof(html_left, budget=Budget(90), repo=REPO)
    (left,) = [p for p in report.problems if p.code == "template-leftover"]
    assert left.severity == "blocking" and left.layout == "zh"
    assert "{{" in left.message and "<mj-" in left.message
    text = built.text("en") + "\n{% if x %}\n"
    text_left = replace(built, artifacts={**built.artifacts, "email-en.txt": text})
    (left,) = [p for p in proof(text_left, budget=Budget(90), repo=REPO).problems
               if p.code != "mostly-must-read"]
    assert (left.code, left.layout) == ("template-leftover", "en")
    assert "email-en.txt" in left.message


def test_a_review_quoting_template_code_is_no_leftover(settings, tmp_path, write_feed):
    feed = write_feed([
        Entry(pr=201, lang="zh-CN", title="聊天模板 {{ messages }} 的渲染",
              body="值得精读：`{{ messages }}` 与 {% for m in messages %} 的渲染顺序修正。"),
        Entry(pr=201, lang="en", title="Chat template {{ messages }} rendering",
              body="Must read: fixes the order of `{{ messages }}` and {% for m in messages %}."),
    ])
    built = built_issue(settings, tmp_path, [feed])
    assert all("{{ messages }}" in built.html(layout) for layout in LAYOUTS)
    report = proof(built, budget=Budget(90), repo=REPO)
    assert report.problems == ()


def test_the_editors_hidden_prs_are_listed(settings, tmp_path):
    folder = settings.resolve(settings.paths.editorial_dir)
    folder.mkdir(parents=True)
    (folder / f"{SAMPLE_WEEK}.toml").write_text(
        '[56317]\nhide = true\n\n[54934]\npriority = "must-read"\nnote = "Read this first"\n')
    report = proof(built_issue(settings, tmp_path), budget=Budget(90), repo=REPO)
    assert report.hidden == (56317,)
    assert 56317 not in [r.pr for r in report.ranking]
    promoted = next(r for r in report.ranking if r.pr == 54934)
    assert promoted.note is not None
    assert promoted.tier == "must-read" and promoted.note.en == "Read this first"
    # The editor's deliberate act: listed, and no warning about it.
    assert "hidden" not in {code for _, code in codes(report)}
    assert all("56317" not in p.message for p in report.problems)


@pytest.mark.parametrize(("href", "verdict"), [
    ("https://github.com/vllm-project/vllm/pull/1", None),
    ("https://GitHub.com/vllm-project/vllm/pull/1#discussion_r2", None),
    ("http://127.0.0.1:8000/issues/2026-W48/index.html", None),
    ("%%unsubscribe_url%%", None),
    ("%%preferences_url%%", None),
    ("java\tscript:alert(1)", "unsafe"),
    ("vbscript:msgbox", "unsafe"),
    ("file:///etc/passwd", "unsafe"),
    ("ftp://example.org/x", "scheme"),
    ("#top", "scheme"),
    ("#pr-53721", None),  # the contents list's link to a card in the same message
    ("#pr-x", "scheme"),
    ("#tier-must-read", None),  # a long week's contents: one link per tier, in the message
    ("#more", None),  # ... or to the titles listed after the cards
    ("#more-x", "scheme"),
    ("/relative/path", "scheme"),
    ("https://github.com/vllm-project/vllm/issues/5", "github"),
    ("https://github.com/vllm-project/vllm-fork/pull/5", "github"),
    ("https://github.com/vllm-project/vllm/pull/999999999", None),
    ("https://github.com/vllm-project/vllm/pull/" + "9" * 5000, "github"),
    ("https://github.com/vllm-project/vllm/pull/\u0661\u0662", "github"),
])
def test_link_verdicts(href, verdict):
    assert link_verdict(href, REPO) == verdict


def test_a_headline_its_review_repeats_leaves_the_quoted_template_code_alone(
        settings, tmp_path, write_feed):
    # The headline, shorter, must not be taken out of the body before the body itself.
    feed = write_feed([
        Entry(pr=202, lang="zh-CN", title="Chat template order",
              body="值得精读：Chat template order 在 {{ messages }} 渲染时被修正，不再是 'x'。"),
        Entry(pr=202, lang="en", title="Chat template order",
              body="Must read: Chat template order of {{ messages }} isn't what it was."),
    ])
    report = proof(built_issue(settings, tmp_path, [feed]), budget=Budget(90), repo=REPO)
    assert report.problems == ()
