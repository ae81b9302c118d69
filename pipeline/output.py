"""Write a folder of artifacts all at once, or not at all.

The files are written into a temporary sibling folder, which is then renamed into place; a
crash or an error leaves either the old folder or the new one, never half of each. A folder
made by ``mkdtemp`` is private (0700) and keeps that mode through the rename, so it is opened
up to the usual 0755 first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path

from .errors import OutputError


def write_folder(target: Path, files: Mapping[str, bytes], drop: Collection[str] = ()) -> None:
    """Replace the files ``files`` (name → bytes) in ``target`` all at once.

    Anything else already in ``target`` (what later stages put there: an outbox, a send
    report) is carried over into the new folder untouched, except the names in ``drop``.
    """
    for name in files:
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise OutputError(f"refusing to write {name!r}: not a plain file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise OutputError(f"cannot write under {target.parent}: {exc.strerror or exc}") from exc
    try:
        staging.chmod(0o755)
        for name, data in sorted(files.items()):
            with open(staging / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        _swap(staging, target, drop)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, target: Path, drop: Collection[str]) -> None:
    """Rename ``staging`` onto ``target``, moving an old ``target`` aside first."""
    if not target.exists():
        staging.rename(target)
        return
    if not target.is_dir():
        raise OutputError(f"{target} exists and is not a folder")
    carried = [entry.name for entry in target.iterdir()
               if entry.name not in drop and not (staging / entry.name).exists()]
    moved: list[str] = []
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    old.rmdir()
    try:
        for name in carried:
            (target / name).rename(staging / name)
            moved.append(name)
        target.rename(old)
    except OSError:
        for name in moved:
            (staging / name).rename(target / name)
        raise
    try:
        staging.rename(target)
    except OSError:
        old.rename(target)
        for name in moved:
            (staging / name).rename(target / name)
        raise
    shutil.rmtree(old, ignore_errors=True)
