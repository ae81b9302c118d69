"""The size budget: the plain search over how many items show in full finds the first plan
that fits, on the sample and on generated weeks of 1 to 200 items, for every layout and for
interest variants. "The first plan that fits" is checked where it is: the chosen plan fits,
and the plan with one more item shown does not.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from support.feeds import Entry, atom
from support.project import assembled

from pipeline.config import load
from pipeline.core.email.mime import sent_size
from pipeline.core.email.render import Budget, Footer, Renderer, _Plan, with_reserved_links
from pipeline.core.issue.interests import Variant, interests_first
from pipeline.core.issue.rank import TIERS
from pipeline.model import LAYOUTS, Issue, Text

BASE = "https://vllm-weekly.example/archive"


@pytest.fixture(scope="module")
def sample_issue(tmp_path_factory) -> Issue:
    return assembled(load(None, {}, cwd=tmp_path_factory.mktemp("cfg")))[0]


def week_of(sample: Issue, count: int, seed: int = 0) -> Issue:
    """``count`` items made of the sample's, with new numbers, tiers, lengths and areas,
    some without one language, ranked by tier as ``rank`` does."""
    rng = random.Random(seed * 1000 + count)
    items = []
    for i in range(count):
        item = sample.items[i % len(sample.items)]
        pr = 60000 + i
        repeat = rng.choice((1, 1, 2, 3))
        texts: dict[str, Text | None] = {}
        for lang in ("zh", "en"):
            text = item.text(lang)
            if text is None or rng.random() < 0.05:
                texts[lang] = None
                continue
            texts[lang] = Text(f"{text.title} {i}", text.body_html * repeat,
                               text.body_text * repeat, text.source)
        items.append(replace(
            item, pr=pr, url=f"https://github.com/vllm-project/vllm/pull/{pr}",
            tier=rng.choice(("must-read", "medium", "medium", "skim", "skim", "unrated")),
            areas=rng.choice((("rocm",), ("v1", "%%unsubscribe_url%%"), ("<script>",),
                              ("x" * 120,), ())),
            zh=texts["zh"] or (None if texts["en"] else item.zh), en=texts["en"]))
    order = {tier.name: at for at, tier in enumerate(TIERS)}
    items.sort(key=lambda item: order[item.tier])
    return replace(sample, items=tuple(items))


def weight_of(renderer: Renderer, issue: Issue, variant: Variant, plan: _Plan) -> int:
    html, text = renderer._parts(issue, variant, BASE, plan, Footer())
    return max(Budget(90).weigh(html, html=True), Budget(90).weigh(text))


def check(renderer: Renderer, issue: Issue, variant: Variant, budget: int) -> None:
    """Fitted to ``budget`` bytes (whole KB): the chosen plan fits (or is over only with
    everything folded) and the plan with one more item shown does not; the result's parts
    are that plan's."""
    result, problem = renderer.render_variant(issue, variant, BASE, Budget(budget // 1000))
    items = interests_first(issue.items, variant.areas)
    n = len(items)
    brief, folded = len(result.brief), result.folded
    shown = n - brief - folded
    plan = _Plan(items[:shown], items[shown:n - folded], folded)
    assert tuple(i.pr for i in plan.brief) == result.brief
    assert (result.html, result.text) == renderer._parts(issue, variant, BASE, plan, Footer())
    size = max(Budget(90).weigh(result.html, html=True), Budget(90).weigh(result.text))
    if problem is not None and problem.code == "over-size-limit":
        assert size > budget and folded == n
        return
    assert size <= budget, (n, variant, size, budget)
    if brief and not folded:  # one more in full would be over
        more = _Plan(items[:shown + 1], items[shown + 1:], 0)
        assert weight_of(renderer, issue, variant, more) > budget
    elif folded:  # one more title would be over
        more = _Plan((), items[:n - folded + 1], folded - 1)
        assert weight_of(renderer, issue, variant, more) > budget


@pytest.mark.parametrize("budget", [90_000, 20_000, 8_000])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_sample_fits_at_the_first_plan_that_fits(sample_issue, layout, budget):
    check(Renderer(), sample_issue, Variant(layout), budget)


@pytest.mark.slow  # 13 weeks of up to 200 items, each fitted and checked
@pytest.mark.parametrize("layout", LAYOUTS)
def test_generated_weeks_fit_at_the_first_plan_that_fits(sample_issue, layout):
    renderer = Renderer()
    for count in (1, 2, 3, 5, 8, 12, 17, 25, 40, 64, 90, 130, 200):
        check(renderer, week_of(sample_issue, count), Variant(layout),
              (90_000, 60_000, 30_000)[count % 3])


@pytest.mark.slow  # 3 weeks × 4 layouts, each fitted and checked
@pytest.mark.parametrize("areas", [("rocm",), ("<script>", "x" * 120)])
def test_interest_variants_fit_at_the_first_plan_that_fits(sample_issue, areas):
    renderer = Renderer()
    for count in (3, 30, 120):
        for layout in LAYOUTS:
            check(renderer, week_of(sample_issue, count, seed=1), Variant(layout, areas),
                  40_000)


def test_a_budget_below_the_frame_is_over_the_limit_with_everything_folded(sample_issue):
    renderer = Renderer()
    result, problem = renderer.render_variant(sample_issue, Variant("zh-en"), BASE, Budget(3))
    assert problem is not None and problem.code == "over-size-limit"
    assert result.folded == len(sample_issue.items) and not result.brief
    empty = replace(sample_issue, items=())
    result, problem = renderer.render_variant(empty, Variant("en"), BASE, Budget(3))
    assert problem is not None and problem.code == "over-size-limit"
    assert (result.brief, result.folded) == ((), 0)


def test_weight_counts_placeholders_as_links():
    body = "see %%unsubscribe_url%%"
    assert Budget(90).weigh(body) == sent_size(with_reserved_links(body)) > sent_size(body)


@pytest.mark.slow  # a 50-review week built and rendered in every layout
def test_with_the_tiers_right_every_must_read_stays_in_full_before_any_other(settings):
    """Shortening starts at the bottom: no must-read is a title while a lower tier has a card."""
    tiers = ["must-read"] * 22 + ["medium"] * 10 + ["skim"] * 18
    body = ("值得一读。" + "这是评审正文，讨论设计取舍与测试手法。" * 30)
    entries = [Entry(pr=50000 + i, title=f"第 {i} 个 PR 的标题", body=body,
                     categories=[f"priority:{tier}"], published="2026-11-24T10:00:00+08:00")
               for i, tier in enumerate(tiers)]
    entries += [Entry(pr=50000 + i, lang="en", id=f"en-{i}", title=f"Title of PR {i}",
                      body="Worth a look. " + "The review discusses trade-offs. " * 25,
                      published="2026-11-24T12:00:00+08:00") for i in range(len(tiers))]
    issue, _, _, rendered = assembled(settings, atom(entries))
    tier_of = {item.pr: item.tier for item in issue.items}
    assert rendered["zh-en"].brief and rendered["en-zh"].brief  # both languages: too long
    for layout, done in rendered.items():
        briefed = {tier_of[pr] for pr in done.brief}
        shown = {item.pr for item in issue.items} - set(done.brief)
        assert "must-read" not in briefed or not any(
            tier_of[pr] != "must-read" for pr in shown), layout
