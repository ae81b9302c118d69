"""The ``outbox`` transport: each message as a ``.eml`` file in a folder, the embedded default
and the proof of what a real send would hand over."""

from __future__ import annotations

import errno
import re
import tempfile
from pathlib import Path

from pipeline.errors import SendingStopped
from pipeline.output import write_file
from pipeline.transport import Outgoing, Transport

__all__ = ["OutboxTransport"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


class OutboxTransport(Transport):
    """Writes each message to ``<folder>/<key>.eml`` through a temporary name, so a crash
    never leaves half a message. Nothing that goes wrong here is about the recipient (a
    full disk, a read-only mount), so any ``OSError`` is :class:`SendingStopped`: a re-run
    once the disk has room sends the rest.
    """

    name = "outbox"
    reaches_mailboxes = False

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def send(self, message: Outgoing) -> str:
        name = _UNSAFE.sub("_", message.key.replace("/", "--")) + ".eml"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_file(self.folder / name, message.raw, suffix=".eml")
        except OSError as exc:
            raise SendingStopped(f"outbox {self.folder}: cannot write {name}: "
                                 f"{_why(exc)}", recipient=message.recipient) from exc
        return f"outbox:{name}"

    def probe(self) -> None:
        """A temporary file is made in the folder and removed: a read-only or full disk
        stops the run before anything is published."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.folder, prefix=".tmp-", suffix=".eml"):
                pass
        except OSError as exc:
            raise SendingStopped(f"outbox {self.folder}: cannot write there: "
                                 f"{_why(exc)}") from exc

    def describe(self) -> str:
        return f"outbox {self.folder}"

    def location(self, message_id: str) -> str:
        """The ``.eml`` file of a message written here (its id is ``outbox:<file name>``)."""
        return str(self.folder / message_id.removeprefix("outbox:"))

    def close(self) -> None:
        """Nothing to release: each message opens and closes its own file."""


def _why(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: the words, and the name to search for."""
    code = errno.errorcode.get(exc.errno or 0)
    words = exc.strerror or str(exc)
    return f"{words} ({code})" if code else words
