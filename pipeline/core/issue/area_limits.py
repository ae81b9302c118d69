"""The bounds on areas: how many an item carries, how many names an issue holds.

Nothing stops a feed from giving an entry thousands of categories, and each becomes a
contents entry, an archive page and a catalog name (3,000 shrank every item to its title).
Kept first are the names more items carry (a real area is shared, a stray one is not), then
sorted order, so the same feed keeps the same ones; an item that lost some says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pipeline.core.issue.interests import MAX_AREA_LENGTH
from pipeline.model import Item, Problem

__all__ = ["MAX_ISSUE_AREAS", "MAX_ITEM_AREAS", "bound_areas"]

MAX_ITEM_AREAS = 8
MAX_ISSUE_AREAS = 64


def bound_areas(items: Sequence[Item]) -> tuple[list[Item], list[Problem]]:
    """``items`` with their areas within the bounds, and an ``areas-dropped`` warning for
    each item that lost some."""
    usable = [[area for area in item.areas if len(area) <= MAX_AREA_LENGTH] for item in items]
    carried = Counter(area for areas in usable for area in set(areas))

    def first(names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda name: (-carried[name], name))

    kept = [first(areas)[:MAX_ITEM_AREAS] for areas in usable]
    names = set(first({area for areas in kept for area in areas})[:MAX_ISSUE_AREAS])
    bounded: list[Item] = []
    problems: list[Problem] = []
    for item, chosen in zip(items, kept, strict=True):
        areas = tuple(sorted(area for area in chosen if area in names))
        if dropped := len(item.areas) - len(areas):
            problems.append(Problem("areas-dropped", "warning", pr=item.pr, message=(
                f"PR #{item.pr}: {dropped:,} of its {len(item.areas):,} areas dropped: an item "
                f"keeps {MAX_ITEM_AREAS}, an issue {MAX_ISSUE_AREAS} names of at most "
                f"{MAX_AREA_LENGTH} characters, those more items carry first, then in sorted "
                "order")))
            item = replace(item, areas=areas)
        bounded.append(item)
    return bounded, problems
