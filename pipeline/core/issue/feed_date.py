"""Is a feed's date string a real date? Checked on the raw text feedparser keeps.

feedparser turns ``2026-11-24T99:00:00`` into the 28th and ``30 Feb`` into 2 March without a
word, so an entry's week cannot be trusted from its ``*_parsed`` values: ``collect`` skips an
entry whose date is not real, with the reason given here. Strict means RFC 3339 (as W3C-DTF
loosens it) or RFC 822, ASCII digits only, every field in its range.
"""

from __future__ import annotations

import re
from datetime import datetime

_ISO = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:[Tt ](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2})(?:[.,][0-9]+)?)?)?"
    r"\s*(?:[Zz]|UTC|GMT|(?P<sign>[+-])(?P<zh>[0-9]{2}):?(?P<zm>[0-9]{2}))?"
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_RFC822 = re.compile(
    r"(?:[A-Za-z]{3,9},?\s+)?(?P<day>[0-9]{1,2})\s+(?P<mon>[A-Za-z]{3})\s+"
    r"(?P<year>[0-9]{4}|[0-9]{2})"
    r"(?:\s+(?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2}))?)?"
    r"(?:\s*(?:(?P<sign>[+-])(?P<zh>[0-9]{2}):?(?P<zm>[0-9]{2})|[A-Za-z]{1,5}))?"
)
#: How much of a hostile date string a reason quotes.
_SHOWN = 40


def date_problem(raw: str) -> str | None:
    """Why ``raw`` is not a real date in a format read strictly, or None when it is one."""
    text = raw.strip()
    shown = repr(text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…")
    found = _ISO.fullmatch(text) or _RFC822.fullmatch(text)
    if found is None:
        return f"date {shown} is neither RFC 3339 nor RFC 822"
    fields = found.groupdict()
    if found.re is _RFC822:
        if fields["mon"].lower() not in _MONTHS:
            return f"date {shown} has no month named {fields['mon']!r}"
        fields["month"] = str(_MONTHS.index(fields["mon"].lower()) + 1)
        if len(fields["year"]) == 2:  # RFC 822's two-digit year, read as RFC 2822 says
            year = int(fields["year"])
            fields["year"] = str(year + (2000 if year < 50 else 1900))
    second = int(fields["second"] or 0)
    try:
        datetime(int(fields["year"]), int(fields["month"]), int(fields["day"]),
                 int(fields["hour"] or 0), int(fields["minute"] or 0), min(second, 59))
    except ValueError as exc:
        return f"date {shown} is not a real date ({exc})"
    if second > 60:
        return f"date {shown} is not a real date (second must be in 0..60)"
    if fields["sign"] and (int(fields["zh"]) > 23 or int(fields["zm"]) > 59):
        return f"date {shown} has an impossible time-zone offset"
    return None
