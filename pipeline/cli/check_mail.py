"""``newsletter check-mail FILE.eml``: is a delivered message fit for one-click unsubscribe?

It needs no store, no transport and no secret, only the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import EXIT_BLOCKED, EXIT_OK
from pipeline.core.mail_in.mail_check import check_mail
from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pipeline.config import Settings

__all__ = ["add_parser"]

_HELP = """\
Read a message as it was delivered (save it from the mail client as .eml, or "show
original") and check what mailbox providers need for one-click unsubscribe (RFC 8058):
List-Unsubscribe with an https URL (and a mailto:, optional), List-Unsubscribe-Post:
List-Unsubscribe=One-Click, and a DKIM-Signature whose d= is the From domain or a parent of
it and whose h= covers List-Unsubscribe and List-Unsubscribe-Post (oversigned: advised).
Only the signature's tags are read: no DNS lookup, no signature verified. Exit 0 fit to
send, 3 a required check failed, 2 the file cannot be read or is not a mail."""

#: Read at most this much: a delivered newsletter is well under it.
_MAX_BYTES = 20_000_000


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    check = commands.add_parser(
        "check-mail", help="check a delivered message's List-Unsubscribe and DKIM coverage",
        description=_HELP)
    check.add_argument("file", metavar="FILE.eml",
                       help="the delivered message (raw, with its headers); - for stdin")
    check.set_defaults(handler=_cmd_check_mail)


def _cmd_check_mail(args: argparse.Namespace, settings: Settings) -> int:
    name = "stdin" if args.file == "-" else args.file
    raw = _read(args.file)
    if len(raw) > _MAX_BYTES:
        raise UsageError(f"check-mail {name}: larger than {_MAX_BYTES // 1_000_000} MB; not "
                         "a newsletter")
    try:
        result = check_mail(raw)
    except UsageError as exc:
        raise UsageError(f"check-mail {name}: {exc}") from exc
    for line in result.lines():
        print(line)
    return EXIT_OK if result.fit else EXIT_BLOCKED


def _read(file: str) -> bytes:
    if file == "-":
        return sys.stdin.buffer.read(_MAX_BYTES + 1)
    try:
        with Path(file).open("rb") as handle:
            return handle.read(_MAX_BYTES + 1)
    except IsADirectoryError:
        raise UsageError(f"check-mail {file}: is a folder, not a mail file") from None
    except OSError as exc:
        raise UsageError(f"check-mail {file}: cannot read it: {exc.strerror or exc}") from None
