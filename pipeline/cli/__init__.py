"""The command line: parse arguments, run a stage, map errors to exit codes.

0 done · 1 unexpected failure · 2 bad usage, config or input · 3 blocked · 4 stopped,
resumable · 5 locked · 6 nothing to do. A mistake a user can make ends in one line on
stderr, never a traceback. Each command group's module registers its own commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pipeline import __version__, log
from pipeline.cli import check_mail, delivery, inbox, issue, preview, serve
from pipeline.cli import store as store_commands
from pipeline.cli import subscribers as subscriber_commands
from pipeline.cli.common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Handler
from pipeline.config import load
from pipeline.errors import NewsletterError

__all__ = ["main", "parser"]

_log = logging.getLogger("newsletter.cli")

#: Every command, in the order ``newsletter --help`` lists them.
_COMMANDS = (issue.add_build, issue.add_approve, delivery.add_send, preview.add_parser,
             issue.add_publish, delivery.add_run, serve.add_parser, inbox.add_parser,
             check_mail.add_parser, issue.add_status, issue.add_translations,
             subscriber_commands.add_parser, store_commands.add_parser)


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
    commands: argparse._SubParsersAction[Any] = top.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for add in _COMMANDS:
        add(commands)
    for command in _subcommands(top):
        _verbosity_arguments(command, default=argparse.SUPPRESS)
    return top


def _verbosity_arguments(parser: argparse.ArgumentParser, default: object) -> None:
    """``-v`` / ``-q`` before or after the command: a subcommand's default is SUPPRESS, so it
    never undoes what was given before it."""
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="also show debug detail on stderr (config file, feeds fetched, "
                        "transport, timings)")
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="show only errors, warnings and results (no notes or progress)")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield sub
                yield from _subcommands(sub)


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
