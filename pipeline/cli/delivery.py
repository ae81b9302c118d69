"""``newsletter send | run``: the built issue delivered to the list (or as test copies).

The weekly job's order is pipeline/stages/run.py's; this module turns the flags into its
request, wires its steps from the settings and says what happened.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from pipeline import log
from pipeline import week as clock
from pipeline.cli.common import (
    EXIT_OK,
    add_feed,
    add_week,
    built_issue,
    copy_address,
    github,
    open_delivery,
    positive,
    publish_issue,
    say_development_key,
    send_copies,
    shard,
    shown,
    translation,
)
from pipeline.errors import UsageError
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import choose_week, issue_folder, load_built
from pipeline.stages.deliver import SendRequest, keep_report, send_list
from pipeline.stages.preflight import check_week
from pipeline.stages.run import RunRequest, run_week
from pipeline.stages.send import SendOptions
from pipeline.stages.send_report import Progress, stop_error
from pipeline.wiring import archive_weeks, open_store

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pipeline.config import Settings
    from pipeline.core.assemble import Choice
    from pipeline.model import Week
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.preflight import Delivery
    from subscribers.model import SentIssue
    from subscribers.store import SubscriberStore

__all__ = ["add_run", "add_send"]

_log = logging.getLogger("newsletter.cli")


def add_send(commands: argparse._SubParsersAction[Any]) -> None:
    send = commands.add_parser("send", help="deliver the built issue to active subscribers",
                               description="Send the built issue to every active subscriber "
                               "in the layout each chose. Nobody gets it twice; a re-run sends "
                               "only what is missing.")
    _send_arguments(send)
    send.add_argument("--to", metavar="ADDRESS",
                      help="send test copies to ADDRESS (outside the ledger), not the list")
    send.add_argument("--layout", choices=LAYOUTS, action="append",
                      help="with --to: only this layout (repeatable; default all four)")
    send.add_argument("--shard", type=shard, metavar="I/N",
                      help="send only part I of N of the list (a stable partition by "
                      "subscriber id), at max_rate/N; N workers together reach everyone once")
    send.set_defaults(handler=_cmd_send)


def add_run(commands: argparse._SubParsersAction[Any]) -> None:
    run = commands.add_parser("run", help="the weekly job: build (or reuse the approved "
                              "issue), check the gates, publish, send",
                              description="build (reusing an approved issue) → check "
                              "everything send checks (gates, secret, addresses, https app URL, "
                              "the transport's login, a week that has not ended) → publish → "
                              "send. Nothing is published for an issue that cannot be sent.")
    add_feed(run)
    _send_arguments(run)
    run.set_defaults(handler=_cmd_run, shard=None)  # run sends the whole list


def _send_arguments(parser: argparse.ArgumentParser) -> None:
    add_week(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="count who would receive it; send nothing")
    parser.add_argument("--limit", type=positive, metavar="N",
                        help="send at most N messages this run")
    parser.add_argument("--allow-missing-translations", action="store_true",
                        help="send even though some items lack a language")
    parser.add_argument("--resend-unconfirmed", action="store_true",
                        help="send again to recipients whose delivery is unconfirmed")
    parser.add_argument("--allow-partial-week", action="store_true",
                        help="send a week that has not ended yet (its later reviews then "
                        "reach nobody: the ledger keeps each reader to one copy)")


def _send_request(args: argparse.Namespace) -> SendRequest:
    options = SendOptions(dry_run=args.dry_run, limit=args.limit,
                          resend_unconfirmed=args.resend_unconfirmed, shard=args.shard)
    return SendRequest(options, allow_missing_translations=args.allow_missing_translations,
                       allow_partial_week=args.allow_partial_week)


def _cmd_send(args: argparse.Namespace, settings: Settings) -> int:
    if args.to is not None:  # --to "" is a mistake, not "no test copy"
        to = copy_address(args.to)  # before "not built": a usage error comes first
        send_copies(settings, built_issue(settings, args.week), to, tuple(args.layout or LAYOUTS))
        return EXIT_OK
    if args.layout:
        raise UsageError("--layout goes with --to (test copies)")
    # Before "not built": a future week is never built.
    check_week(choose_week(settings, args.week), clock.now(),
               allow_partial_week=args.allow_partial_week)
    built = built_issue(settings, args.week)
    request = _send_request(args)
    with open_delivery(settings, built, request) as delivery, open_store(settings) as store:
        return _send_list(settings, built, delivery, store, request)


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    week = choose_week(settings, args.week)
    request = RunRequest(week, tuple(args.feed), _send_request(args))
    return run_week(request, _Steps(settings), at=clock.now(),
                    issue_folder=issue_folder(settings, week.id))


class _Steps:
    """The weekly job's steps (pipeline/stages/run.py): adapters from the settings, what
    happened said on stdout."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def open_store(self) -> SubscriberStore:
        return open_store(self.settings)

    def reuse(self, built: BuiltIssue, sent: bool) -> None:
        what = "the issue that went out" if sent else "the approved issue"
        print(f"{built.id}: using {what} ({built.content_hash[:12]})")

    def build(self, week: Week, feeds: Sequence[str], choices: Sequence[Choice],
              sent: SentIssue | None) -> BuiltIssue:
        settings = self.settings
        with translation(settings) as translate, log.timed(_log, "build"):
            result = build(settings, week_id=week.id, feeds=feeds, translate=translate,
                           github=github(settings), choices=choices, sent=sent,
                           archive_weeks=archive_weeks(settings))
        variants = result.variant_count
        print(f"built {week.id}: {len(result.issue.items)} items"
              + (f", {variants} interest variant(s)" if variants else "")
              + f" → {shown(result.out_dir)}/")
        return load_built(result.out_dir)

    def open_delivery(self, built: BuiltIssue, request: SendRequest) -> Delivery:
        return open_delivery(self.settings, built, request)

    def publish(self, built: BuiltIssue, store: SubscriberStore) -> None:
        publish_issue(self.settings, built, store)

    def send(self, built: BuiltIssue, delivery: Delivery, store: SubscriberStore,
             request: SendRequest) -> int:
        return _send_list(self.settings, built, delivery, store, request)


def _send_list(settings: Settings, built: BuiltIssue, delivery: Delivery,
               store: SubscriberStore, request: SendRequest) -> int:
    """Send to the list, then say what the operator needs: the summary, the unconfirmed
    addresses, the outbox folder."""
    options = request.options
    if delivery.development and not options.dry_run:
        say_development_key()
    quiet = options.dry_run or not _log.isEnabledFor(logging.INFO)  # -q: no progress line
    report = send_list(built, delivery, store, options,
                       progress=(lambda active: None) if quiet else Progress,
                       concurrency=settings.delivery.concurrency,
                       retry_seconds=settings.delivery.retry_seconds)
    print(report.summary())
    keep_report(built, report, options.shard)
    if report.unconfirmed_ids:
        print("unconfirmed (may or may not have arrived; --resend-unconfirmed sends "
              "them again):")
        for subscriber_id in report.unconfirmed_ids:
            found = store.get(subscriber_id)
            print(f"  {found.email if found else subscriber_id}")
    if not delivery.transport.reaches_mailboxes and not options.dry_run:
        print(f"outbox: {shown(built.folder / 'outbox')}/")
    if (error := stop_error(report)) is not None:
        raise error
    return EXIT_OK
