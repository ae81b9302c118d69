"""The ``local`` archive: the public web archive as a folder (``[archive] dir``), what
``make site`` serves. Each write goes to a temporary file that is renamed into place."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.archive import Archive, SiteObject, check_key, issue_id_of
from pipeline.errors import ArchiveError
from pipeline.output import write_file

__all__ = ["LocalArchive"]


class LocalArchive(Archive):
    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def list_issues(self) -> list[str]:
        return sorted(p.parent.name for p in (self.root / "issues").glob("*/issue.json")
                      if issue_id_of(f"issues/{p.parent.name}/issue.json"))

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveError(f"cannot read {key}: {exc.strerror or exc}", key=key) from exc

    def write(self, obj: SiteObject) -> bool:
        path = self._path(obj.key)
        if self.read(obj.key) == obj.data:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, obj.data)
        except OSError as exc:
            raise ArchiveError(f"cannot write {obj.key}: {exc.strerror or exc}",
                               key=obj.key) from exc
        return True

    def keys(self, prefix: str) -> list[str]:
        # Only the folder the prefix names is walked, not the whole archive.
        folder = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        found = (p.relative_to(self.root).as_posix() for p in folder.rglob("*")
                 if p.is_file() and not p.name.startswith("."))  # not a write's temporary
        return sorted(key for key in found if key.startswith(prefix))

    def delete(self, keys: Sequence[str]) -> int:
        removed = 0
        for key in keys:
            path = self._path(key)
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ArchiveError(f"cannot remove {key}: {exc.strerror or exc}",
                                   key=key) from exc
            removed += 1
            self._prune(path.parent)
        return removed

    def _prune(self, folder: Path) -> None:
        """Remove the folders a deletion left empty, up to the root: a static server answers
        an empty folder with a listing, where a page that went should be a 404."""
        while folder != self.root and folder.is_relative_to(self.root):
            try:
                folder.rmdir()
            except OSError:  # not empty (or already gone): nor is any folder above it
                return
            folder = folder.parent

    def describe(self) -> str:
        """The folder with a trailing slash, relative to the working directory when inside
        it (as the command line shows every path)."""
        cwd = Path.cwd()
        shown = self.root.relative_to(cwd) if self.root.is_relative_to(cwd) else self.root
        return f"{shown}/"

    def close(self) -> None:
        """Nothing to release: each write opens and closes its own file."""
