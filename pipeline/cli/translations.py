"""``newsletter translations``: the editor's file, ready to fill in."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import (
    EXIT_OK,
    add_feed,
    add_week,
    future_week_said,
    github,
    shown,
    translation,
)
from pipeline.core.issue.editorial import editorial_path
from pipeline.errors import UsageError
from pipeline.stages.build import rank_week, read_feeds
from pipeline.stages.built import choose_week
from pipeline.stages.skeleton import extend

if TYPE_CHECKING:
    from pipeline.config import Settings

__all__ = ["add_parser"]


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    translations = commands.add_parser(
        "translations", help="add a skeleton to the editor's file for every text to write",
        description="Append to editorial/<week>.toml an empty title/body for every missing or "
        "machine-made text of the week, quoting what there is to translate from. Never "
        "changes what the editor wrote.")
    add_week(translations)
    add_feed(translations)
    translations.set_defaults(handler=_cmd_translations)


def _cmd_translations(args: argparse.Namespace, settings: Settings) -> int:
    week = choose_week(settings, args.week)
    locations = tuple(args.feed) or settings.feed.urls
    if not locations:
        raise UsageError("no feed to read: pass --feed PATH_OR_URL or set [feed] urls")
    results = read_feeds(settings, locations)
    with translation(settings) as translate, future_week_said(settings, week.id):
        items = rank_week(settings, week, results, translate, github(settings)).items
    path = editorial_path(settings.resolve(settings.paths.editorial_dir), week.id)
    added = extend(path, items)
    if added:
        listed = ", ".join(f"#{pr} {lang}" for pr, lang in added)
        print(f"{shown(path)}: added {len(added)} skeleton(s): {listed}")
    else:
        print(f"{shown(path)}: nothing to add (every missing or machine-made text already "
              "has its table there)")
    return EXIT_OK
