"""How independent pure work is shared out: the core says what the jobs are, the stage that
calls it says where they run (``pipeline.parallel.fork_map``: on every core), and the answer
is the same list, in the jobs' order, either way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

__all__ = ["Spread", "one_by_one"]

J = TypeVar("J")
R = TypeVar("R")


class Spread(Protocol):
    """Applies a function to every job and returns the results in the jobs' order."""

    def __call__(self, fn: Callable[[J], R], jobs: Sequence[J], /) -> list[R]: ...


def one_by_one(fn: Callable[[J], R], jobs: Sequence[J], /) -> list[R]:
    """The plain loop, here: what a caller that hands no :class:`Spread` gets."""
    return [fn(job) for job in jobs]
