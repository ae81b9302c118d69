"""The size budget fitted from measured sizes picks what the old search by re-rendering did.

The old algorithm (a bisection, every step a full render) is kept here, as it was in
``render.py``, and is the reference: on the sample and on generated weeks of 1 to 200 items,
for every layout and for interest variants, the new fitting must shorten and fold exactly the
same items, stay within the budget as sent, and render a handful of times, not a search. The
sweep of every count from 1 to 200 checks the answer where it is (it fits, the plan before it
does not), which is what the bisection finds, without running the bisection 800 times.
"""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Callable
from dataclasses import replace

import pytest
from support.project import SAMPLE_FEED

from pipeline.core.email import fit
from pipeline.core.email.fit import Marks, base64_size, size_of
from pipeline.core.email.mime import BASE64, QUOTED_PRINTABLE, encode_body, sent_size
from pipeline.core.email.render import Footer, Renderer, _Plan, weight, with_reserved_links
from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.interests import Variant, interests_first
from pipeline.core.issue.rank import TIERS
from pipeline.model import LAYOUTS, Issue, Text
from pipeline.stages.build import rank_week
from pipeline.week import parse_week

WEEK = parse_week("2026-W48", "Asia/Shanghai")
BASE = "https://vllm-weekly.example/archive"


# -- the old algorithm, as render.py had it before issue 17 ---------------------------------


def _smallest(lo: int, hi: int, fits: Callable[[int], bool]) -> tuple[int, int | None]:
    if lo > hi or not fits(hi):
        return hi, None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, lo


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> tuple[int, int | None]:
    if lo > hi or not fits(lo):
        return lo, None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo, lo


def old_fit(renderer: Renderer, issue: Issue, variant: Variant, budget: int
            ) -> tuple[tuple[int, ...], int, int, dict[tuple[int, ...], tuple[str, str]]]:
    """(brief PRs, folded, renders, renderings) as the bisection chose them.

    A step asks only whether the heavier rendering fits, so the text is not rendered when the
    HTML alone is over the budget: the same answer at every step, with fewer renderings.
    ``renderings`` keeps the (HTML, text) of each plan drawn whole, keyed by :func:`key`, so
    that the check need not render the chosen plan again.
    """
    items = interests_first(issue.items, variant.areas)
    n = len(items)
    renders = 0
    footer = Footer()
    renderings: dict[tuple[int, ...], tuple[str, str]] = {}

    def fits(plan: _Plan) -> bool:
        nonlocal renders
        renders += 1
        html = renderer._html(issue, variant, BASE, plan, footer)
        if weight(html) > budget:
            return False
        text = renderer._text(issue, variant, BASE, plan, footer)
        renderings[key(plan)] = html, text
        return weight(text) <= budget

    if fits(_Plan(items, (), 0)):
        return (), 0, renders, renderings

    def shrink(k: int) -> _Plan:
        return _Plan(items[: n - k], items[n - k:], 0)

    k, found = _smallest(1, n, lambda k: fits(shrink(k)))
    if found is not None:
        plan = shrink(k)
    else:
        def fold(m: int) -> _Plan:
            return _Plan((), items[:m], n - m)

        m, _ = _largest(0, n - 1, lambda m: fits(fold(m)))
        plan = fold(m)
    return tuple(i.pr for i in plan.brief), plan.folded, renders, renderings


def key(plan: _Plan) -> tuple[int, ...]:
    """A plan as the PRs it shows in full, then in brief, then how many it folds."""
    return (*(i.pr for i in plan.full), -1, *(i.pr for i in plan.brief), -1, plan.folded)


# -- generated weeks ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_issue(tmp_path_factory) -> Issue:
    from pipeline.config import load
    from pipeline.core.assemble import assemble
    from pipeline.stages.build import terms

    config = tmp_path_factory.mktemp("cfg") / "newsletter.toml"
    config.write_text("", encoding="utf-8")
    settings = load(config, {})
    result = parse_feed(SAMPLE_FEED.read_bytes(), "sample", settings.feed.repo)
    issue, *_ = assemble(terms(settings), WEEK, rank_week(settings, WEEK, [result]))
    return issue


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


def check(renderer: Renderer, issue: Issue, variant: Variant, budget: int) -> int:
    """The new fitting against the old one; returns how many renders the new one made."""
    drawn = 0
    real_draw = renderer._draw

    def counting(*args, **kwargs):
        nonlocal drawn
        drawn += 1
        return real_draw(*args, **kwargs)

    renderer._draw = counting  # type: ignore[method-assign]
    try:
        result, problem = renderer._fit(issue, variant, BASE, budget, Footer())
    finally:
        del renderer._draw
    brief, folded, _, renderings = old_fit(renderer, issue, variant, budget)
    assert (result.brief, result.folded) == (brief, folded), (len(issue.items), variant)
    plan = _Plan(*_plan_items(issue, variant, brief, folded))
    html, text = renderings.get(key(plan)) or (
        renderer._html(issue, variant, BASE, plan, Footer()),
        renderer._text(issue, variant, BASE, plan, Footer()))
    assert (result.html, result.text) == (html, text)
    heavier = max(weight(result.html), weight(result.text))
    assert (heavier <= budget) == (problem is None or problem.code != "over-size-limit")
    return drawn


