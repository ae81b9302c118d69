"""Interests: the areas a reader follows, and the email variant they choose.

A reader's email is the same issue with the items of their areas first inside each tier,
marked "for you". A :class:`Variant` is a layout plus the part of their areas this issue
touches, so the variants to render grow with the distinct choices, never with the list.
Area names are outside text: :func:`area_slug` is the one way a name becomes a path segment.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.model import LAYOUTS, Item

# The normalising of a reader's choice is defined beside the subscriber store, which must
# apply it and may not import pipeline.core; re-exported here as the one name for it.
from subscribers.areas import MAX_AREA_LENGTH as MAX_AREA_LENGTH
from subscribers.areas import MAX_AREAS as MAX_AREAS
from subscribers.areas import clean_areas as clean_areas

_UNSAFE = re.compile(r"[^\w.-]+")


def area_slug(name: str) -> str:
    """``name`` as one safe path segment, never empty, ``.`` or ``..``; a name with nothing
    usable gets a short hash."""
    folded = unicodedata.normalize("NFKC", name).strip().lower()
    slug = _UNSAFE.sub("-", folded).strip("-.")[:MAX_AREA_LENGTH].strip("-.")
    return slug or "area-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:10]


@dataclass(frozen=True, order=True)
class Variant:
    """One rendering of an issue: a layout and the areas it puts first (sorted)."""

    layout: str
    areas: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The variant's name in artifact file names: the layout, and for interests a short
        hash of the areas (feed text never reaches a file name)."""
        if not self.areas:
            return self.layout
        digest = hashlib.sha256("\n".join(self.areas).encode("utf-8")).hexdigest()[:10]
        return f"{self.layout}.{digest}"


def variant_for(layout: str, areas: Iterable[str], issue_areas: Iterable[str]) -> Variant:
    """The variant a reader of ``layout`` following ``areas`` gets of an issue whose items
    carry ``issue_areas``: only the areas this issue touches count."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    return Variant(layout, tuple(sorted(set(areas) & set(issue_areas))))


def issue_areas(items: Sequence[Item]) -> tuple[str, ...]:
    """Every area the items carry, sorted, once each."""
    return tuple(sorted({area for item in items for area in item.areas}))


def for_you(item: Item, interests: Iterable[str]) -> bool:
    """Whether ``item`` belongs to one of ``interests``."""
    return not set(item.areas).isdisjoint(interests)


def interests_first(items: Sequence[Item], interests: Iterable[str]) -> tuple[Item, ...]:
    """``items`` with those of ``interests`` first inside each tier; otherwise the rank
    order kept (a stable sort on (tier position, not-for-you))."""
    chosen = frozenset(interests)
    if not chosen:
        return tuple(items)
    tiers = list(dict.fromkeys(item.tier for item in items))
    return tuple(sorted(items, key=lambda item: (tiers.index(item.tier),
                                                 not for_you(item, chosen))))
