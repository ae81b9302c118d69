"""Diagnostics on stderr through :mod:`logging`, shaped for a person and for a scheduler.

What a command produces goes to stdout, never through here: ``-q`` must not hide it. When
stderr is not a terminal each line starts with an ISO 8601 UTC timestamp: a job's log is read
days later, in another zone. Never log a secret or a token; an address only at ``debug``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

LOGGER = "newsletter"

#: What starts a line of each level. Info is plain text (the message says what it is:
#: "note: …", "progress: …"); warnings and errors name the program, as its errors do.
_PREFIX = {logging.DEBUG: "debug: ", logging.INFO: "", logging.WARNING: "newsletter: warning: ",
           logging.ERROR: "newsletter: error: ", logging.CRITICAL: "newsletter: error: "}


def level(verbose: bool, quiet: bool) -> int:
    """The logging level of ``-v`` / ``-q`` (neither: notes and progress, no detail)."""
    return logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO


class LineFormatter(logging.Formatter):
    """One line per record, even for a message with a line break (a hostile feed's title),
    so a log stays one record per line for whoever greps it."""

    def __init__(self, timestamps: bool) -> None:
        super().__init__()
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().splitlines())
        line = _PREFIX.get(record.levelno, f"{record.levelname.lower()}: ") + text
        if not self.timestamps:
            return line
        moment = datetime.fromtimestamp(record.created, UTC)  # ISO 8601, UTC, milliseconds
        return f"{moment.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} {line}"


@contextlib.contextmanager
def to_stderr(threshold: int) -> Iterator[None]:
    """Show the ``newsletter`` logger's records of ``threshold`` and above on stderr for the
    block, and leave no handler behind (a command run in-process: tests, ``python -c``)."""
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(timestamps=not _is_terminal(sys.stderr)))
    before = logger.level
    logger.setLevel(threshold)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False


def safe_url(url: str) -> str:
    """``url`` fit for a log: without a user and password, a query or a fragment (where a
    feed's or a service's token lives)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?…" if parts.query else "")


@contextlib.contextmanager
def timed(logger: logging.Logger, stage: str) -> Iterator[None]:
    """Log at debug how long ``stage`` took (``-v``: where a slow run spends its time)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        logger.debug("%s took %.2f s", stage, time.perf_counter() - started)