def check_first_fitting(renderer: Renderer, issue: Issue, variant: Variant, budget: int
                        ) -> int:
    """The new fitting's answer is the first of the old search's plans that fits, checked
    where the answer is instead of searched for again; returns how many renders it made.

    The old search bisects plans whose weight falls as they go (whole, then 1 to n items
    shortened from the tail, then n - 1 to 0 titles kept), so its answer is the one that
    fits after one that does not: the answer drawn as sent, and the plan before it, settle
    it in two renderings where the search takes nine. :func:`check` runs the search itself.
    """
    drawn = 0
    real_draw = renderer._draw

    def counting(*args, **kwargs):
        nonlocal drawn
        drawn += 1
        return real_draw(*args, **kwargs)

    renderer._draw = counting  # type: ignore[method-assign]
    try:
        result, problem = renderer._fit(issue, variant, BASE, budget, Footer())
    finally:
        del renderer._draw
    items = interests_first(issue.items, variant.areas)
    n = len(items)
    order = [_Plan(items, (), 0),
             *(_Plan(items[: n - k], items[n - k:], 0) for k in range(1, n + 1)),
             *(_Plan((), items[:m], n - m) for m in range(n - 1, -1, -1))]
    at = [(*(i.pr for i in plan.brief), -1, plan.folded) for plan in order].index(
        (*result.brief, -1, result.folded))
    chosen = order[at]
    html = renderer._html(issue, variant, BASE, chosen, Footer())
    text = renderer._text(issue, variant, BASE, chosen, Footer())
    assert (result.html, result.text) == (html, text)
    heavier = max(weight(html), weight(text))
    if heavier <= budget:
        assert problem is None or problem.code != "over-size-limit"
        if at:
            before = order[at - 1]
            assert max(weight(renderer._html(issue, variant, BASE, before, Footer())),
                       weight(renderer._text(issue, variant, BASE, before, Footer()))
                       ) > budget, (n, variant, at)
    else:  # nothing fits: everything folded, and said so
        assert at == len(order) - 1 and problem is not None
        assert problem.code == "over-size-limit"
    return drawn


def draw(renderer: Renderer, issue: Issue, variant: Variant, plan: _Plan):
    """``plan`` rendered and measured, as the fitting draws it."""
    return renderer._draw(renderer._common_context(issue, variant, BASE, Footer()), plan, BASE)


def _plan_items(issue: Issue, variant: Variant, brief: tuple[int, ...], folded: int):
    items = interests_first(issue.items, variant.areas)
    shown = len(items) - len(brief) - folded
    return items[:shown], items[shown: shown + len(brief)], folded


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [90_000, 20_000, 8_000])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_sample_fits_as_the_old_search_did(sample_issue, layout, budget):
    check(Renderer(), sample_issue, Variant(layout), budget)


@pytest.mark.slow  # 13 weeks of up to 200 items, each searched as the old fitting did
@pytest.mark.parametrize("layout", LAYOUTS)
def test_generated_weeks_fit_as_the_old_search_did(sample_issue, layout):
    renderer = Renderer()
    for count in (1, 2, 3, 5, 8, 12, 17, 25, 40, 64, 90, 130, 200):
        drawn = check(renderer, week_of(sample_issue, count), Variant(layout), 90_000)
        assert drawn <= 5, (count, drawn)


@pytest.mark.slow  # 3 weeks × 4 layouts, each searched as the old fitting did
@pytest.mark.parametrize("areas", [("rocm",), ("<script>", "x" * 120)])
def test_interest_variants_fit_as_the_old_search_did(sample_issue, areas):
    renderer = Renderer()
    for count in (3, 30, 120):
        for layout in LAYOUTS:
            drawn = check(renderer, week_of(sample_issue, count, seed=1), Variant(layout, areas),
                          40_000)
            assert drawn <= 5, (count, drawn)


@pytest.mark.slow  # 800 weeks fitted and checked: about 2 s a tenth of them
@pytest.mark.parametrize("tenth", range(10))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_week_of_one_to_two_hundred_items_fits_as_the_old_search_did(sample_issue,
                                                                          layout, tenth):
    """Every count from 1 to 200, checked at the answer (the tests above run the search)."""
    renderer = Renderer()
    worst = 0
    for count in range(1 + tenth, 201, 10):
        budget = (90_000, 60_000, 30_000)[count % 3]
        worst = max(worst, check_first_fitting(renderer, week_of(sample_issue, count, seed=2),
                                               Variant(layout), budget))
    assert worst <= 5


def test_a_budget_below_the_frame_is_over_the_limit_with_everything_folded(sample_issue):
    renderer = Renderer()
    result, problem = renderer.render_variant(sample_issue, Variant("zh-en"), BASE, 3)
    assert problem is not None and problem.code == "over-size-limit"
    assert result.folded == len(sample_issue.items) and not result.brief
    empty = replace(sample_issue, items=())
    result, problem = renderer.render_variant(empty, Variant("en"), BASE, 3)
    assert problem is not None and problem.code == "over-size-limit"
    assert (result.brief, result.folded) == ((), 0)


