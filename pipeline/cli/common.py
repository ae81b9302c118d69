"""What the command groups share: exit codes, argument types, the checked delivery, test
copies and the publish. The groups import this module and never one another.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    from pipeline.model import Item, Problem
    from pipeline.sources import PullSource
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.machine_translation import Translate
    from pipeline.stages.preflight import Delivery
    from subscribers.store import SubscriberStore

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BLOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4

_log = logging.getLogger("newsletter.cli")

#: What ``set_defaults(handler=…)`` names: it returns the exit code, and raises what
#: :func:`pipeline.cli.main` maps to one.
Handler = Callable[[argparse.Namespace, "Settings"], int]


def add_group(commands: argparse._SubParsersAction[Any], name: str, *, help: str,
              description: str) -> argparse._SubParsersAction[Any]:
    """A command whose actions are commands of their own (``subscribers add``)."""
    group = commands.add_parser(name, help=help, description=description)
    actions: argparse._SubParsersAction[Any] = group.add_subparsers(
        dest=f"{name}_command", metavar="ACTION")
    actions.required = True
    return actions


def add_week(parser: argparse.ArgumentParser, help: str = "default: the last complete week"
             ) -> None:
    parser.add_argument("--week", metavar="YYYY-Www", help=help)


def add_feed(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    parser.add_argument("--feed", action="append", default=[], metavar="PATH_OR_URL", help=help)


def add_correct(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--correct", metavar="REASON",
                        help="correct a week that already went out: the issue is rebuilt "
                        "and its page says 'corrected on <day>' with REASON (one line); "
                        "readers not yet sent it get the corrected issue")


def _whole(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive(text: str) -> int:
    value = _whole(text, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(text: str) -> int:
    value = _whole(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 0 and 65535")
    return value


def layout_list(text: str) -> tuple[str, ...]:
    layouts = [part.strip() for part in text.split(",") if part.strip()]
    if not layouts or not set(layouts) <= set(LAYOUTS):
        raise argparse.ArgumentTypeError(f"layouts are {', '.join(LAYOUTS)}; got {text!r}")
    return tuple(dict.fromkeys(layouts))


def copy_address(text: str) -> str:
    """``--to``, checked and normalised as ``subscribers import`` does, before anything is
    opened: a typo, two addresses or a line break is a usage error."""
    try:
        return normalise_email(text)
    except InvalidAddress as exc:
        raise UsageError(f"--to: {exc}") from None


def translation(settings: Settings) -> contextlib.AbstractContextManager[Translate | None]:
    return open_translation(settings, os.environ)


def github(settings: Settings) -> PullSource | None:
    return open_github(settings, os.environ)


@contextlib.contextmanager
def future_week_said(settings: Settings, week_id: str | None) -> Iterator[None]:
    """A week that lies ahead has no reviews: say it has not started, not "nothing to do"."""
    try:
        yield
    except EmptyWeekError as exc:
        early = not_started(choose_week(settings, week_id), clock.now())
        if early is None:
            raise
        raise early from exc


def built_issue(settings: Settings, week: str | None) -> BuiltIssue:
    week_id = choose_week(settings, week).id
    return load_built(issue_folder(settings, week_id), week_id)


def shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies inside it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def say_built(issue_id: str, items: Sequence[Item], problems: Sequence[Problem],
              hidden: Sequence[int]) -> None:
    """What build and preview say first: the items by tier, then every problem."""
    tiers = Counter(item.tier for item in items)
    blocking = sum(1 for problem in problems if problem.severity == "blocking")
    print(f"built {issue_id}: {len(items)} items "
          f"({', '.join(f'{n} {tier}' for tier, n in tiers.items())}); "
          f"{blocking} blocking problem(s), {len(problems) - blocking} warning(s)")
    for problem in problems:
        print(f"  {problem.severity}: {problem.code}: {problem.message}")
    if hidden:
        print(f"  hidden by the editor's file: {', '.join(f'#{pr}' for pr in hidden)}")


def open_delivery(settings: Settings, built: BuiltIssue, request: SendRequest) -> Delivery:
    """Every check a send makes (pipeline/stages/preflight.py); the caller closes it."""
    return wiring.open_delivery(settings, os.environ, built, request, at=clock.now())


def send_copies(settings: Settings, built: BuiltIssue, to: str, layouts: tuple[str, ...]) -> None:
    """Test copies, outside the ledger, through every check and transport a real send uses."""
    with open_delivery(settings, built, SendRequest(to=to, layouts=layouts)) as delivery:
        if delivery.development:
            say_development_key()
        for key, message_id in send_tests(built, delivery.messages, delivery.transport, to,
                                          layouts):
            print(f"test copy {key} → {to}: {message_id}")


def say_development_key(links: str = "links") -> None:
    _log.info("note: NEWSLETTER_SECRET is not set; %s are signed with the development key "
              "(fine for the local outbox, never for real mail)", links)


def publish_issue(settings: Settings, built: BuiltIssue,
                  store: SubscriberStore | None = None) -> None:
    """Publish ``built`` and say where, holding the archive's lease in ``store``: two
    publishes at once would each delete as stale the search files the other's index names,
    so the second is refused (exit 5) before it writes."""
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
