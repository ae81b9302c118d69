"""Interests: the variant a reader gets, the order it gives, the slug an area's page takes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import pipeline.core.issue.interests as core
import subscribers.areas as store_side
from pipeline.core.issue.interests import (
    Variant,
    area_slug,
    clean_areas,
    interests_first,
    issue_areas,
    variant_for,
)
from pipeline.model import Item, Pair
from pipeline.week import issue_number


def _items() -> list[Item]:
    """Six items in rank order: two tiers, areas alternating cpu / rocm."""
    return [Item(pr=100 + i, url=f"https://github.com/o/r/pull/{100 + i}",
                 tier="must-read" if i < 3 else "skim", scope_note=None, why=Pair("", ""),
                 reviewed_at=datetime(2026, 11, 24, tzinfo=UTC),
                 areas=("rocm",) if i % 2 else ("cpu",), reading_minutes=Pair(1, 1),
                 zh=None, en=None) for i in range(6)]


def test_variant_counts_only_the_areas_this_issue_touches() -> None:
    assert variant_for("zh-en", ["rocm", "tpu"], ["rocm", "cpu"]) == Variant("zh-en", ("rocm",))
    assert variant_for("en", ["tpu"], ["rocm"]) == Variant("en")
    assert Variant("en").key == "en"
    key = Variant("en", ("rocm",)).key
    assert key.startswith("en.") and key != Variant("en", ("cpu",)).key
    with pytest.raises(ValueError):
        variant_for("fr", [], [])


def test_interests_first_keeps_tiers_and_rank_order_otherwise() -> None:
    tagged = _items()
    ordered = interests_first(tagged, ["rocm"])
    assert sorted(ordered, key=tagged.index) == tagged  # same items
    tiers = [item.tier for item in ordered]
    assert tiers == [item.tier for item in tagged]  # every tier stays where it was
    for tier in set(tiers):
        inside = [item for item in ordered if item.tier == tier]
        marks = ["rocm" in item.areas for item in inside]
        assert marks == sorted(marks, reverse=True)  # for-you items first in their tier
    assert interests_first(tagged, []) == tuple(tagged)
    assert [item.pr for item in ordered] == [101, 100, 102, 103, 105, 104]
    assert issue_areas(tagged) == ("cpu", "rocm")


@pytest.mark.parametrize(("name", "slug"), [
    ("kv-connector", "kv-connector"), ("Spec Decode", "spec-decode"), ("../etc", "etc"),
    ("..", None), ("多模态", "多模态"), ("a/b\\c", "a-b-c"), ("  ", None),
])
def test_area_slug_is_one_safe_path_segment(name: str, slug: str | None) -> None:
    got = area_slug(name)
    assert "/" not in got and "\\" not in got and got not in {"", ".", ".."}
    if slug is None:
        assert got.startswith("area-")
    else:
        assert got == slug


def test_clean_areas_folds_dedupes_and_drops_junk() -> None:
    assert clean_areas(["ROCm", "rocm ", "spec decode", "", "x" * 61, "a\x00b"]) == (
        "rocm", "spec-decode")


def test_issue_number_counts_weeks_from_the_first() -> None:
    assert issue_number("2026-W46", "2026-W46") == 1
    assert issue_number("2026-W48", "2026-W46") == 3
    assert issue_number("2027-W01", "2026-W53") == 2  # across a year end (2026 has 53)
    assert issue_number("2026-W45", "2026-W46") == 0
    assert issue_number("2026-W48", "") == 0


def test_the_core_and_the_store_clean_areas_with_one_function():
    """``subscribers`` may not import the core, so the core re-exports the store's cleaner."""
    assert core.clean_areas is store_side.clean_areas
    assert (core.MAX_AREAS, core.MAX_AREA_LENGTH) == (store_side.MAX_AREAS,
                                                      store_side.MAX_AREA_LENGTH)
