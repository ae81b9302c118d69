"""Shards: a stable partition of the list, so N senders together reach everyone once.

The hash is of the id (random, fixed for life), so a subscriber stays in one shard from run
to run; sha256, because Python's ``hash()`` is salted per process.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = ["Shard", "shard_of"]

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def shard_of(subscriber_id: str, count: int) -> int:
    """The shard (1-based) of ``subscriber_id`` among ``count``."""
    if count < 1:
        raise ValueError("a list has at least one shard")
    digest = hashlib.sha256(subscriber_id.encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count`` (1-based, as written on the command line: ``1/2``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: expected 1 <= I <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/3"`` → Shard(2, 3); ValueError with a plain message otherwise."""
        match = _SPEC.match(text)
        if not match:
            raise ValueError(f"expected I/N such as 1/2, got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __contains__(self, subscriber_id: object) -> bool:
        return isinstance(subscriber_id, str) and shard_of(subscriber_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def slug(self) -> str:
        """For file names: ``shard-2-of-3``."""
        return f"shard-{self.index}-of-{self.count}"
