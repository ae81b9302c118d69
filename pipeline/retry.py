"""One way to try again: a bounded number of attempts, waits that grow, the server's word.

Four places retry, each for its own failures and with its own bounds, through :func:`call`:

- ``send`` (:mod:`pipeline.stages.send`): a transport's :class:`TemporaryFailure` (throttled,
  busy, a relay's limit), three attempts in the first pass over the list and one per round
  after it, the
  waits a :class:`~pipeline.stages.pace.Cooldown` shared by every sending thread (growing as
  :func:`backoff` does, with jitter), or the transport's ``retry_after``;
- the ``openai`` translator: 429, 5xx, timeouts and refused connections, waits doubling from
  ``[translate]``'s backoff, ``Retry-After`` honoured unless longer than the build can wait;
- GitHub (:mod:`pipeline.sources.github`): one short rate-limit wait, only as long as GitHub
  says, never guessed;
- DynamoDB (:mod:`subscribers.store.dynamo`): a transaction cancelled by a concurrent one,
  after a short random wait (botocore's own retries already cover throttling and 5xx).

The attempt raises the one exception type worth another try; anything else propagates at
once. When no try is left, :class:`GaveUp` says why, the last failure as its cause. Sleeping
goes through the ``sleep`` each caller passes, so a test replaces it and never waits.
This module is a leaf: the standard library only.
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
    """No further attempt: ``last`` failed (it is also the ``__cause__``) after ``attempts``
    attempts. ``why``: ``attempts`` (none left), ``stopped`` (the caller said stop),
    ``too long`` (the wait asked for, ``wait``, exceeds ``max_wait``) or ``no wait`` (nobody
    said how long to wait, so another try would fail the same way)."""

    def __init__(self, last: BaseException, attempts: int, why: Why,
                 wait: float | None = None) -> None:
        super().__init__(f"gave up after {attempts} attempts ({why}): {last}")
        self.last = last
        self.attempts = attempts
        self.why = why
        self.wait = wait


def backoff(attempt: int, *, base: float = 0.5, cap: float = 30.0, jitter: Jitter = "half",
            rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, …): ``base`` doubling each time,
    at most ``cap``, spread by ``jitter`` (the default: between half and all of it)."""
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
    """``attempt()``'s answer, trying again after each ``retry_on`` failure.

    After failure ``n`` (1, 2, …), ``wait(n, failure)`` says how long to wait: None gives up
    (``no wait``), more than ``max_wait`` gives up (``too long``), and so does the last of
    ``attempts`` or a ``stop()`` that turned true; otherwise ``sleep`` that long and try
    again. A success sleeps not at all.
    """
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
