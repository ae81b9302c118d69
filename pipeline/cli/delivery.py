"""``newsletter send | run``: the built issue delivered to the list (or as test copies).

    send [--week W] [--to ADDRESS [--layout L]] [--shard I/N] [--dry-run] [--limit N] ...
    run [--feed F] [--week W] [--dry-run] [--limit N] ...   build → checks → publish → send

Every check a send makes (gates, secret, addresses, the transport's login) happens before
anything is published or sent: see pipeline/stages/preflight.py. Handlers follow
pipeline/cli/__init__.py: ``handler(args, settings) -> int``, errors raised as
:class:`~pipeline.errors.NewsletterError` subclasses for the command line to map to exit
codes.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING, Any

from pipeline import log
from pipeline import week as clock
from pipeline.cli.common import (
    EXIT_OK,
    add_week,
    built_issue,
    copy_address,
    github,
    positive,
    shard,
    shown,
    translation,
)
from pipeline.cli.issue import publish_issue
from pipeline.errors import UsageError
from pipeline.model import LAYOUTS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pipeline.config import Settings
    from pipeline.core.assemble import Choice
    from pipeline.model import Week
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.preflight import Delivery
    from subscribers.store import SubscriberStore

__all__ = ["add_run", "add_send", "deliver", "open_delivery"]

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
    run.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL")
    _send_arguments(run)
    run.set_defaults(handler=_cmd_run)


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


def _cmd_send(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.built import choose_week
    from pipeline.stages.preflight import check_week

    if args.to is not None:  # --to "" is a mistake, not "no test copy"
        args.to = copy_address(args.to)
    if args.layout and not args.to:
        raise UsageError("--layout goes with --to (test copies)")
    if not args.to:  # before "not built": a future week is never built
        check_week(choose_week(settings, args.week), clock.now(),
                   allow_partial_week=args.allow_partial_week)
    built = built_issue(settings, args.week)
    with open_delivery(args, settings, built) as delivery:
        return deliver(args, settings, built, delivery)


def open_delivery(args: argparse.Namespace, settings: Settings, built: BuiltIssue
                  ) -> Delivery:
    """Every check ``send`` makes, transport probed (see ``pipeline/stages/preflight.py``)."""
    from pipeline.wiring import open_delivery

    return open_delivery(settings, os.environ, built, at=clock.now(),
                         test_copies=bool(args.to),
                         allow_missing_translations=args.allow_missing_translations,
                         allow_partial_week=getattr(args, "allow_partial_week", False))


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.built import choose_week
    from pipeline.stages.lock import hold
    from pipeline.stages.preflight import check_week
    from pipeline.wiring import open_store

    week = choose_week(settings, args.week)
    # Before the build: a week still running (or ahead) is refused without building it.
    check_week(week, clock.now(), allow_partial_week=args.allow_partial_week)
    # The issue's lease from the start: two schedulers firing together must not both
    # build, publish and send (the send inside holds the same lease again).
    with open_store(settings) as store, hold(store, f"send:{week.id}", f"run {week.id}"):
        return _run_week(args, settings, week, store)


def _run_week(args: argparse.Namespace, settings: Settings, week: Week,
              store: SubscriberStore) -> int:
    """Build (with the readers' choices) or reuse the approved issue, then check, publish
    and send that one folder: nothing is rendered again after the build."""
    built = _approved(settings, week) or _build(args, settings, week, store.variant_choices())
    args.to = None
    # Every check of the send, the transport's login included, before anything is
    # published: the archive never shows an issue that could not be sent.
    with log.timed(_log, "checks before publishing"):
        delivery = open_delivery(args, settings, built)
    with delivery:
        if not args.dry_run:
            with log.timed(_log, "publish"):
                publish_issue(settings, built)
        return deliver(args, settings, built, delivery)


def _approved(settings: Settings, week: Week) -> BuiltIssue | None:
    """The week's issue as approved, when it is (``run`` then sends what was proofed)."""
    from pipeline.stages.approve import is_approved
    from pipeline.stages.build import issue_dir
    from pipeline.stages.built import APPROVAL_FILE, load_built

    folder = issue_dir(settings, week)
    if not (folder / APPROVAL_FILE).exists():
        return None
    candidate = load_built(folder)
    if not is_approved(candidate):
        return None
    print(f"{week.id}: using the approved issue ({candidate.content_hash[:12]})")
    return candidate


def _build(args: argparse.Namespace, settings: Settings, week: Week,
           choices: Sequence[Choice]) -> BuiltIssue:
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    with translation(settings) as translate, log.timed(_log, "build"):
        result = build(settings, week_id=week.id, feeds=args.feed, translate=translate,
                       github=github(settings), choices=choices)
    variants = result.variant_count
    print(f"built {week.id}: {len(result.issue.items)} items"
          + (f", {variants} interest variant(s)" if variants else "")
          + f" → {shown(result.out_dir)}/")
    return load_built(result.out_dir)


def deliver(args: argparse.Namespace, settings: Settings, built: BuiltIssue,
            delivery: Delivery) -> int:
    """Send through ``delivery`` (already checked by :func:`open_delivery`; the caller
    closes it): test copies with ``--to``, else the list."""
    from pipeline.stages.send import send_tests

    if delivery.development and not args.dry_run:
        _log.info("note: NEWSLETTER_SECRET is not set; links are signed with the development "
                  "key (fine for the local outbox, never for real mail)")
    if args.to:
        for key, message_id in send_tests(built, delivery.messages, delivery.transport,
                                          args.to, args.layout or LAYOUTS):
            print(f"test copy {key} → {args.to}: {message_id}")
        return EXIT_OK
    return _send_list(args, settings, built, delivery)


def _send_list(args: argparse.Namespace, settings: Settings, built: BuiltIssue,
               delivery: Delivery) -> int:
    """The list, under its lease (see pipeline/stages/deliver.py), then what the operator
    needs: the summary, the unconfirmed addresses, the outbox folder."""
    from pipeline.stages.deliver import keep_report, send_list
    from pipeline.stages.send import SendOptions
    from pipeline.stages.send_report import Progress, stop_error
    from pipeline.wiring import open_store

    options = SendOptions(dry_run=args.dry_run, limit=args.limit,
                          resend_unconfirmed=args.resend_unconfirmed,
                          shard=getattr(args, "shard", None))
    shown_progress = not args.dry_run and _log.isEnabledFor(logging.INFO)  # -q: none

    def progress(active: int | None) -> Progress | None:
        return Progress(active) if shown_progress else None

    with open_store(settings) as store:
        report = send_list(built, delivery, store, options, progress=progress,
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
    if not delivery.transport.reaches_mailboxes and not args.dry_run:
        print(f"outbox: {shown(built.folder / 'outbox')}/")
    error = stop_error(report)
    if error is not None:
        raise error
    return EXIT_OK
