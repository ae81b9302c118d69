"""HTML as a reader's mail app sees it: an 8bit part's folds read as spaces, how deep a
fragment nests."""

from __future__ import annotations

import re


def unfolded(html: str) -> str:
    """An HTML part as a reader's mail app lays it out: the line breaks an 8bit part's
    folding put in place of spaces (pipeline/core/email/eightbit.py) read as those spaces."""
    return html.replace("\r\n", "\n").replace("\n", " ")


def nesting(fragment: str) -> int:
    """How deep the elements of an HTML fragment nest (``<br>`` opens nothing)."""
    depth = deepest = 0
    for closing, name in re.findall(r"<(/?)([a-z]+)[^>]*>", fragment):
        if name != "br":
            depth += -1 if closing else 1
            deepest = max(deepest, depth)
    return deepest
