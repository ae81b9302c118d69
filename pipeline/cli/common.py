"""What the command groups share: the exit codes, the handler's shape, argument types, the
build's translator and GitHub source, the checked delivery and the test copies (``send``,
``run``, ``preview --to``), the publish (``publish``, ``run``), and how a path is shown.

Each command group (``issue``, ``delivery``, ``preview``, ``translations``, ``serve``,
``inbox``, ``check_mail``, ``subscribers``, ``store``) registers its parsers and handlers;
the package's ``__init__`` assembles them and maps the errors a handler raises to exit
codes. The groups import this module and never one another.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import week as clock
from pipeline import wiring
from pipeline.core.email.render import Footer
from pipeline.core.site.site import Site
from pipeline.errors import EmptyWeekError, NewsletterError, UsageError
from pipeline.model import LAYOUTS
from pipeline.stages.built import choose_week, issue_folder, load_built
from pipeline.stages.deliver import SendRequest
from pipeline.stages.freeze import note_publish
from pipeline.stages.lock import hold
from pipeline.stages.preflight import not_started
from pipeline.stages.publish import publish
from pipeline.stages.send import send_tests
from pipeline.wiring import archive_lease, open_archive, open_github, open_store, open_translation
from subscribers.errors import InvalidAddress
from subscribers.model import normalise_email
from subscribers.shards import Shard

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.sources import PullSource
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.machine_translation import Translate
    from pipeline.stages.preflight import Delivery
    from subscribers.store import SubscriberStore

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BLOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4

_log = logging.getLogger("newsletter.cli")

#: What ``set_defaults(handler=…)`` names for each command: it runs the command and returns
#: its exit code (errors it raises are mapped by :func:`pipeline.cli.main`).
Handler = Callable[[argparse.Namespace, "Settings"], int]


def add_week(parser: argparse.ArgumentParser, help: str = "default: the last complete week"
             ) -> None:
    """``--week YYYY-Www``, the issue every command but the list's own is about."""
    parser.add_argument("--week", metavar="YYYY-Www", help=help)


def add_correct(parser: argparse.ArgumentParser) -> None:
    """``--correct REASON``: an explicit correction of a week that already went out."""
    parser.add_argument("--correct", metavar="REASON",
                        help="correct a week that already went out: the issue is rebuilt "
                        "and its page says 'corrected on <day>' with REASON (one line); "
                        "readers not yet sent it get the corrected issue")


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return value


def layout_list(text: str) -> tuple[str, ...]:
    layouts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown or not layouts:
        raise argparse.ArgumentTypeError(f"layouts are {', '.join(LAYOUTS)}; got {text!r}")
    return tuple(dict.fromkeys(layouts))


def copy_address(text: str) -> str:
    """``--to``, checked as ``subscribers import`` checks an address (email-validator, no
    DNS) and normalised: a typo, two addresses or a line break is refused (exit 2) before
    anything is opened, not handed to the transport."""
    try:
        return normalise_email(text)
    except InvalidAddress as exc:
        raise UsageError(f"--to: {exc}") from None


def translation(settings: Settings) -> contextlib.AbstractContextManager[Translate | None]:
    """:func:`pipeline.wiring.open_translation` with this process's environment."""
    return open_translation(settings, os.environ)


def github(settings: Settings) -> PullSource | None:
    """:func:`pipeline.wiring.open_github` with this process's environment."""
    return open_github(settings, os.environ)


@contextlib.contextmanager
def future_week_said(settings: Settings, week_id: str | None) -> Iterator[None]:
    """A week that lies ahead has no reviews: say that it has not started (exit 2), not
    "nothing to do"."""
    try:
        yield
    except EmptyWeekError as exc:
        early = not_started(choose_week(settings, week_id), clock.now())
        if early is None:
            raise
        raise early from exc


def built_issue(settings: Settings, week: str | None) -> BuiltIssue:
    """The built issue of ``--week`` (default: the last complete week), hash checked."""
    week_id = choose_week(settings, week).id
    return load_built(issue_folder(settings, week_id), week_id)


def shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies inside it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def open_delivery(settings: Settings, built: BuiltIssue, request: SendRequest) -> Delivery:
    """Every check a send makes, the transport opened and probed, with this process's
    environment (see ``pipeline/stages/preflight.py``); the caller closes it."""
    return wiring.open_delivery(settings, os.environ, built, at=clock.now(),
                         test_copies=request.to is not None,
                         allow_missing_translations=request.allow_missing_translations,
                         allow_partial_week=request.allow_partial_week)


def send_copies(settings: Settings, built: BuiltIssue, to: str,
                layouts: tuple[str, ...] = LAYOUTS) -> None:
    """Test copies of ``built`` to ``to`` (outside the ledger), through every check and the
    transport a real send uses (``send --to``, ``preview --to``)."""
    with open_delivery(settings, built, SendRequest(to=to, layouts=layouts)) as delivery:
        say_development_key(delivery)
        for key, message_id in send_tests(built, delivery.messages, delivery.transport, to,
                                          layouts):
            print(f"test copy {key} → {to}: {message_id}")


def say_development_key(delivery: Delivery) -> None:
    if delivery.development:
        _log.info("note: NEWSLETTER_SECRET is not set; links are signed with the development "
                  "key (fine for the local outbox, never for real mail)")


def publish_issue(settings: Settings, built: BuiltIssue,
                  store: SubscriberStore | None = None) -> None:
    """Publish ``built`` to the archive of ``[archive]`` and say where (``publish``, and
    ``run`` once every check of its send has passed), holding the archive's lease in
    ``store`` (``run``'s own, else the deployment's, made if need be) for every write: two
    publishes at once, of two weeks or the same, would each delete as stale the search
    files the other's new index names, so the second is refused (exit 5) before it writes.
    A week that went out is published only as it went out, or as a correction, which the
    store then records (pipeline/stages/freeze.py). The archive's areas go to the catalog
    of that store."""
    if store is None:
        with open_store(settings) as own:
            publish_issue(settings, built, own)
        return
    footer = Footer.configured(settings.delivery, settings.site)
    with open_archive(settings) as archive:
        where = archive.describe()
        with hold(store, archive_lease(settings), f"publish to {where}"):
            note_publish(built, store)  # a sent week's page changes only by a correction
            report = publish(built, archive, Site(settings.site, footer=footer))
    print(f"published {built.id} to {where}: {len(report.written)} object(s) written "
          f"({report.bytes_written / 1000:.1f} KB), {report.unchanged} unchanged"
          + (f", {len(report.retired)} page(s) no issue carries removed"
             if report.retired else "")
          + (f", {report.removed} old search file(s) removed" if report.removed else ""))
    print(f"  {settings.site.base_url.rstrip('/')}/issues/{built.id}/index.html")
    if report.search_problem:
        _log.warning("the search index was not updated (the old one still answers): %s",
                     report.search_problem)
    try:
        if report.areas:
            store.note_areas(report.areas)
    except NewsletterError as exc:  # the week is published; the forms offer older areas
        _log.warning("the subscribe form's list of areas was not updated: %s", exc)
