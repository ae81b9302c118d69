"""``newsletter preview``: build the issue, proof it and show the editor what will be sent.

The preview itself is pipeline/stages/preview.py; this module reads the arguments, prints
and keeps the server up until Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import (
    EXIT_BLOCKED,
    EXIT_OK,
    add_correct,
    add_feed,
    add_week,
    copy_address,
    future_week_said,
    github,
    layout_list,
    port,
    say_built,
    send_copies,
    shown,
    translation,
)
from pipeline.errors import NewsletterError, UsageError
from pipeline.model import LAYOUTS
from pipeline.stages.approve import read_approval
from pipeline.stages.built import APPROVAL_FILE, choose_week
from pipeline.stages.invocation import command
from pipeline.stages.preview import (
    Watcher,
    editorial_file,
    next_step,
    preview_issue,
    serve,
    watch,
    watched_paths,
    write_preview,
)
from pipeline.stages.screenshots import Screenshotter
from pipeline.wiring import archive_weeks, reader_choices

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

    from pipeline.config import Settings
    from pipeline.core.proof import ProofReport
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.preview import Preview

__all__ = ["add_parser"]

#: One preview: the issue as built, its proof report, the folder written.
Made = tuple["BuiltIssue", "ProofReport", "Preview"]


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    preview = commands.add_parser(
        "preview", help="build the issue and write a preview to proof it before approving",
        description="Build the issue (an approved one is kept unless its content changed), "
        "write <issue folder>/preview/ (every layout at 375 and 600 px and dark, subjects "
        "and preheaders, the proof report, the ranking, screenshots where chromium is "
        "installed), serve it on 127.0.0.1 and print the approve command. Exit 3 when the "
        "proof report has a blocking problem.")
    add_week(preview, "default: the last complete week (the next one to send)")
    add_feed(preview, "a feed to read (repeatable; default: [feed] urls)")
    preview.add_argument("--port", type=port, default=0, metavar="P",
                         help="port to serve on, on 127.0.0.1 (default: any free port)")
    preview.add_argument("--no-serve", action="store_true",
                         help="write the preview and stop; serve nothing")
    preview.add_argument("--watch", action="store_true",
                         help="rebuild when the feed files, the templates or the editor's "
                         "file change (Ctrl-C stops)")
    preview.add_argument("--to", metavar="ADDRESS",
                         help="also send test copies to ADDRESS, as send --to does (once, "
                         "at the start)")
    preview.add_argument("--layouts", type=layout_list, metavar="L[,L...]",
                         help="with --to: only these layouts, e.g. zh-en,en (default all four)")
    preview.add_argument("--no-screenshots", action="store_true",
                         help="skip the PNG screenshots (faster)")
    add_correct(preview)
    preview.set_defaults(handler=_cmd_preview)


@dataclass
class _Latest:
    """The last preview made, and the error of the last rebuild if it failed (``--watch``
    goes on after a failed rebuild; the command then ends with that error)."""

    built: BuiltIssue
    report: ProofReport
    preview: Preview
    failed: NewsletterError | None = None

    def next_step(self) -> str:
        """The last line: what is left to do, with the approval as it is now (the editor
        may have approved while the preview was served)."""
        approval = read_approval(self.built.folder)
        facts = replace(self.preview.facts,
                        approved_hash=approval.content_hash if approval else None)
        return next_step(self.built, facts)


def _cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    """build → proof → preview folder → (test copies) → serve / watch → exit 3 if blocked."""
    if args.layouts and not args.to:
        raise UsageError("--layouts goes with --to (test copies)")
    # --to "" is a mistake, not "no test copy"
    to = copy_address(args.to) if args.to is not None else None
    week = choose_week(settings, args.week)
    config = ("--config", str(args.config)) if args.config else ()
    approve = command(*config, "approve", "--week", week.id)
    # One Chromium for the whole command, kept for every rebuild under --watch.
    chromium = None if args.no_screenshots else shutil.which("chromium")
    with Screenshotter(chromium) if chromium else nullcontext() as shooter:
        make = _maker(args, settings, week.id, approve, shooter)
        with future_week_said(settings, week.id):
            # When serving, the page comes first and its screenshots after (_shoot_rest).
            built, report, preview = make(not args.no_serve)
        _show_preview(built, report, preview)
        if to:
            send_copies(settings, built, to, tuple(args.layouts or LAYOUTS))
        latest = _Latest(built, report, preview)
        _serve_and_watch(args, settings, week.id, make, latest, shooter)
    print(latest.next_step(), flush=True)
    if latest.failed is not None:
        raise latest.failed
    report = latest.report
    if report.has_blocking:
        first = report.blocking[0]
        print(f"newsletter: blocked: {len(report.blocking)} blocking problem(s) in the proof "
              f"report, first: {first.code}: {first.message}", file=sys.stderr)
        return EXIT_BLOCKED
    return EXIT_OK


def _maker(args: argparse.Namespace, settings: Settings, week_id: str, approve: str,
           shooter: Screenshotter | None) -> Callable[[bool], Made]:
    """What builds, proofs and writes the preview: once, then again on every change
    (``make(True)``: only the screenshots that did not change, the rest by ``_shoot_rest``)."""
    skip = ("--no-screenshots was given" if args.no_screenshots
            else "no chromium on the PATH (install Debian's chromium to get them)")

    def make(cached_only: bool) -> Made:
        # Again on each rebuild: readers may change theirs, and a send may begin.
        choices, sent = reader_choices(settings, week_id)
        with translation(settings) as translate:
            return preview_issue(settings, week_id, args.feed, approve_command=approve,
                                 shooter=shooter, cached_only=cached_only, skip_reason=skip,
                                 shown=shown, translate=translate, github=github(settings),
                                 choices=choices, sent=sent, correct=args.correct,
                                 archive_weeks=archive_weeks(settings))

    return make


def _serve_and_watch(args: argparse.Namespace, settings: Settings, week_id: str,
                     make: Callable[[bool], Made], latest: _Latest,
                     shooter: Screenshotter | None) -> None:
    """Serve the issue folder and/or rebuild on changes until Ctrl-C."""
    if args.no_serve and not args.watch:
        return
    server: ThreadingHTTPServer | None = None
    if not args.no_serve:
        server = serve(latest.built.folder, args.port)
        print(f"serving at http://127.0.0.1:{server.server_port}/preview/index.html "
              "(Ctrl-C stops)", flush=True)
    try:
        _shoot_rest(latest, shooter)  # only served previews left any to take
        _watch(args, settings, week_id, make, latest, shooter)
    except KeyboardInterrupt:
        print("\nstopped", flush=True)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


#: How often --watch looks at the files: a save shows within this plus one rebuild.
WATCH_INTERVAL_S = 0.2


def _watch(args: argparse.Namespace, settings: Settings, week_id: str,
           make: Callable[[bool], Made], latest: _Latest, shooter: Screenshotter | None
           ) -> None:
    """Rebuild on every change: the page first, then the changed screenshots, and the page
    again. The approval is always watched, so the page stops saying "to approve" once given."""
    approval = latest.built.folder / APPROVAL_FILE
    if args.watch:
        watcher = Watcher([*watched_paths(settings, week_id, args.feed), approval])
        print(f"watching {len(watcher.state) - 1} file(s): the feed, the templates and "
              f"{shown(editorial_file(settings, week_id))} (Ctrl-C stops)", flush=True)
    else:
        watcher = Watcher([approval])
    print(latest.next_step(), flush=True)

    def rebuild(changed: list[Path]) -> None:
        print(f"changed: {', '.join(shown(p) for p in changed[:3])}"
              + (f" and {len(changed) - 3} more" if len(changed) > 3 else ""), flush=True)
        try:
            built, report, preview = make(True)
        except NewsletterError as exc:
            latest.failed = exc
            print(f"newsletter: error: {exc} (still watching)", file=sys.stderr, flush=True)
            return
        latest.built, latest.report, latest.preview = built, report, preview
        latest.failed = None
        print(f"rebuilt {built.id}: {len(built.issue.items)} items, "
              f"{len(report.blocking)} blocking, {len(report.warnings)} warning(s); "
              f"content_hash {built.content_hash}", flush=True)
        print(latest.next_step(), flush=True)
        _shoot_rest(latest, shooter)

    watch(watcher, rebuild, interval=WATCH_INTERVAL_S)


def _shoot_rest(latest: _Latest, shooter: Screenshotter | None) -> None:
    """Take the screenshots the page was written without, and write the page again."""
    if shooter is None or not latest.preview.screenshots.pending:
        return
    try:
        latest.preview = write_preview(latest.built, latest.report, latest.preview.facts,
                                       shooter=shooter)
    except NewsletterError as exc:
        print(f"newsletter: error: screenshots: {exc}", file=sys.stderr, flush=True)
        return
    shots = latest.preview.screenshots
    print(f"screenshots: {len(shots.files) - shots.reused} taken, {shots.reused} unchanged",
          flush=True)
    for note in shots.notes:
        print(f"screenshots: {note}", flush=True)


def _show_preview(built: BuiltIssue, report: ProofReport, preview: Preview) -> None:
    say_built(built.id, built.issue.items, report.problems, report.hidden)
    for size in report.sizes:
        print(f"  email-{size.layout}.html {size.weight / 1000:.1f} KB as sent "
              f"({size.percent:.0f}% of {size.budget / 1000:.0f} KB)")
    print(f"{len(report.variants)} interest variant(s)")
    for v in report.variants:
        print(f"  email-{v.key}.html {v.html.weight / 1000:.1f} KB as sent "
              f"({v.html.percent:.0f}%), {v.layout}, areas first: {', '.join(v.areas)}")
    shots = preview.screenshots
    if shots.files:
        reused = f" ({shots.reused} unchanged, reused)" if shots.reused else ""
        print(f"screenshots: {len(shots.files)} in {shown(preview.folder / 'screenshots')}/"
              f"{reused}")
    if shots.pending:
        print(f"screenshots: {shots.pending} to take once the page is served")
    for note in shots.notes:
        print(f"screenshots: {'skipped: ' if not shots.files else ''}{note}")
    print(f"preview: {shown(preview.index)}")
    print(f"content_hash: {built.content_hash}", flush=True)
