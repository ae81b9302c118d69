"""Move the bundled sample feed's dates into the last complete week, whole weeks at a time.

The sample feed (``sample-feed.atom``) is dated in 2026-W48. ``make run`` builds "the last
complete week", which moves on every Monday; so it runs this first, writing a copy whose
``<published>`` and ``<updated>`` dates are shifted by whole weeks. Weekdays and times of day
are kept, so every entry stays inside its week (and the late Sunday entry stays late Sunday).

    python examples/redate.py SOURCE DEST

The timezone is the configured one (``newsletter.toml``, ``NEWSLETTER_ISSUE_TIMEZONE``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

from pipeline.config import load
from pipeline.week import last_complete_week, week_containing

_DATE = re.compile(r"<(published|updated)>([^<]+)</\1>")


def redate(text: str, tz: str) -> str:
    stamps = [datetime.fromisoformat(m[2].strip()) for m in _DATE.finditer(text)]
    if not stamps:
        return text
    sample_week = week_containing(min(stamps), tz)
    shift = last_complete_week(tz).start - sample_week.start
    weeks = timedelta(weeks=round(shift / timedelta(weeks=1)))

    def move(match: re.Match) -> str:
        moved = datetime.fromisoformat(match[2].strip()) + weeks
        return f"<{match[1]}>{moved.isoformat()}</{match[1]}>"

    return _DATE.sub(move, text)


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("source", type=Path)
    args.add_argument("dest", type=Path)
    ns = args.parse_args()
    tz = load(None, os.environ).issue.timezone
    ns.dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = ns.dest.with_name(ns.dest.name + ".tmp")
    tmp.write_text(redate(ns.source.read_text(encoding="utf-8"), tz), encoding="utf-8")
    tmp.replace(ns.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
