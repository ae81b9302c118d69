"""``newsletter subscribers add | import | export | list | remove``: the operator's hands on
the list.

Nothing here reactivates an address that unsubscribed, bounced or complained, or brings back
one that was removed: consent is the subscriber's to give, not the operator's.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import week as clock
from pipeline.cli.common import add_group
from pipeline.errors import UsageError
from pipeline.wiring import open_store
from subscribers.areas import MAX_AREA_LENGTH, MAX_AREAS, clean_area
from subscribers.errors import InvalidAddress, RefusedAddress, StoreError, UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    LAYOUTS,
    STATUSES,
    AddOutcome,
    AddResult,
    NewSubscriber,
    normalise_email,
)
from subscribers.store import Imports

if TYPE_CHECKING:
    from _csv import Reader as CsvReader

    from pipeline.config import Settings

__all__ = ["AREA_SEPARATOR", "EXPORT_COLUMNS", "IMPORT_BATCH", "add_parser", "parse_areas"]

#: The columns of ``subscribers export``; ``email``, ``layout`` and ``areas`` make it
#: importable again. The consent record is part of the export: when, where from (``web``,
#: ``mail``, ``cli``, ``import:<file>``) and the client address of a confirmation made in the app.
EXPORT_COLUMNS = ("email", "layout", "status", "created_at", "confirmed_at", "consent_source",
                  "consent_at", "consent_ip", "areas")

#: How the ``areas`` column of a CSV file separates names (a comma is the CSV's own).
AREA_SEPARATOR = ";"

_IMPORT_HELP = """\
Add the addresses of a CSV file. The first line is a header naming the columns: `email`
(required), `layout` (optional: zh-en, en-zh, zh or en; blank means zh-en) and `areas`
(optional: the areas a new subscriber follows, separated by `;`, e.g. rocm;kv-connector;
folded to lower case); other columns are ignored. An address already present keeps its
layout and areas (their own choice in the preferences page wins). Each bad row is reported
on stderr as FILE:LINE: reason and skipped, and the rest are imported (exit 0). Importing
the same file again changes nothing. An address that unsubscribed, bounced, complained or
was removed is never brought back. Exit 2 if the file cannot be read or has no `email`
column."""


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    actions = add_group(
        commands, "subscribers", help="add, import, export, list and remove subscribers",
        description="Manage the subscriber list (the store of [store] backend: "
        "<data_dir>/subscribers.sqlite3 by default).")

    add = actions.add_parser(
        "add", help="add one address",
        description="Add one address, as pending (a confirmation is due) or, with "
        "--confirmed, as active. An address already present is left as it is (a pending one "
        "becomes active with --confirmed); one that unsubscribed, bounced, complained or was "
        "removed is refused (exit 2).")
    add.add_argument("email", metavar="EMAIL")
    add.add_argument("--layout", choices=LAYOUTS, default=DEFAULT_LAYOUT,
                     help=f"languages and their order (default: {DEFAULT_LAYOUT})")
    add.add_argument("--areas", default="", metavar="A,B",
                     help="areas they follow, comma-separated (e.g. rocm,kv-connector): "
                     "their email puts these first")
    add.add_argument("--confirmed", action="store_true",
                     help="they already agreed to receive it: make them active now")
    add.set_defaults(handler=_cmd_add)

    imp = actions.add_parser("import", help="add the addresses of a CSV file (email,layout)",
                             description=_IMPORT_HELP)
    imp.add_argument("file", type=Path, metavar="FILE.csv")
    imp.add_argument("--confirmed", action="store_true",
                     help="they already agreed: new addresses (and pending ones) become active")
    imp.set_defaults(handler=_cmd_import)

    export = actions.add_parser(
        "export", help="write every subscriber as CSV to stdout",
        description=f"Write every subscriber as CSV to stdout ({','.join(EXPORT_COLUMNS)}); "
        "times are UTC. The file can be imported again.")
    export.set_defaults(handler=_cmd_export)

    lst = actions.add_parser("list", help="one line per subscriber: email status layout [areas]")
    lst.add_argument("--status", choices=STATUSES, help="only subscribers with this status")
    lst.set_defaults(handler=_cmd_list)

    remove = actions.add_parser(
        "remove", help="erase a subscriber (a hashed suppression entry remains)",
        description="Erase a subscriber's personal data. Only a hash of the address is "
        "kept, so no import can add it again. Exit 2 if the address is not on the list.")
    remove.add_argument("email", metavar="EMAIL")
    remove.set_defaults(handler=_cmd_remove)


def _cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    areas = parse_areas(args.areas, ",")
    if isinstance(areas, str):
        raise UsageError(f"--areas: {areas}")

    with open_store(settings) as store:
        result = store.add(args.email, args.layout, source="cli", now=clock.now(), areas=areas,
                           status="active" if args.confirmed else "pending")
    sub = result.subscriber
    if result.outcome is AddOutcome.SUPPRESSED or sub is None:
        raise RefusedAddress(normalise_email(args.email),
                             "was removed earlier and stays suppressed; it cannot be re-added")
    if result.outcome is AddOutcome.REFUSED:
        raise RefusedAddress(sub.email, f"is {sub.status}; only the subscriber can subscribe "
                             "again (through the subscription page)")
    if result.outcome is AddOutcome.CREATED:
        note = "" if sub.status == "active" else " (a confirmation is due; --confirmed if " \
            "they already agreed)"
        follows = f", following {', '.join(sub.areas)}" if sub.areas else ""
        print(f"added {sub.email} ({sub.status}, {sub.layout}{follows}){note}")
    elif result.outcome is AddOutcome.ACTIVATED:
        print(f"confirmed {sub.email}: pending → active ({sub.layout})")
    else:
        print(f"{sub.email} is already present ({sub.status}, {sub.layout}); nothing changed")
    return 0


#: Rows per write: each batch is one store call (one SQLite transaction), and what the
#: summary and stderr report is what the committed batches did.
IMPORT_BATCH = 1000

#: A CSV row: its line, and the subscriber it asks for or what is wrong with it.
Row = tuple[int, NewSubscriber | str]


def _cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    path: Path = args.file
    rows = _read_csv(path)
    status = "active" if args.confirmed else "pending"
    outcomes: Counter[str] = Counter()  # each AddOutcome, and "error" for a bad row

    def import_batch(store: Imports, batch: Sequence[Row]) -> None:
        """Add a batch's good rows in one store call, then count and report the batch (its
        problems on stderr as FILE:LINE, in line order): an interruption reports nothing
        the store did not take."""
        wanted = [(line, entry) for line, entry in batch if isinstance(entry, NewSubscriber)]
        problems = [(line, entry) for line, entry in batch if isinstance(entry, str)]
        results = store.add_many([entry for _, entry in wanted], status=status,
                                 source=f"import:{path.name}", now=clock.now()) if wanted else []
        outcomes["error"] += len(problems)
        for (line, entry), result in zip(wanted, results, strict=True):
            outcomes[result.outcome] += 1
            if refusal := _refusal(result, entry.email):
                problems.append((line, refusal))
        for line, problem in sorted(problems):
            print(f"{path}:{line}: {problem}", file=sys.stderr)

    with open_store(settings) as store:
        done = 1  # the last line whose batch is stored (1: the header)
        try:
            while batch := list(itertools.islice(rows, IMPORT_BATCH)):
                import_batch(store, batch)
                done = batch[-1][0]
        except (KeyboardInterrupt, StoreError):
            after = ("none after it" if store.atomic_batches else "of the rows after it, "
                     "some of the next batch's may be stored, uncounted")
            print(f"{_summary(outcomes)}; stopped after line {done}: the rows up to it are "
                  f"imported as counted, {after} (importing the file again is safe)")
            raise
    print(_summary(outcomes))
    if activated := outcomes[AddOutcome.ACTIVATED]:
        print(f"confirmed {activated} pending subscriber(s) (--confirmed)")
    return 0


def _summary(outcomes: Counter[str]) -> str:
    present = outcomes[AddOutcome.EXISTING] + outcomes[AddOutcome.ACTIVATED]
    refused = outcomes[AddOutcome.SUPPRESSED] + outcomes[AddOutcome.REFUSED]
    return (f"imported {outcomes[AddOutcome.CREATED]} new, {present} already present, "
            f"{refused} refused (unsubscribed/bounced/complained/suppressed), "
            f"{outcomes['error']} errors")


def _refusal(result: AddResult, email: str) -> str | None:
    """The stderr line for a row the store refused."""
    if result.outcome is AddOutcome.SUPPRESSED:
        return f"refused: {email} was removed earlier (suppressed)"
    if result.outcome is AddOutcome.REFUSED:
        state = result.subscriber.status if result.subscriber else "refused"
        return f"refused: {email} is {state}; import never reactivates"
    return None


def _check_row(fields: dict[str, str]) -> NewSubscriber | str:
    """A row as the store takes it (its address as written), or what is wrong with it."""
    email = fields["email"]
    layout = fields["layout"].lower() or DEFAULT_LAYOUT
    if not email:
        return "no email address"
    if layout not in LAYOUTS:
        return f"unknown layout {fields['layout']!r} (expected {', '.join(LAYOUTS)})"
    areas = parse_areas(fields["areas"], AREA_SEPARATOR)
    if isinstance(areas, str):
        return f"areas: {areas}"
    try:
        normalise_email(email)  # the store checks it again, from email-validator's cache
    except InvalidAddress as exc:
        return f"invalid address {email!r}: {exc.reason}"
    return NewSubscriber(email, layout, areas)


def parse_areas(text: str, separator: str) -> tuple[str, ...] | str:
    """The areas of a CLI option or CSV cell, cleaned as a reader's choice is, or what is
    wrong with them: refused rather than silently trimmed, as the operator meant them."""
    kept: set[str] = set()
    for name in filter(str.strip, text.split(separator)):  # blank names are no names
        cleaned = clean_area(name)
        if cleaned is None:
            return (f"{name.strip()[:MAX_AREA_LENGTH]!r} is not an area name (at most "
                    f"{MAX_AREA_LENGTH} printable characters)")
        kept.add(cleaned)
    if len(kept) > MAX_AREAS:
        return f"{len(kept)} areas; a subscriber follows at most {MAX_AREAS}"
    return tuple(sorted(kept))


def _read_csv(path: Path) -> Iterator[Row]:
    """The data rows, checked, blank lines skipped. The file and its header are checked before this
    returns, so a bad file is refused before the store is touched, never half-imported."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 text; nothing was imported") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise UsageError(f"{path}:1: unreadable header: {exc}") from None
    if header is None:
        raise UsageError(f"{path}: empty file; expected a header line: email,layout")
    names = [name.strip().lower() for name in header]
    if "email" not in names:
        raise UsageError(f"{path}:1: no 'email' column in the header (found: "
                         f"{', '.join(names) or 'nothing'}); expected: email,layout")
    return _rows(reader, {name: names.index(name) if name in names else None
                          for name in ("email", "layout", "areas")})


