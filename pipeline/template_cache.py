"""Compiled templates kept between commands, in the user's cache folder.

Each ``newsletter`` command is a new process, and a new process compiles every template it
renders: about 0.1 s of a 0.35 s ``build``. Jinja can keep the compiled code
(``pipeline.core.email.render``'s bytecode cache, checked against each template's source, in
the store ``pipeline.core.email.code_store`` names); this module is where it lives between
processes: ``$XDG_CACHE_HOME/vllm-pr-weekly/templates/`` (``~/.cache/…`` without it), one file
a template, named by Jinja's key for it (a digest of the template's name and path, so two
checkouts never share one).

Loading a compiled template runs its code, so the folder must be the user's alone: it is made
0700, and a folder owned by someone else or writable by others is not used at all. Nothing
here ever fails a command: a full disk, a read-only home or a torn file only means the
template is compiled again, as it would be without a cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

_log = logging.getLogger("newsletter.templates")

#: Jinja's bucket keys are SHA-1 hex digests: anything else names no file of ours.
_KEY = re.compile(r"[0-9a-f]{40}")
FOLDER = Path("vllm-pr-weekly", "templates")


class DiskCodeStore:
    """A :class:`pipeline.core.email.code_store.CodeStore` in one private folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def for_user(cls, env: Mapping[str, str]) -> DiskCodeStore | None:
        """The store in the user's cache folder, made if need be; None when there is no
        usable one (no home, a folder others may write, a read-only disk)."""
        base = env.get("XDG_CACHE_HOME") or (
            str(Path(env["HOME"], ".cache")) if env.get("HOME") else "")
        if not base or not Path(base).is_absolute():  # the XDG rule: a relative one is ignored
            return None
        folder = Path(base) / FOLDER
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = folder.stat()
        except OSError as exc:
            _log.debug("no template cache in %s: %s", folder, exc.strerror or exc)
            return None
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            _log.debug("no template cache in %s: not the user's own folder", folder)
            return None
        return cls(folder)

    def load(self, key: str) -> bytes | None:
        if not _KEY.fullmatch(key):
            return None
        try:
            return (self.folder / key).read_bytes()
        except OSError:
            return None

    def save(self, key: str, code: bytes) -> None:
        if not _KEY.fullmatch(key):
            return
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(code)
            os.replace(tmp, self.folder / key)
        except OSError as exc:
            _log.debug("template %s not cached: %s", key[:8], exc.strerror or exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
