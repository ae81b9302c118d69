"""Plain text wrapped for a mail reader: lines of at most 78 columns, URLs whole.

A text part is read in fixed-width windows where a Chinese character takes two columns, so
lines are cut at a space or between two CJK characters (never before closing punctuation) to
fit 78 *columns* (RFC 5322). A URL is never broken: it gets a line of its own, so a client
still sees one link. The signature separator ``-- `` keeps its trailing space.
"""

from __future__ import annotations

import functools
import re
import unicodedata

WIDTH = 78
SIGNATURE = "-- "

#: A run of non-space characters that holds a URL or a personal-link placeholder.
_URL = re.compile(r"\S*(?:https?://|mailto:|%%[a-z_]+%%)\S*")
#: East Asian wide and fullwidth characters (CJK, kana, hangul, fullwidth punctuation).
_WIDE = ("\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf"
         "\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
         "\U00020000-\U0003fffd")
_TOKEN = re.compile(rf"{_URL.pattern}|\s+|[{_WIDE}]|[^\s{_WIDE}]+")
#: Characters that may not start a line (they close what came before) or end one.
_NO_START = set("，。、；：！？）」』》〉】〕,.;:!?)]}…%·")
_NO_END = set("（「『《〈【〔([{")
#: A bullet or number that continuation lines indent under.
_HANGING = re.compile(r"^(\s*(?:[-*•]|\d{1,3}[.)])\s+|\s+)")


def width(text: str) -> int:
    """Display columns: two for a wide (CJK) character, none for a combining mark."""
    if text.isascii():
        return len(text)
    return sum(2 if _wide(char) else 1 for char in text if not unicodedata.combining(char))


#: A unit's columns, remembered: a week's text repeats the same few thousand words.
_unit_width = functools.lru_cache(maxsize=16384)(width)


def wrap_text(text: str) -> str:
    """Every line of ``text`` at most :data:`WIDTH` columns, URLs whole and on their own line;
    a line that fits (the signature separator too) is kept as it is."""
    return "\n".join(part for line in text.split("\n") for part in wrap_line(line))


@functools.lru_cache(maxsize=8192)
def wrap_line(line: str) -> tuple[str, ...]:
    """One long line as several, greedy, URLs alone on theirs."""
    if width(line) <= WIDTH:
        return (line,)
    hanging = _HANGING.match(line)
    columns = width(hanging.group(1)) if hanging else 0
    indent = " " * columns if columns <= WIDTH // 2 else ""
    lines: list[str] = []
    current, current_width, space = "", 0, ""

    def emit() -> None:
        nonlocal current, current_width
        if current.strip():
            lines.append(current.rstrip())
        current, current_width = indent if lines or current.strip() else "", len(indent)

    for index, unit in enumerate(_units(line)):
        if unit.isspace():
            space = unit if current.strip() else ""
            if index == 0:  # the line's own indentation
                current, current_width = unit, width(unit)
            continue
        unit_width = _unit_width(unit)
        if _URL.fullmatch(unit):
            if current.strip():
                emit()
            lines.append((indent if lines else current) + unit)
            current, current_width, space = indent, len(indent), ""
            continue
        gap = _unit_width(space)
        if current.strip() and current_width + gap + unit_width > WIDTH:
            emit()
            space, gap = "", 0
        current += space + unit
        current_width += gap + unit_width
        space = ""
    if current.strip():
        lines.append(current.rstrip())
    return tuple(lines) or ("",)


def _units(line: str) -> list[str]:
    """Words, spaces, URLs and single CJK characters; punctuation glued where it binds."""
    glued: list[str] = []
    for unit in _TOKEN.findall(line):
        if glued and not unit.isspace() and not glued[-1].isspace() and (
                unit[0] in _NO_START or glued[-1][-1] in _NO_END
                or not (_wide(unit[0]) or _wide(glued[-1][-1]))):
            glued[-1] += unit
        else:
            glued.append(unit)
    return glued


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"
