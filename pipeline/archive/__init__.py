"""Archives: where the public web archive lives. One small interface, two adapters.

Keys are relative paths (``issues/2026-W48/index.html``). ``write`` skips an unchanged
object, so publishing the same content twice writes nothing. ``delete`` is only for pages
nothing live links to, never an issue's own: the archive of issues only grows. Adapters raise
only :class:`~pipeline.errors.ArchiveError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from pipeline.errors import ArchiveError
from pipeline.model import SiteObject
from pipeline.resource import Resource

__all__ = ["Archive", "SiteObject", "check_key", "issue_id_of"]

_ISSUE_KEY = re.compile(r"^issues/([0-9]{4}-W[0-9]{2})/issue\.json$")
#: Letters and digits of any script (an area page of a Chinese area name is
#: ``areas/调度器/``), ``.``, ``_``, ``-`` and ``/``; no empty, ``.`` or ``..`` segment.
_SAFE_KEY = re.compile(r"^(?!/)(?!.*/$)(?!.*//)(?!.*(?:^|/)\.\.?(?:/|$))[\w./-]+\Z")


class Archive(Resource, Protocol):
    """Where the site's objects live; subclass it for ``with`` support, or match it by shape."""

    def list_issues(self) -> list[str]:
        """The weeks whose ``issues/<week>/issue.json`` the archive holds, oldest first."""

    def read(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is no such key."""

    def write(self, obj: SiteObject) -> bool:
        """Store ``obj`` unless the archive holds the same bytes already (False then)."""

    def keys(self, prefix: str) -> list[str]:
        """Every key the archive holds that starts with ``prefix``, sorted."""

    def delete(self, keys: Sequence[str]) -> int:
        """Remove ``keys`` (one absent is no error); how many were there and are gone."""

    def describe(self) -> str:
        """Where the archive is, in one line for people (a folder, ``s3://bucket/prefix``)."""


def check_key(key: str) -> str:
    """Refuse keys that could escape the archive's folder or prefix."""
    if not _SAFE_KEY.match(key):
        raise ArchiveError(f"refusing to write outside the archive: {key!r}", key=key)
    return key


def issue_id_of(key: str) -> str | None:
    """The week of ``issues/<week>/issue.json``, or None for any other key."""
    match = _ISSUE_KEY.match(key)
    return match[1] if match else None
