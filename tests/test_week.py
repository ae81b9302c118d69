"""Weeks: strict parsing, exact boundaries in several timezones, the default week."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.errors import UsageError
from pipeline.week import last_complete_week, numbering_start, parse_week, week_containing


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0,
        second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(("tz", "start", "end"), [
    ("Asia/Shanghai", utc(2026, 11, 22, 16), utc(2026, 11, 29, 16)),
    ("UTC", utc(2026, 11, 23), utc(2026, 11, 30)),
    ("America/Los_Angeles", utc(2026, 11, 23, 8), utc(2026, 11, 30, 8)),
    ("Asia/Kathmandu", utc(2026, 11, 22, 18, 15), utc(2026, 11, 29, 18, 15)),
    ("Pacific/Kiritimati", utc(2026, 11, 22, 10), utc(2026, 11, 29, 10)),
])
def test_week_boundaries_in_several_offsets(tz, start, end):
    week = parse_week("2026-W48", tz)
    assert (week.id, week.start, week.end, week.tz) == ("2026-W48", start, end, tz)
    assert start in week
    assert start - timedelta(microseconds=1) not in week
    assert end not in week
    assert end - timedelta(microseconds=1) in week


def test_a_week_across_a_dst_change_is_longer_than_seven_days():
    # US clocks fall back on Sunday 2026-11-01: ISO week 44 has 169 hours in New York.
    week = parse_week("2026-W44", "America/New_York")
    assert week.start == utc(2026, 10, 26, 4)
    assert week.end == utc(2026, 11, 2, 5)
    assert week.end - week.start == timedelta(hours=169)


@pytest.mark.parametrize("text", ["2026-W00", "2025-W53", "2026W48", "2026-W48-1", "2026-w48",
                                  "48", "", "2026-W5"])
def test_malformed_or_impossible_weeks_are_usage_errors(text):
    with pytest.raises(UsageError) as info:
        parse_week(text, "UTC")
    assert "--week" in str(info.value)


def test_week_53_exists_in_long_years():
    assert parse_week("2026-W53", "UTC").start == utc(2026, 12, 28)


@pytest.mark.parametrize(("at", "expected"), [
    # Monday 2026-11-30 00:00 in Shanghai is Sunday 16:00 UTC: W48 has just ended.
    (utc(2026, 11, 29, 16, 0), "2026-W48"),
    (utc(2026, 11, 29, 15, 59), "2026-W47"),
    (utc(2026, 12, 2, 10), "2026-W48"),
    # ISO years: the last complete week before 2027-01-04 is 2026-W53.
    (utc(2027, 1, 4, 12), "2026-W53"),
    (utc(2026, 1, 1, 12), "2025-W52"),
])
def test_last_complete_week(at, expected):
    assert last_complete_week("Asia/Shanghai", at).id == expected


def test_week_containing_uses_the_local_date():
    # 23:30 on Sunday in Los Angeles is Monday in UTC: still the earlier week there.
    when = utc(2026, 11, 30, 7, 30)
    assert week_containing(when, "America/Los_Angeles").id == "2026-W48"
    assert week_containing(when, "UTC").id == "2026-W49"


def test_issue_no_1_is_the_configured_week_else_the_archives_first_else_this_one():
    assert numbering_start("2026-W40", ["2026-W44"], "2026-W48") == "2026-W40"
    assert numbering_start("", ["2026-W48", "2025-W52", "2026-W02"], "2026-W49") == "2025-W52"
    assert numbering_start("", ["2026-W99", "notes", "2026-W47"], "2026-W48") == "2026-W47"
    assert numbering_start("", [], "2026-W48") == "2026-W48"  # a fresh archive: No. 1
