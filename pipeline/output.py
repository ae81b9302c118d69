"""Write a file, or a folder of artifacts, all at once or not at all.

Each is written under a temporary name beside its target and renamed into place, so a crash
or a full disk leaves the old version or the new one, never half of each, and no leftovers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from pipeline.errors import OutputError


def write_file(path: Path, data: bytes, *, prefix: str = ".tmp-", suffix: str = "") -> None:
    """``data`` into ``path`` whole, readable by all (mkstemp makes 0600). An ``OSError``
    propagates, for the caller to say what it was writing."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_folder(target: Path, files: Mapping[str, bytes], drop: Collection[str] = ()) -> None:
    """Replace ``files`` (name → bytes) in ``target`` all at once; what else it holds (an
    outbox, a send report) is carried over, except the names in ``drop``."""
    for name in files:
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise OutputError(f"refusing to write {name!r}: not a plain file name")
    with staged_folder(target, carry=True, drop=drop) as staging:
        for name, data in sorted(files.items()):
            with open(staging / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())


@contextlib.contextmanager
def staged_folder(target: Path, *, carry: bool = False, drop: Collection[str] = ()
                  ) -> Iterator[Path]:
    """A folder beside ``target`` to fill; a block that ends without an error replaces
    ``target`` with it in one rename. With ``carry``, entries of the old ``target`` that the
    new one lacks are moved across (except those in ``drop``)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise OutputError(f"cannot write under {target.parent}: {exc.strerror or exc}") from exc
    try:
        staging.chmod(0o755)  # mkdtemp's 0700 would survive the rename
        yield staging
        _swap(staging, target, drop if carry else None)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise


def _swap(staging: Path, target: Path, drop: Collection[str] | None) -> None:
    """Rename ``staging`` onto ``target``, moving an old ``target`` aside first; ``drop``
    None carries nothing over."""
    if not target.exists():
        staging.rename(target)
        return
    if not target.is_dir():
        raise OutputError(f"{target} exists and is not a folder")
    carried = [] if drop is None else [
        entry.name for entry in target.iterdir()
        if entry.name not in drop and not (staging / entry.name).exists()]
    moved: list[str] = []
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    old.rmdir()
    try:
        for name in carried:
            (target / name).rename(staging / name)
            moved.append(name)
        target.rename(old)
        try:
            staging.rename(target)
        except OSError:
            old.rename(target)
            raise
    except OSError:
        for name in moved:
            (staging / name).rename(target / name)
        raise
    shutil.rmtree(old, ignore_errors=True)