def _rows(reader: CsvReader, columns: dict[str, int | None]) -> Iterator[Row]:
    start = 2  # the line the next record starts on (1: the header)
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, f"unreadable CSV row: {exc}"
        else:
            if any(cell.strip() for cell in record):
                yield start, _check_row({name: _cell(record, at) for name, at in columns.items()})
        start = reader.line_num + 1


def _cell(record: list[str], index: int | None) -> str:
    return record[index].strip() if index is not None and index < len(record) else ""


def _cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)

    with open_store(settings) as store:
        for sub in store.iter_subscribers():
            writer.writerow((
                sub.email, sub.layout, sub.status, clock.iso_z(sub.created_at),
                clock.iso_z(sub.confirmed_at) if sub.confirmed_at else "", sub.consent_source,
                clock.iso_z(sub.consent_at) if sub.consent_at else "", sub.consent_ip or "",
                AREA_SEPARATOR.join(sub.areas),
            ))
    return 0


def _cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    with open_store(settings) as store:
        for sub in store.iter_subscribers(args.status):
            areas = f" {','.join(sub.areas)}" if sub.areas else ""
            print(f"{sub.email} {sub.status} {sub.layout}{areas}")
    return 0


def _cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    address = normalise_email(args.email)

    with open_store(settings) as store:
        if store.remove(address, clock.now()):
            print(f"removed {address}: personal data erased; a hash of the address is kept "
                  "so it cannot be added again")
            return 0
        if store.is_suppressed(address):
            print(f"{address} was already removed; nothing left to erase")
            return 0
    raise UnknownSubscriber(address)
