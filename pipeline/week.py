"""ISO weeks in a timezone, and the one place the clock is read.

A week runs from Monday 00:00 to the next Monday 00:00 (end exclusive) in the issue's
timezone. ``pendulum.parse`` is too forgiving for user input ("2026-W00" silently becomes a
date in 2025), so ``--week`` is checked with a strict pattern and ``date.fromisocalendar``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

import pendulum

from pipeline.errors import UsageError
from pipeline.model import Week

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


def now() -> datetime:
    """The current time (UTC). The only function that reads the clock; tests replace it."""
    return datetime.now(UTC)


def iso_monday(text: str) -> date:
    """The Monday of ISO week ``text`` (``2026-W48``); ValueError saying what is wrong
    otherwise. The one parser of a week's name: ``--week``, ``[issue] first_week``."""
    match = _WEEK.match(text.strip())
    if not match:
        raise ValueError("expected an ISO week such as 2026-W48")
    year, number = int(match[1]), int(match[2])
    try:
        return date.fromisocalendar(year, number, 1)
    except ValueError:
        raise ValueError(f"{year} has no ISO week {number}") from None


def parse_week(text: str, tz: str) -> Week:
    """``2026-W48`` → the week's UTC boundaries in ``tz``; anything else is a usage error."""
    try:
        monday = iso_monday(text)
    except ValueError as exc:
        raise UsageError(f"--week {text!r}: {exc}") from None
    return week_of_monday(monday, tz)


def week_of_monday(monday: date, tz: str) -> Week:
    start = pendulum.datetime(monday.year, monday.month, monday.day, tz=tz)
    end = start.add(weeks=1)  # calendar arithmetic: DST weeks are 167 or 169 hours long
    year, number, _ = monday.isocalendar()
    return Week(f"{year}-W{number:02d}", _utc(start), _utc(end), tz)


def _monday(when: datetime, tz: str) -> date:
    """The Monday, in ``tz``, of the week ``when`` falls in."""
    local = pendulum.instance(when).in_timezone(tz).date()
    return local - timedelta(days=local.weekday())


def week_containing(when: datetime, tz: str) -> Week:
    return week_of_monday(_monday(when, tz), tz)


def last_complete_week(tz: str, at: datetime | None = None) -> Week:
    """The most recent week that has ended: the one a Monday-morning job sends."""
    return week_of_monday(_monday(at or now(), tz) - timedelta(weeks=1), tz)


def numbering_start(first_week: str, held: Iterable[str], week_id: str) -> str:
    """The week of issue No. 1: ``[issue] first_week`` when set, else the first week the
    archive ``held``, else ``week_id``."""
    if first_week:
        return first_week
    weeks = []
    for name in held:
        with contextlib.suppress(ValueError):
            weeks.append((iso_monday(name), name))
    return min(weeks)[1] if weeks else week_id


def issue_number(week_id: str, first_week: str) -> int:
    """"No. N", counting ``first_week`` as No. 1; 0 (unnumbered) before it or without it.
    Counted in weeks, not issues, so a number never changes when an older week is rebuilt."""
    if not first_week:
        return 0
    weeks = (iso_monday(week_id) - iso_monday(first_week)).days // 7
    return weeks + 1 if weeks >= 0 else 0


def first_and_last_day(start: datetime, end: datetime, tz: str
                        ) -> tuple[pendulum.DateTime, pendulum.DateTime]:
    """A week's first and last day in ``tz``: ``end`` is exclusive, so the last day is the
    one before it."""
    return (pendulum.instance(start).in_timezone(tz),
            pendulum.instance(end).in_timezone(tz).subtract(days=1))


def subject_days(week: Week) -> dict[str, str]:
    """The week's days as briefly as a subject says them (``11 月 23–29 日``, ``23–29 Nov``):
    no year, as the inbox dates every message."""
    first, last = first_and_last_day(week.start, week.end, week.tz)
    if first.month == last.month:
        return {"zh": f"{first.month} 月 {first.day}–{last.day} 日",
                "en": f"{first.day}–{last.day} {last.format('MMM', locale='en')}"}
    return {"zh": f"{first.month} 月 {first.day} 日 – {last.month} 月 {last.day} 日",
            "en": f"{first.format('D MMM', locale='en')} – {last.format('D MMM', locale='en')}"}


def week_ranges(start: datetime, end: datetime, tz: str) -> dict[str, str]:
    """The days a week covers, as readers write them: ``11 月 23 日 – 11 月 29 日`` and
    ``23–29 Nov 2026``."""
    first, last = first_and_last_day(start, end, tz)
    if first.month == last.month:
        en = f"{first.day}–{last.day} {last.format('MMM YYYY', locale='en')}"
    else:
        en = f"{first.format('D MMM', locale='en')} – {last.format('D MMM YYYY', locale='en')}"
    return {"zh": f"{first.month} 月 {first.day} 日 – {last.month} 月 {last.day} 日", "en": en}


def _utc(dt: pendulum.DateTime) -> datetime:
    return datetime.fromtimestamp(dt.timestamp(), UTC)


def local_date(when: datetime, tz: str) -> str:
    """The day ``when`` falls on in ``tz``, as ``YYYY-MM-DD``."""
    return pendulum.instance(when).in_timezone(tz).to_date_string()


def iso_z(when: datetime) -> str:
    """UTC ISO 8601 with ``Z``, as issue.json writes every time."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
