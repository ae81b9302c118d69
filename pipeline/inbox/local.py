"""The ``local`` inbox: raw mails as files in a folder (``[inbox] dir``), where a hand-dropped
``.eml`` goes too."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from pipeline.inbox import InboundMail, Inbox, InboxError, Outcome, check_move, is_mail_name

__all__ = ["LocalInbox"]


class LocalInbox(Inbox):
    """Raw mails as files in ``folder`` (not its sub-folders); a missing folder is an empty
    inbox. Moving aside is an ``os.replace``, atomic within the folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def describe(self) -> str:
        return str(self.folder)

    def pending(self) -> Iterator[InboundMail]:
        for name in self._waiting():
            try:
                raw = (self.folder / name).read_bytes()
            except FileNotFoundError:  # moved aside by another run meanwhile
                continue
            except OSError as exc:
                raise InboxError(self.describe(),
                                 f"cannot read {name}: {exc.strerror or exc}") from exc
            yield InboundMail(name, raw)

    def _waiting(self) -> list[str]:
        """The mail files' names, oldest (modification time) first."""
        found: list[tuple[int, str]] = []
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    with contextlib.suppress(FileNotFoundError):  # moved aside meanwhile
                        if is_mail_name(entry.name) and entry.is_file(follow_symlinks=False):
                            found.append((entry.stat(follow_symlinks=False).st_mtime_ns,
                                          entry.name))
        except FileNotFoundError:
            return []  # no folder yet: nothing has arrived
        except OSError as exc:
            raise InboxError(self.describe(),
                             f"cannot list the folder: {exc.strerror or exc}") from exc
        return [name for _, name in sorted(found)]

    def move_aside(self, key: str, outcome: Outcome) -> None:
        check_move(key, outcome)
        target = self.folder / outcome
        try:
            target.mkdir(exist_ok=True)
            os.replace(self.folder / key, target / key)
        except FileNotFoundError:
            if (self.folder / key).exists():
                raise InboxError(self.describe(), f"cannot move {key} to {outcome}/") from None
            # already moved aside (by another run): nothing left to do
        except OSError as exc:
            raise InboxError(self.describe(), f"cannot move {key} to {outcome}/: "
                             f"{exc.strerror or exc}") from exc

    def close(self) -> None:
        pass
