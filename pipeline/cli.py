"""The command line: parse arguments, run a stage, map errors to DESIGN.md's exit codes.

0 done · 1 unexpected failure · 2 bad usage, config or input · 3 blocked · 4 stopped,
resumable · 5 locked · 6 nothing to do. A mistake a user can make ends in one line on
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import __version__
from .config import load
from .errors import NewsletterError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 4


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
    build.set_defaults(handler=_cmd_build)
    return top


def _cmd_build(args: argparse.Namespace, settings) -> int:
    from .build import build

    built = build(settings, week_id=args.week, feeds=args.feed, out=args.out)
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


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = load(args.config, os.environ)
        return args.handler(args, settings)
    except NewsletterError as exc:
        print(f"newsletter: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("newsletter: interrupted; run the command again to finish", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, not a user mistake: say so in one line
        if args.traceback:
            traceback.print_exc()
        print(f"newsletter: internal error: {type(exc).__name__}: {exc} "
              "(run with --traceback for details)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
