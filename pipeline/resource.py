"""What every interface that holds something open shares: ``close()``, and ``with`` closing it,
so no adapter writes ``__enter__``/``__exit__`` again."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self


class Resource(Protocol):
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
