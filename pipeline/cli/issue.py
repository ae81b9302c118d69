"""``newsletter build | approve | publish | status | translations``: one week's issue, from
the feed (and the editor's file) to the archive."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import log
from pipeline import week as clock
from pipeline.cli.common import (
    EXIT_OK,
    add_correct,
    add_feed,
    add_week,
    built_issue,
    future_week_said,
    github,
    positive,
    publish_issue,
    say_built,
    shown,
    translation,
)
from pipeline.stages.approve import approve
from pipeline.stages.build import build, rank_week, read_feeds
from pipeline.stages.built import choose_week
from pipeline.stages.preflight import check_week
from pipeline.stages.preview import editorial_file
from pipeline.stages.send import check_gates
from pipeline.stages.skeleton import extend
from pipeline.stages.status import as_json, gather, render
from pipeline.wiring import archive_weeks, open_archive, open_store, reader_choices, sent_issue

if TYPE_CHECKING:
    from pipeline.config import Settings

__all__ = ["add_approve", "add_build", "add_publish", "add_status", "add_translations"]

_log = logging.getLogger("newsletter.cli")


def add_build(commands: argparse._SubParsersAction[Any]) -> None:
    build = commands.add_parser("build", help="collect, rank and render one issue",
                                description="Collect the week's reviews, rank them and render "
                                "the issue: issue.json plus an HTML and a text email per layout.")
    add_feed(build, "a feed to read (repeatable; default: [feed] urls)")
    add_week(build, "ISO week to build (default: the last complete week)")
    build.add_argument("--out", type=Path, metavar="DIR",
                       help="output folder (default: <build_dir>/issues/<week>/)")
    build.add_argument("--force", action="store_true",
                       help="replace an approved issue with different content (drops the "
                       "approval)")
    add_correct(build)
    build.set_defaults(handler=_cmd_build)


def add_approve(commands: argparse._SubParsersAction[Any]) -> None:
    approve = commands.add_parser("approve", help="record the proofed issue as approved",
                                  description="Record the content_hash of the built issue: "
                                  "what the editor proofed is what is sent.")
    add_week(approve)
    approve.set_defaults(handler=_cmd_approve)


def add_publish(commands: argparse._SubParsersAction[Any]) -> None:
    publish = commands.add_parser("publish", help="publish the built issue to the web archive",
                                  description="Write the issue's pages, then regenerate the "
                                  "index, Atom feed and sitemap from what the archive holds.")
    add_week(publish)
    publish.add_argument("--allow-missing-translations", action="store_true",
                         help="publish even though some items lack a language")
    publish.add_argument("--allow-partial-week", action="store_true",
                         help="publish a week that has not ended yet (publish it again once "
                         "it has, to add its later reviews)")
    publish.set_defaults(handler=_cmd_publish)


def add_status(commands: argparse._SubParsersAction[Any]) -> None:
    status = commands.add_parser(
        "status", help="where the week's issue stands, bounce and complaint rates, the list",
        description="Built, approved, published; sent, failed, unconfirmed (from the ledger, "
        "all shards merged); bounce and complaint rates of the last issues against the 0.3 %% "
        "complaint line; the list by status and layout. Exit 0 sent in full (bounces "
        "counted, not failures), 3 waiting for approval, 4 not fully sent or stopped "
        "(run again; unconfirmed recipients: --resend-unconfirmed), 1 a run stopped on what "
        "no rerun cures (fix the configuration), 6 not built.")
    add_week(status)
    status.add_argument("--last", type=positive, default=6, metavar="N",
                        help="issues in the rates table (default 6)")
    status.add_argument("--json", action="store_true",
                        help="the same facts as one JSON document (same exit code)")
    status.set_defaults(handler=_cmd_status)


def add_translations(commands: argparse._SubParsersAction[Any]) -> None:
    translations = commands.add_parser(
        "translations", help="add a skeleton to the editor's file for every text to write",
        description="Append to editorial/<week>.toml an empty title/body for every missing or "
        "machine-made text of the week, quoting what there is to translate from. Never "
        "changes what the editor wrote.")
    add_week(translations)
    add_feed(translations)
    translations.set_defaults(handler=_cmd_translations)


def _cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    choices, sent = reader_choices(settings, choose_week(settings, args.week).id)
    with translation(settings) as translate, future_week_said(settings, args.week), \
            log.timed(_log, "build"):
        built = build(settings, week_id=args.week, feeds=args.feed, out=args.out,
                      force=args.force, translate=translate, github=github(settings),
                      choices=choices, sent=sent, correct=args.correct,
                      archive_weeks=archive_weeks(settings))
    issue = built.issue
    say_built(issue.id, issue.items, issue.problems, issue.hidden)
    for key, result in built.rendered.items():
        print(f"  email-{key}.html {result.html_bytes / 1000:.1f} KB"
              + (f" (areas first: {', '.join(result.areas)})" if result.areas else ""))
    print(f"{built.variant_count} interest variant(s) for {len(choices)} reader choice(s)")
    print(f"artifacts: {shown(built.out_dir)}/")
    print(f"content_hash: {built.data['content_hash']}")
    if issue.correction is not None:
        print(f"a correction of the issue sent (its page says: corrected on "
              f"{issue.correction.on}: {issue.correction.reason})")
    return EXIT_OK


def _cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    built = built_issue(settings, args.week)
    blocking = built.blocking()
    approval = approve(built, clock.now(), sent_issue(settings, built.id))
    print(f"approved {built.id} as {approval.content_hash}"
          + (" (a correction of the issue sent)" if built.issue.correction else ""))
    if blocking:
        _log.warning("%d blocking problem(s) still stop a send (first: %s)", len(blocking),
                     blocking[0].code)
    return EXIT_OK


def _cmd_publish(args: argparse.Namespace, settings: Settings) -> int:
    # As send and run do, before "not built": a week still running is not put on the web.
    check_week(choose_week(settings, args.week), clock.now(),
               allow_partial_week=args.allow_partial_week, doing="publish")
    built = built_issue(settings, args.week)
    check_gates(built, settings, allow_missing_translations=args.allow_missing_translations)
    publish_issue(settings, built)
    return EXIT_OK


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    week = choose_week(settings, args.week)
    with open_store(settings) as store, open_archive(settings) as archive:
        status, history, counts = gather(settings, week.id, store, archive, last=args.last)
    print(json.dumps(as_json(status, history, counts), indent=2, ensure_ascii=False)
          if args.json else render(status, history, counts))
    return status.exit_code


def _cmd_translations(args: argparse.Namespace, settings: Settings) -> int:
    week = choose_week(settings, args.week)
    results = read_feeds(settings, args.feed)
    with translation(settings) as translate, future_week_said(settings, week.id):
        items = rank_week(settings, week, results, translate, github(settings)).items
    path = editorial_file(settings, week.id)
    added = extend(path, items)
    if added:
        listed = ", ".join(f"#{pr} {lang}" for pr, lang in added)
        print(f"{shown(path)}: added {len(added)} skeleton(s): {listed}")
    else:
        print(f"{shown(path)}: nothing to add (every missing or machine-made text already "
              "has its table there)")
    return EXIT_OK
