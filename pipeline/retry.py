"""One way to try again: a bounded number of attempts, waits that grow, the server's word.

Only the one exception type worth another try is retried; anything else propagates at once.
Sleeping goes through the ``sleep`` each caller passes, so a test never waits.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Literal, TypeVar

__all__ = ["GaveUp", "backoff", "call"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

#: How a wait is spread: ``none`` exactly the ceiling; ``half`` between half of it and all
#: of it; ``full`` anywhere from zero to it.
Jitter = Literal["none", "half", "full"]
#: Why :func:`call` stopped trying.
Why = Literal["attempts", "stopped", "too long", "no wait"]


class GaveUp(Exception):
    """No further attempt: ``last`` (also the ``__cause__``) failed; ``why`` says what ended
    it, and ``wait`` is the wait that was too long."""

    def __init__(self, last: BaseException, attempts: int, why: Why,
                 wait: float | None = None) -> None:
        super().__init__(f"gave up after {attempts} attempts ({why}): {last}")
        self.last = last
        self.attempts = attempts
        self.why = why
        self.wait = wait


def backoff(attempt: int, *, base: float = 0.5, cap: float = 30.0, jitter: Jitter = "half",
            rand: Callable[[], float] = random.random) -> float:
    """Seconds before retry ``attempt`` (1, 2, …): ``base`` doubling, at most ``cap``."""
    ceiling = min(cap, base * 2.0 ** (attempt - 1))
    if jitter == "half":
        return ceiling * (0.5 + rand() / 2)
    if jitter == "full":
        return ceiling * rand()
    return ceiling


def call(attempt: Callable[[], T], *, retry_on: type[E], attempts: int,
         wait: Callable[[int, E], float | None], max_wait: float = math.inf,
         stop: Callable[[], bool] = lambda: False,
         sleep: Callable[[float], None] = time.sleep) -> T:
    """``attempt()``'s answer, trying again after each ``retry_on`` failure while ``wait``
    names a wait within ``max_wait`` (None: another try would fail alike) and not ``stop()``."""
    for n in range(1, max(1, attempts) + 1):
        try:
            return attempt()
        except retry_on as failure:
            seconds = wait(n, failure)
            if seconds is None:
                raise GaveUp(failure, n, "no wait") from failure
            if seconds > max_wait:
                raise GaveUp(failure, n, "too long", seconds) from failure
            if n >= attempts:
                raise GaveUp(failure, n, "attempts") from failure
            if stop():
                raise GaveUp(failure, n, "stopped") from failure
            sleep(max(seconds, 0.0))
    raise AssertionError("unreachable")  # pragma: no cover
