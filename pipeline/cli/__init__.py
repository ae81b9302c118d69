"""The command line: parse arguments, run a stage, map errors to DESIGN.md's exit codes.

0 done · 1 unexpected failure · 2 bad usage, config or input · 3 blocked · 4 stopped,
resumable · 5 locked · 6 nothing to do. A mistake a user can make ends in one line on
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pipeline import __version__, log
from pipeline import week as clock
from pipeline.cli.inbox import add_parser as add_inbox_commands
from pipeline.cli.store import add_parser as add_store_commands
from pipeline.cli.subscribers import add_parser as add_subscriber_commands
from pipeline.config import load
from pipeline.errors import NewsletterError, OutputError, UsageError
from pipeline.model import LAYOUTS

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.core.bilingual import Translate
    from pipeline.core.proof import ProofReport
    from pipeline.model import Week
    from pipeline.sources.github import GithubClient
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.preflight import Delivery
    from pipeline.stages.preview import Preview
    from subscribers.shards import Shard

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BLOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4
_log = logging.getLogger("newsletter.cli")

#: What ``set_defaults(handler=…)`` names for each command: it runs the command and returns
#: its exit code (errors it raises are mapped by :func:`main`).
Handler = Callable[[argparse.Namespace, "Settings"], int]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2), like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="newsletter", description="vLLM PR Weekly: build and deliver the "
                  "weekly bilingual newsletter of vllm-project/vllm PR reviews.")
    top.add_argument("--config", type=Path, metavar="FILE",
                     help="configuration file (default: ./newsletter.toml if present)")
    top.add_argument("--traceback", action="store_true", help="show tracebacks of internal errors")
    _verbosity_arguments(top, default=False)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    build = commands.add_parser("build", help="collect, rank and render one issue",
                                description="Collect the week's reviews, rank them and render "
                                "the issue: issue.json plus an HTML and a text email per layout.")
    build.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL",
                       help="a feed to read (repeatable; default: [feed] urls)")
    build.add_argument("--week", metavar="YYYY-Www",
                       help="ISO week to build (default: the last complete week)")
    build.add_argument("--out", type=Path, metavar="DIR",
                       help="output folder (default: <build_dir>/issues/<week>/)")
    build.add_argument("--force", action="store_true",
                       help="replace an approved issue with different content (drops the "
                       "approval)")
    build.set_defaults(handler=_cmd_build)

    approve = commands.add_parser("approve", help="record the proofed issue as approved",
                                  description="Record the content_hash of the built issue: "
                                  "what the editor proofed is what is sent.")
    approve.add_argument("--week", metavar="YYYY-Www", help="default: the last complete week")
    approve.set_defaults(handler=_cmd_approve)

    send = commands.add_parser("send", help="deliver the built issue to active subscribers",
                               description="Send the built issue to every active subscriber "
                               "in the layout each chose. Nobody gets it twice; a re-run sends "
                               "only what is missing.")
    _send_arguments(send)
    send.add_argument("--to", metavar="ADDRESS",
                      help="send test copies to ADDRESS (outside the ledger), not the list")
    send.add_argument("--layout", choices=LAYOUTS, action="append",
                      help="with --to: only this layout (repeatable; default all four)")
    send.add_argument("--shard", type=_shard, metavar="I/N",
                      help="send only part I of N of the list (a stable partition by "
                      "subscriber id), at max_rate/N; N workers together reach everyone once")
    send.set_defaults(handler=_cmd_send)

    preview = commands.add_parser(
        "preview", help="build the issue and write a preview to proof it before approving",
        description="Build the issue (an approved one is kept unless its content changed), "
        "write <issue folder>/preview/ (every layout at 375 and 600 px and dark, subjects "
        "and preheaders, the proof report, the ranking, screenshots where chromium is "
        "installed), serve it on 127.0.0.1 and print the approve command. Exit 3 when the "
        "proof report has a blocking problem.")
    preview.add_argument("--week", metavar="YYYY-Www",
                         help="default: the last complete week (the next one to send)")
    preview.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL",
                         help="a feed to read (repeatable; default: [feed] urls)")
    preview.add_argument("--port", type=_port, default=0, metavar="P",
                         help="port to serve on, on 127.0.0.1 (default: any free port)")
    preview.add_argument("--no-serve", action="store_true",
                         help="write the preview and stop; serve nothing")
    preview.add_argument("--watch", action="store_true",
                         help="rebuild when the feed files, the templates or the editor's "
                         "file change (Ctrl-C stops)")
    preview.add_argument("--to", metavar="ADDRESS",
                         help="also send test copies to ADDRESS, as send --to does (once, "
                         "at the start)")
    preview.add_argument("--layouts", type=_layout_list, metavar="L[,L...]",
                         help="with --to: only these layouts, e.g. zh-en,en (default all four)")
    preview.add_argument("--no-screenshots", action="store_true",
                         help="skip the PNG screenshots (faster)")
    preview.set_defaults(handler=_cmd_preview)

    publish = commands.add_parser("publish", help="publish the built issue to the web archive",
                                  description="Write the issue's pages, then regenerate the "
                                  "index, Atom feed and sitemap from what the archive holds.")
    publish.add_argument("--week", metavar="YYYY-Www", help="default: the last complete week")
    publish.add_argument("--allow-missing-translations", action="store_true",
                         help="publish even though some items lack a language")
    publish.set_defaults(handler=_cmd_publish)

    run = commands.add_parser("run", help="the weekly job: build (or reuse the approved "
                              "issue), check the gates, publish, send",
                              description="build (reusing an approved issue) → check "
                              "everything send checks (gates, secret, addresses, https app URL, "
                              "the transport's login, a week that has not ended) → publish → "
                              "send. Nothing is published for an issue that cannot be sent.")
    run.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL")
    _send_arguments(run)
    run.set_defaults(handler=_cmd_run)

    serve = commands.add_parser(
        "serve", help="run the subscription app (subscribe, confirm, unsubscribe, "
        "preferences, SES webhook)",
        description="Serve the subscription app of [site] app_url: the subscribe form, "
        "double opt-in confirmation, one-click unsubscribe (RFC 8058), preferences, and "
        "POST /webhooks/ses for SES bounces and complaints through Amazon SNS.")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, metavar="P",
                       help="port (default: the port of [site] app_url, else 8001); with a "
                       "loopback app_url the links in its mails name this port")
    serve.set_defaults(handler=_cmd_serve)

    add_inbox_commands(commands)

    status = commands.add_parser(
        "status", help="where the week's issue stands, bounce and complaint rates, the list",
        description="Built, approved, published; sent, failed, unconfirmed (from the ledger, "
        "all shards merged); bounce and complaint rates of the last issues against the 0.3 %% "
        "complaint line; the list by status and layout. Exit 0 sent in full, 3 waiting for "
        "approval, 4 not fully sent, 1 something failed, 6 not built.")
    status.add_argument("--week", metavar="YYYY-Www", help="default: the last complete week")
    status.add_argument("--last", type=_positive, default=6, metavar="N",
                        help="issues in the rates table (default 6)")
    status.set_defaults(handler=_cmd_status)

    translations = commands.add_parser(
        "translations", help="add a skeleton to the editor's file for every text to write",
        description="Append to editorial/<week>.toml an empty title/body for every missing or "
        "machine-made text of the week, quoting what there is to translate from. Never "
        "changes what the editor wrote.")
    translations.add_argument("--week", metavar="YYYY-Www",
                              help="default: the last complete week")
    translations.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL")
    translations.set_defaults(handler=_cmd_translations)

    add_subscriber_commands(commands)
    add_store_commands(commands)
    for command in _subcommands(top):
        _verbosity_arguments(command, default=argparse.SUPPRESS)
    return top


def _verbosity_arguments(parser: argparse.ArgumentParser, default: object) -> None:
    """``-v`` / ``-q``, before the command or after it (``newsletter -q run`` and
    ``newsletter run -q``): a subcommand's default is SUPPRESS, so it never undoes what was
    given before the command."""
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="also show debug detail on stderr (config file, feeds fetched, "
                        "transport, timings)")
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="show only errors, warnings and results (no notes or progress)")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every subcommand's parser, nested ones (``subscribers add``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield sub
                yield from _subcommands(sub)


def _send_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--week", metavar="YYYY-Www", help="default: the last complete week")
    parser.add_argument("--dry-run", action="store_true",
                        help="count who would receive it; send nothing")
    parser.add_argument("--limit", type=_positive, metavar="N",
                        help="send at most N messages this run")
    parser.add_argument("--allow-missing-translations", action="store_true",
                        help="send even though some items lack a language")
    parser.add_argument("--resend-unconfirmed", action="store_true",
                        help="send again to recipients whose delivery is unconfirmed")
    parser.add_argument("--allow-partial-week", action="store_true",
                        help="send a week that has not ended yet (its later reviews then "
                        "reach nobody: the ledger keeps each reader to one copy)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shard(text: str) -> Shard:
    from subscribers.shards import Shard

    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return value


def _layout_list(text: str) -> tuple[str, ...]:
    layouts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown or not layouts:
        raise argparse.ArgumentTypeError(f"layouts are {', '.join(LAYOUTS)}; got {text!r}")
    return tuple(dict.fromkeys(layouts))


@contextlib.contextmanager
def _translation(settings: Settings) -> Iterator[Translate | None]:
    """The machine-translation callable for a build, or None when ``[translate] backend`` is
    "none"; its translation memory stays open for the block."""
    from pipeline.translate import TranslationMemory, memory_path, open_translator, translate_html

    translator = open_translator(settings, os.environ)
    if translator is None:
        yield None
        return
    memory = TranslationMemory.open(memory_path(settings))
    try:
        yield functools.partial(translate_html, translator, memory)
    finally:
        memory.close()
        close = getattr(translator, "close", None)
        if close:
            close()


def _github(settings: Settings) -> GithubClient | None:
    """The GitHub facts source for a build, or None when ``[github] enabled`` is false."""
    from pipeline.sources.github import open_client

    return open_client(settings, os.environ)


def _cmd_translations(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.core.editorial import editorial_path
    from pipeline.stages.build import choose_week, rank_week, read_feeds
    from pipeline.stages.skeleton import extend

    week = choose_week(settings, args.week)
    locations = tuple(args.feed) or settings.feed.urls
    if not locations:
        raise UsageError("no feed to read: pass --feed PATH_OR_URL or set [feed] urls")
    results = read_feeds(settings, locations)
    with _translation(settings) as translate, _future_week_said(settings, week.id):
        items, _, _ = rank_week(settings, week, results, translate, _github(settings))
    path = editorial_path(settings.resolve(settings.paths.editorial_dir), week.id)
    added = extend(path, items)
    if added:
        listed = ", ".join(f"#{pr} {lang}" for pr, lang in added)
        print(f"{_shown(path)}: added {len(added)} skeleton(s): {listed}")
    else:
        print(f"{_shown(path)}: nothing to add (every missing or machine-made text already "
              "has its table there)")
    return EXIT_OK


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.archive import open_archive
    from pipeline.stages.build import choose_week
    from pipeline.stages.status import gather, render
    from subscribers.store.sqlite import open_store

    week = choose_week(settings, args.week)
    with open_store(settings) as store:
        status, history, counts = gather(settings, week.id, store, open_archive(settings),
                                         last=args.last)
    print(render(status, history, counts))
    return status.exit_code


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.web.serve import default_port, serve

    return serve(settings, os.environ, host=args.host,
                 port=args.port if args.port is not None else default_port(settings))


@contextlib.contextmanager
def _future_week_said(settings: Settings, week_id: str | None) -> Iterator[None]:
    """A week that lies ahead has no reviews: say that it has not started (exit 2), not
    "nothing to do"."""
    from pipeline.errors import EmptyWeekError
    from pipeline.stages.build import choose_week
    from pipeline.stages.preflight import not_started

    try:
        yield
    except EmptyWeekError as exc:
        early = not_started(choose_week(settings, week_id), clock.now())
        if early is None:
            raise
        raise early from exc


def _cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.build import build

    with _translation(settings) as translate, _future_week_said(settings, args.week), \
            log.timed(_log, "build"):
        built = build(settings, week_id=args.week, feeds=args.feed, out=args.out,
                      force=args.force, translate=translate, github=_github(settings))
    issue = built.issue
    tiers = Counter(item.tier for item in issue.items)
    blocking = [p for p in issue.problems if p.severity == "blocking"]
    warnings = [p for p in issue.problems if p.severity == "warning"]
    summary = ", ".join(f"{n} {tier}" for tier, n in tiers.items())
    print(f"built {issue.id}: {len(issue.items)} items ({summary}); "
          f"{len(blocking)} blocking problem(s), {len(warnings)} warning(s)")
    for problem in issue.problems:
        print(f"  {problem.severity}: {problem.code}: {problem.message}")
    for layout, result in built.rendered.items():
        print(f"  email-{layout}.html {result.html_bytes / 1000:.1f} KB")
    print(f"artifacts: {_shown(built.out_dir)}/")
    print(f"content_hash: {built.data['content_hash']}")
    return EXIT_OK


def _built(settings: Settings, week: str | None) -> BuiltIssue:
    """The built issue of ``--week`` (default: the last complete week), hash checked."""
    from pipeline.stages.build import choose_week
    from pipeline.stages.built import issue_folder, load_built

    return load_built(issue_folder(settings, choose_week(settings, week).id))


def _cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.approve import approve
    from pipeline.week import now

    built = _built(settings, args.week)
    blocking = built.blocking()
    approval = approve(built, now())
    print(f"approved {built.id} as {approval.content_hash}")
    if blocking:
        _log.warning("%d blocking problem(s) still stop a send (first: %s)", len(blocking),
                     blocking[0].code)
    return EXIT_OK


def _test_address(text: str) -> str:
    """``--to``, checked as ``subscribers import`` checks an address (email-validator, no
    DNS) and normalised: a typo, two addresses or a line break is refused (exit 2) before
    anything is opened, not handed to the transport."""
    from subscribers.errors import InvalidAddress
    from subscribers.model import normalise_email

    try:
        return normalise_email(text)
    except InvalidAddress as exc:
        raise UsageError(f"--to: {exc}") from None


def _cmd_send(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.build import choose_week
    from pipeline.stages.preflight import check_week

    if args.to is not None:  # --to "" is a mistake, not "no test copy"
        args.to = _test_address(args.to)
    if args.layout and not args.to:
        raise UsageError("--layout goes with --to (test copies)")
    if not args.to:  # before "not built": a future week is never built
        check_week(choose_week(settings, args.week), clock.now(),
                   allow_partial_week=args.allow_partial_week)
    built = _built(settings, args.week)
    delivery = _open_delivery(args, settings, built)
    try:
        return _deliver(args, settings, built, delivery)
    finally:
        delivery.close()


def _open_delivery(args: argparse.Namespace, settings: Settings, built: BuiltIssue
                   ) -> Delivery:
    """Every check ``send`` makes, transport probed (see ``pipeline/stages/preflight.py``)."""
    from pipeline.stages.preflight import open_delivery

    return open_delivery(settings, os.environ, built, at=clock.now(),
                         test_copies=bool(args.to),
                         allow_missing_translations=args.allow_missing_translations,
                         allow_partial_week=getattr(args, "allow_partial_week", False))


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.build import choose_week
    from pipeline.stages.lock import hold
    from pipeline.stages.preflight import check_week
    from subscribers.store.sqlite import open_store

    week = choose_week(settings, args.week)
    # Before the build: a week still running (or ahead) is refused without building it.
    check_week(week, clock.now(), allow_partial_week=args.allow_partial_week)
    # The issue's lease from the start: two schedulers firing together must not both
    # build, publish and send (the send inside holds the same lease again).
    with open_store(settings) as store, hold(store, f"send:{week.id}", f"run {week.id}"):
        return _run_week(args, settings, week)


def _run_week(args: argparse.Namespace, settings: Settings, week: Week) -> int:
    from pipeline.stages.approve import is_approved
    from pipeline.stages.build import build, issue_dir
    from pipeline.stages.built import APPROVAL_FILE, load_built

    folder = issue_dir(settings, week)
    built = None
    if (folder / APPROVAL_FILE).exists():
        candidate = load_built(folder)
        if is_approved(candidate):
            print(f"{week.id}: using the approved issue ({candidate.content_hash[:12]})")
            built = candidate
    if built is None:
        with _translation(settings) as translate, log.timed(_log, "build"):
            result = build(settings, week_id=week.id, feeds=args.feed, translate=translate,
                           github=_github(settings))
        print(f"built {week.id}: {len(result.issue.items)} items → {_shown(result.out_dir)}/")
        built = load_built(result.out_dir)
    args.to = None
    # Every check of the send, the transport's login included, before anything is
    # published: the archive never shows an issue that could not be sent.
    with log.timed(_log, "checks before publishing"):
        delivery = _open_delivery(args, settings, built)
    try:
        if not args.dry_run:
            with log.timed(_log, "publish"):
                _publish(settings, built)
        return _deliver(args, settings, built, delivery)
    finally:
        delivery.close()


def _cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    """build → proof → preview folder → (test copies) → serve / watch → exit 3 if blocked."""
    import shlex
    import shutil
    import time

    from pipeline.stages.build import choose_week
    from pipeline.stages.preview import Watcher, editorial_file, preview_issue, serve, watched_paths

    if args.layouts and not args.to:
        raise UsageError("--layouts goes with --to (test copies)")
    if args.to is not None:  # --to "" is a mistake, not "no test copy"
        args.to = _test_address(args.to)
    week = choose_week(settings, args.week)
    config = f"--config {shlex.quote(str(args.config))} " if args.config else ""
    approve = f"newsletter {config}approve --week {week.id}"
    chromium = None if args.no_screenshots else shutil.which("chromium")
    skip = ("--no-screenshots was given" if args.no_screenshots
            else "no chromium on the PATH (install Debian's chromium to get them)")

    def make() -> tuple[BuiltIssue, ProofReport, Preview]:
        with _translation(settings) as translate:
            return preview_issue(settings, week.id, args.feed, approve_command=approve,
                                 chromium=chromium, skip_reason=skip, shown=_shown,
                                 translate=translate, github=_github(settings))

    with _future_week_said(settings, week.id):
        built, report, preview = make()
    _show_preview(built, report, preview)
    if args.to:
        copies = argparse.Namespace(to=args.to, layout=list(args.layouts or LAYOUTS),
                                    dry_run=False, limit=None, resend_unconfirmed=False,
                                    allow_missing_translations=False)
        delivery = _open_delivery(copies, settings, built)
        try:
            _deliver(copies, settings, built, delivery)
        finally:
            delivery.close()
    server = None
    if not args.no_serve:
        server = serve(built.folder, args.port)
        print(f"serving at http://127.0.0.1:{server.server_port}/preview/index.html "
              "(Ctrl-C stops)", flush=True)
    failed: NewsletterError | None = None
    try:
        if args.watch:
            watcher = Watcher(watched_paths(settings, week.id, args.feed))
            print(f"watching {len(watcher.state)} file(s): the feed, the templates and "
                  f"{_shown(editorial_file(settings, week.id))} (Ctrl-C stops)", flush=True)
            print(f"to approve: {approve}", flush=True)
            while True:
                time.sleep(1.0)
                changed = watcher.changed()
                if not changed:
                    continue
                print(f"changed: {', '.join(_shown(p) for p in changed[:3])}"
                      + (f" and {len(changed) - 3} more" if len(changed) > 3 else ""),
                      flush=True)
                try:
                    built, report, preview = make()
                except NewsletterError as exc:
                    failed = exc
                    print(f"newsletter: error: {exc} (still watching)", file=sys.stderr,
                          flush=True)
                    continue
                failed = None
                print(f"rebuilt {built.id}: {len(built.issue.items)} items, "
                      f"{len(report.blocking)} blocking, {len(report.warnings)} warning(s); "
                      f"content_hash {built.content_hash}", flush=True)
                print(f"to approve: {approve}", flush=True)
        elif server is not None:
            print(f"to approve: {approve}", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopped", flush=True)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    print(f"to approve {built.id} as {built.content_hash[:12]}: {approve}", flush=True)
    if failed is not None:
        raise failed
    if report.has_blocking:
        first = report.blocking[0]
        print(f"newsletter: blocked: {len(report.blocking)} blocking problem(s) in the proof "
              f"report, first: {first.code}: {first.message}", file=sys.stderr)
        return EXIT_BLOCKED
    return EXIT_OK


def _show_preview(built: BuiltIssue, report: ProofReport, preview: Preview) -> None:
    tiers = Counter(item.tier for item in built.issue.items)
    print(f"built {built.id}: {len(built.issue.items)} items "
          f"({', '.join(f'{n} {tier}' for tier, n in tiers.items())}); "
          f"{len(report.blocking)} blocking problem(s), {len(report.warnings)} warning(s)")
    for problem in report.problems:
        print(f"  {problem.severity}: {problem.code}: {problem.message}")
    for size in report.sizes:
        print(f"  email-{size.layout}.html {size.weight / 1000:.1f} KB as sent "
              f"({size.percent:.0f}% of {size.budget / 1000:.0f} KB)")
    shots = preview.screenshots
    if shots.files:
        print(f"screenshots: {len(shots.files)} in {_shown(preview.folder / 'screenshots')}/")
    for note in shots.notes:
        print(f"screenshots: {'skipped: ' if not shots.files else ''}{note}")
    print(f"preview: {_shown(preview.index)}")
    print(f"content_hash: {built.content_hash}", flush=True)


def _cmd_publish(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.stages.send import check_gates

    built = _built(settings, args.week)
    check_gates(built, settings, allow_missing_translations=args.allow_missing_translations)
    _publish(settings, built)
    return EXIT_OK


def _publish(settings: Settings, built: BuiltIssue) -> None:
    from pipeline.archive import open_archive
    from pipeline.core.site import Site
    from pipeline.stages.publish import publish

    archive = open_archive(settings)
    report = publish(built, archive, Site(settings.site))
    where = (_shown(settings.resolve(settings.archive.dir)) + "/" if archive.name == "local"
             else f"s3://{settings.archive.bucket}/{settings.archive.prefix}")
    print(f"published {built.id} to {where}: {len(report.written)} object(s) written "
          f"({report.bytes_written / 1000:.1f} KB), {report.unchanged} unchanged")
    print(f"  {settings.site.base_url.rstrip('/')}/issues/{built.id}/index.html")


def _deliver(args: argparse.Namespace, settings: Settings, built: BuiltIssue,
             delivery: Delivery) -> int:
    """Send through ``delivery`` (already checked by :func:`_open_delivery`; the caller
    closes it): test copies with ``--to``, else the list."""
    from pipeline.stages.lock import hold
    from pipeline.stages.send import (
        Progress,
        Sender,
        SendOptions,
        send_tests,
        stop_error,
        write_report,
    )
    from subscribers.store.sqlite import open_store

    transport, messages = delivery.transport, delivery.messages
    if delivery.development and not args.dry_run:
        _log.info("note: NEWSLETTER_SECRET is not set; links are signed with the development "
                  "key (fine for the local outbox, never for real mail)")
    if args.to:
        for layout, message_id in send_tests(built, messages, transport, args.to,
                                             args.layout or LAYOUTS):
            print(f"test copy {layout} → {args.to}: {message_id}")
        return EXIT_OK
    shard = getattr(args, "shard", None)
    rate = delivery.rate
    if rate is not None and shard is not None:
        rate /= shard.count  # DESIGN.md: the account's rate is divided among shards
    name = f"send:{built.id}" + (f":{shard}" if shard else "")
    what = f"send {built.id}" + (f" shard {shard}" if shard else "")
    with open_store(settings) as store:
        sender = Sender(built, store, transport, messages, rate=rate,
                        concurrency=settings.delivery.concurrency)
        lost = "lost its lock to another run (this one stalled past its lease)"
        with hold(store, name, what, on_lost=lambda: sender.request_stop(lost)):
            options = SendOptions(dry_run=args.dry_run, limit=args.limit,
                                  resend_unconfirmed=args.resend_unconfirmed, shard=shard)
            active: int | None = store.count_by_status().get("active", 0)
            if shard is not None:
                active = None  # the shard's size is known only by walking it
            shown = not args.dry_run and _log.isEnabledFor(logging.INFO)  # -q: no progress
            with log.timed(_log, "send"):
                report = sender.run(options, Progress(active) if shown else None)
        print(report.summary())
        if not args.dry_run:
            try:
                write_report(built, report, shard)
            except OutputError as exc:
                if not report.stopped:
                    raise
                # The stop (exit 4) is what the operator must hear; the ledger keeps
                # the truth that the report would have summed up.
                _log.warning("%s", exc)
        if report.unconfirmed_ids:
            print("unconfirmed (may or may not have arrived; --resend-unconfirmed sends "
                  "them again):")
            for subscriber_id in report.unconfirmed_ids:
                found = store.get(subscriber_id)
                print(f"  {found.email if found else subscriber_id}")
    if transport.name == "outbox" and not args.dry_run:
        print(f"outbox: {_shown(built.folder / 'outbox')}/")
    if report.stopped:
        raise stop_error(report)
    return EXIT_OK


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.verbose and args.quiet:
        print("newsletter: error: -v/--verbose and -q/--quiet contradict each other "
              "(see newsletter --help)", file=sys.stderr)
        return EXIT_USAGE
    with log.to_stderr(log.level(args.verbose, args.quiet)):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        settings = load(args.config, os.environ)
        _log.debug("config: %s", settings.source or "built-in defaults (no newsletter.toml "
                   "here)")
        handler: Handler = args.handler
        return handler(args, settings)
    except NewsletterError as exc:
        print(f"newsletter: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("newsletter: interrupted; run the command again to finish", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `newsletter subscribers export | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # a bug, not a user mistake: say so in one line
        if args.traceback:
            traceback.print_exc()
        print(f"newsletter: internal error: {type(exc).__name__}: {exc} "
              "(run with --traceback for details)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
