"""How an area's name is shown to a reader: ``pd-disaggregation`` as "PD disaggregation".

Area names are lower case with hyphens: good keys, poor labels. A label spells each word as
``templates/areas.toml`` does (``kv`` → "KV", ``rocm`` → "ROCm") and capitalises the first;
only the label changes, forms and the store keep the name.
"""

from __future__ import annotations

import functools
import tomllib

from pipeline.core.shipped import templates_dir

__all__ = ["display_name"]


@functools.cache
def _spellings() -> dict[str, str]:
    table = tomllib.loads((templates_dir() / "areas.toml").read_text(encoding="utf-8"))
    return {word.lower(): spelled for word, spelled in table["words"].items()}


def display_name(name: str) -> str:
    """The label of an area ``name``; the name itself when it has no word to show (``-``)."""
    spellings = _spellings()
    words = [word for word in name.split("-") if word]
    if not words:
        return name
    shown = [spellings.get(word.lower(), word) for word in words]
    if words[0].lower() not in spellings:
        shown[0] = shown[0][:1].upper() + shown[0][1:]
    return " ".join(shown)
