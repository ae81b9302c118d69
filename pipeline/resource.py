"""What every interface that holds something open shares: ``close()``, and ``with`` closing it.

``Archive``, ``Transport`` and ``Inbox`` extend :class:`Resource`, and their adapters subclass
their interface, so ``with open_archive(settings) as archive:`` works for each without an
adapter writing ``__enter__``/``__exit__`` again.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self


class Resource(Protocol):
    def close(self) -> None:
        """Release what the object holds (connections, a client it built)."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
