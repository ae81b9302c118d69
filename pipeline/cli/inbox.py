"""``newsletter inbox process``: the mail people send to the newsletter."""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING, Any

from pipeline import week as clock
from pipeline.cli.common import add_group, say_development_key
from pipeline.core.mail_in.inbound import classify, mask_address
from pipeline.stages.inbox import process
from pipeline.wiring import open_inbox, open_subscriptions, signing_keys

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.inbox import Inbox

__all__ = ["add_parser"]

_log = logging.getLogger("newsletter.inbox")

_PROCESS_HELP = """\
Read the raw mails waiting in the inbox ([inbox] source: the folder [inbox] dir, or the S3
prefix an SES receipt rule writes to). A mail to the unsubscribe address of an issue
(<local>+<token>@domain) unsubscribes its subscriber; a mail whose subject or first line is
"subscribe" or "订阅", optionally followed by a layout (zh-en, en-zh, zh, en, 中文, 英文,
english, 双语, bilingual), mails its sender a confirmation link (double opt-in). A delivery
status notification (a bounce, RFC 3464) returning one of our messages marks its subscriber
bounced (the mailbox is gone) or counts a transient bounce; only the signed token in the
returned message says whose mail it was. Mail that SES marked as spam or virus, or that
failed SPF/DKIM/DMARC, is ignored (unsubscribes and bounces prove themselves by their
token). Each mail is handled once, then moved to processed/ or ignored/. Exit 0, also when
no mail is waiting; a mail whose confirmation could not be sent stays for the next run."""


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    actions = add_group(
        commands, "inbox",
        help="handle mail sent to the newsletter (unsubscribe, subscribe, bounces)",
        description="Handle the mail people send to the newsletter's addresses.")
    process = actions.add_parser(
        "process", description=_PROCESS_HELP,
        help="unsubscribe and subscribe by mail, apply bounces, then move each mail aside")
    process.add_argument("--dry-run", action="store_true",
                         help="print what each waiting mail asks for (addresses masked); "
                         "act on nothing, move nothing")
    process.set_defaults(handler=_cmd_process)


def _cmd_process(args: argparse.Namespace, settings: Settings) -> int:
    with open_inbox(settings) as inbox:
        if args.dry_run:
            return _dry_run(inbox)
        with open_subscriptions(settings, os.environ) as subscriptions:
            report = process(inbox, subscriptions, clock.now())
        print(report.summary())
        if report.counts.get("retry-later"):
            _log.info("note: %d mail(s) stay in the inbox: their confirmation mail could not "
                      "be sent; the next run tries again", report.counts["retry-later"])
        if report.counts.get("subscribe") and signing_keys(os.environ)[1]:
            say_development_key("confirmation links")
        return 0


def _dry_run(inbox: Inbox) -> int:
    seen = 0
    for mail in inbox.pending():
        seen += 1
        verdict = classify(mail.raw)
        sender = f" {mask_address(verdict.sender)}" if verdict.sender else ""
        layout = f" layout={verdict.layout}" if verdict.layout else ""
        print(f"{mail.key}: {verdict.action} ({verdict.reason}){sender}{layout}")
    waiting = (f"{seen} mail{'s' if seen != 1 else ''} waiting (dry run: nothing done, nothing "
               "moved)" if seen else "no mail waiting")
    print(f"inbox {inbox.describe()}: {waiting}")
    return 0