def test_marks_never_reach_what_is_sent(sample_issue):
    """A marked rendering, stripped, is byte for byte the unmarked one."""
    renderer = Renderer()
    issue = week_of(sample_issue, 30)
    items = issue.items
    for layout in LAYOUTS:
        for plan in (_Plan(items, (), 0), _Plan(items[:10], items[10:], 0),
                     _Plan((), items[:12], 18), _Plan((), (), 30)):
            drawn = draw(renderer, issue, Variant(layout), plan)
            assert drawn.html.text == renderer._html(issue, Variant(layout), BASE, plan,
                                                     Footer())
            assert drawn.text.text == renderer._text(issue, Variant(layout), BASE, plan,
                                                     Footer())
            assert "fit:" not in drawn.html.text
            assert drawn.weights == (weight(drawn.html.text), weight(drawn.text.text))


def test_the_templates_mark_every_piece_the_plan_changes(sample_issue):
    renderer = Renderer()
    issue = week_of(sample_issue, 12)
    items = issue.items
    drawn = draw(renderer, issue, Variant("zh-en"), _Plan(items[:6], items[6:], 0))
    for part in (drawn.html, drawn.text):
        kinds = {(kind, key) for kind, key in part.pieces}
        assert {("c", str(i.pr)) for i in items[:6]} <= kinds
        # A shortened item: an entry in the contents of either part, and nothing more.
        assert not {("b", str(i.pr)) for i in items[6:]} & kinds
        assert {("e", str(i.pr)) for i in items} <= kinds
        assert {("g", i.tier) for i in items} <= kinds
        assert {("h", i.tier) for i in items[:6]} <= kinds


def test_a_feed_cannot_forge_a_mark(sample_issue):
    """Text that looks like a mark is printed escaped (HTML) or kept (text), never cut."""
    marks = Marks()
    forged = f"<!--fit:{marks.nonce}:c:1-->"
    item = sample_issue.items[0]
    hostile = replace(item, en=Text(forged, "<p>x</p>", forged, "feed"))
    issue = replace(sample_issue, items=(hostile, *sample_issue.items[1:]))
    renderer = Renderer()
    result, _ = renderer.render_variant(issue, Variant("en"), BASE, 90)
    assert forged not in result.html  # escaped, as all feed text
    assert result.text.count("<!--fit:") >= 1  # text is not HTML: it stays, whole
    check(renderer, week_of(issue, 40), Variant("en"), 30_000)


@pytest.mark.slow  # the old search, a rendering at a time, over a template without marks
def test_an_operator_template_without_marks_still_fits(tmp_path, sample_issue):
    """No marks, no estimate: the fitting bisects with real renderings, as before."""
    from pipeline.core.email.render import environment
    from pipeline.core.shipped import templates_dir

    email = tmp_path / "email"
    email.mkdir()
    for name in ("issue.mjml.j2", "issue.txt.j2"):
        source = (templates_dir() / "email" / name).read_text(encoding="utf-8")
        (email / name).write_text(re.sub(r"\{\{ fit\([^)]*\) \}\}", "", source),
                                  encoding="utf-8")
    renderer = Renderer(environment([tmp_path]))
    for count in (20, 130):
        check(renderer, week_of(sample_issue, count), Variant("zh"), 60_000)


@pytest.mark.parametrize("text", ["", "a", "ab\n", "x" * 1000, "中文" * 300, "a.\n.\n",
                                  "= \t\n" * 40, "é" * 77 + "\r\n" + "z" * 200])
def test_sizes_are_those_mime_encodes(text):
    size = size_of(text)
    assert size.qp == len(encode_body(text, QUOTED_PRINTABLE))
    assert base64_size(size.raw) == len(encode_body(text, BASE64))
    assert size.sent() == sent_size(text)
    assert base64_size(len(text.encode())) == len(
        base64.encodebytes(text.encode()).replace(b"\n", b"\r\n"))


def test_weight_counts_placeholders_as_links():
    body = "see %%unsubscribe_url%%"
    assert weight(body) == size_of(with_reserved_links(body)).sent()


def test_the_first_fitting_plan_is_found_with_few_renderings():
    """The search itself, on made-up sizes: exact estimates take one rendering; estimates
    off by a constant take two; estimates that say nothing fall back to bisection."""
    real = [(100_000 - 700 * j, 0) for j in range(100)]  # plan j weighs less as j grows

    def run(estimate):
        seen = []

        def draw(j):
            seen.append(j)
            return real[j]

        return fit.first_fitting(100, estimate, draw, 80_000), seen

    assert run(lambda j: real[j]) == (29, [29])
    found, seen = run(lambda j: (real[j][0] - 3_000, 0))
    assert found == 29 and len(seen) <= 3
    found, seen = run(lambda j: (0, 0))
    assert found == 29 and len(seen) <= 12
    assert fit.first_fitting(3, lambda j: (10**6, 0), lambda j: (10**6, 0), 1) is None
