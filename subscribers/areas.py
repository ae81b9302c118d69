"""Area names as a reader's choice: the one way a name from a form, a CSV column or the
archive becomes what the store keeps. It lives here because the store must apply it and
``subscribers`` may not import ``pipeline.core``, which re-exports it. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = ["MAX_AREAS", "MAX_AREA_LENGTH", "clean_area", "clean_areas"]

#: A reader may follow at most this many areas; a name is at most this long.
MAX_AREAS = 50
MAX_AREA_LENGTH = 60

_SPACE = re.compile(r"\s+")


def clean_area(name: str) -> str | None:
    """One name folded as the feed's areas are, or None when nothing usable is left (an
    unprintable character also keeps a stored list's separators out of a name)."""
    folded = _SPACE.sub("-", unicodedata.normalize("NFKC", name).strip().lower())
    if folded and len(folded) <= MAX_AREA_LENGTH and folded.isprintable():
        return folded
    return None


def clean_areas(names: Iterable[str]) -> tuple[str, ...]:
    """A reader's areas as stored: each cleaned (unusable ones dropped), no duplicates, sorted,
    at most :data:`MAX_AREAS`."""
    if not names:  # most readers choose none: an import of 100,000 asks 150,000 times
        return ()
    kept = {cleaned for name in names if (cleaned := clean_area(name)) is not None}
    return tuple(sorted(kept))[:MAX_AREAS]
