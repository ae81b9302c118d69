"""``newsletter serve``: the subscription app (:mod:`pipeline.web`) of ``[site] app_url``."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from pipeline.cli.common import port
from pipeline.web.serve import default_port, serve

if TYPE_CHECKING:
    from pipeline.config import Settings

__all__ = ["add_parser"]


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    serve = commands.add_parser(
        "serve", help="run the subscription app (subscribe, confirm, unsubscribe, "
        "preferences, SES webhook)",
        description="Serve the subscription app of [site] app_url: the subscribe form, "
        "double opt-in confirmation, one-click unsubscribe (RFC 8058), preferences, and "
        "POST /webhooks/ses for SES bounces and complaints through Amazon SNS.")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=port, metavar="P",
                       help="port (default: the port of [site] app_url, else 8001); with a "
                       "loopback app_url the links in its mails name this port")
    serve.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    return serve(settings, os.environ, host=args.host,
                 port=args.port if args.port is not None else default_port(settings))
