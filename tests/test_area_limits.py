"""The bounds on areas (pipeline/core/issue/area_limits.py): per item, per issue, per name."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.core.issue.area_limits import MAX_ISSUE_AREAS, MAX_ITEM_AREAS, bound_areas
from pipeline.model import Item, Pair


def item(pr: int, areas: list[str]) -> Item:
    return Item(pr=pr, url=f"https://github.com/o/r/pull/{pr}", tier="must-read",
                scope_note=None, why=Pair("", ""), reviewed_at=datetime(2026, 11, 24, tzinfo=UTC),
                areas=tuple(areas), reading_minutes=Pair(1, 1), zh=None, en=None)


def test_an_issue_keeps_the_first_names_in_sorted_order_and_says_who_lost_some():
    # Ten items of eight names each: 80 names, the last 16 of them on items 9 and 10.
    items = [item(n, [f"a{n:02}-{k}" for k in range(8)]) for n in range(1, 11)]
    bounded, problems = bound_areas(items)
    kept = sorted({area for i in bounded for area in i.areas})
    assert kept == sorted(area for i in items for area in i.areas)[:MAX_ISSUE_AREAS]
    assert bounded[:8] == items[:8]
    assert [i.areas for i in bounded[8:]] == [(), ()]
    assert [(p.code, p.severity, p.pr) for p in problems] == [
        ("areas-dropped", "warning", 9), ("areas-dropped", "warning", 10)]
    assert problems[0].message.startswith("PR #9: 8 of its 8 areas dropped")


def test_an_item_keeps_eight_names_none_longer_than_a_reader_may_follow():
    long = "x" * 61
    names = [long, *(f"n{k:02}" for k in range(20, 0, -1))]
    (bounded,), (said,) = bound_areas([item(1, names)])
    assert bounded.areas == tuple(f"n{k:02}" for k in range(1, MAX_ITEM_AREAS + 1))
    assert "13 of its 21 areas" in said.message
    (same,), none = bound_areas([item(2, ["cpu", "rocm"])])
    assert same.areas == ("cpu", "rocm") and none == []


def test_a_name_other_items_carry_too_is_kept_before_the_alphabet():
    items = [item(1, [f"a{k:02}" for k in range(12)] + ["rocm"]), item(2, ["rocm"])]
    (first, second), _ = bound_areas(items)
    assert first.areas == (*(f"a{k:02}" for k in range(7)), "rocm")
    assert second.areas == ("rocm",)
