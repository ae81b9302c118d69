"""Archives: where the public web archive lives. One small interface, two adapters.

    class Archive(Protocol):
        def list_issues(self) -> list[str]                  # weeks holding issues/<w>/issue.json
        def read(self, key: str) -> bytes | None
        def write(self, obj: SiteObject) -> bool            # False: same bytes already there

Keys are relative paths (``index.html``, ``issues/2026-W48/index.html``). ``write`` compares
digests and skips an unchanged object, so publishing the same content twice writes nothing.
Adapters raise only :class:`~pipeline.errors.ArchiveError`. ``local`` (here) writes into a
folder; ``s3`` lives in ``s3archive.py`` so boto3 is imported only there. :func:`open_archive`
builds the one ``[archive] target`` names.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipeline.errors import ArchiveError, ConfigError

if TYPE_CHECKING:
    from pipeline.config import Settings

_ISSUE_KEY = re.compile(r"^issues/(\d{4}-W\d{2})/issue\.json$")
_SAFE_KEY = re.compile(r"^(?!/)(?!.*/$)(?!.*//)(?!.*(?:^|/)\.\.?(?:/|$))[A-Za-z0-9._/-]+$")


@dataclass(frozen=True)
class SiteObject:
    """One file of the site, with the headers a host should serve it with."""

    key: str
    data: bytes
    content_type: str
    cache_control: str

    @property
    def md5(self) -> str:
        return hashlib.md5(self.data, usedforsecurity=False).hexdigest()


class Archive(Protocol):
    name: str

    def list_issues(self) -> list[str]: ...

    def read(self, key: str) -> bytes | None: ...

    def write(self, obj: SiteObject) -> bool: ...


def check_key(key: str) -> str:
    """Refuse keys that could escape the archive's folder or prefix."""
    if not _SAFE_KEY.match(key):
        raise ArchiveError(f"refusing to write outside the archive: {key!r}", key=key)
    return key


def issue_id_of(key: str) -> str | None:
    match = _ISSUE_KEY.match(key)
    return match[1] if match else None


class LocalArchive:
    """The archive as a folder (``[archive] dir``): what ``make site`` serves."""

    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def list_issues(self) -> list[str]:
        folder = self.root / "issues"
        if not folder.is_dir():
            return []
        return sorted(p.parent.name for p in folder.glob("*/issue.json")
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
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(obj.data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except OSError as exc:
            raise ArchiveError(f"cannot write {obj.key}: {exc.strerror or exc}",
                               key=obj.key) from exc
        return True


def open_archive(settings: Settings) -> Archive:
    """The archive ``[archive] target`` names: ``local`` (a folder) or ``s3`` (a bucket)."""
    conf = settings.archive
    if conf.target == "local":
        return LocalArchive(settings.resolve(conf.dir))
    if conf.target == "s3":
        if not conf.bucket.strip():
            raise ConfigError("the s3 archive needs a bucket name", key="[archive] bucket")
        from pipeline.archive.s3 import S3Archive, normalise_prefix  # boto3 only when S3 is used

        try:
            normalise_prefix(conf.prefix)
        except ArchiveError as exc:
            raise ConfigError(str(exc).removeprefix("archive: "),
                              key="[archive] prefix") from None
        return S3Archive(conf.bucket.strip(), conf.prefix)
    raise ConfigError(f"expected local or s3, got {conf.target!r}", key="[archive] target")
