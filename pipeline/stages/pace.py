"""Pacing shared by every sending thread: a token bucket for the rate we choose, a
cooldown for the one the relay imposes. Clock and sleep are parameters, for tests."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from pipeline.retry import backoff


class TokenBucket:
    """The rate we choose: ``rate`` messages a second after a first ``burst``; None: no limit."""

    def __init__(self, rate: float | None, burst: int = 1, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = max(1, burst)
        self._clock, self._sleep = clock, sleep
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take one token, waiting for it if need be."""
        if self.rate is None:
            return
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1 - 1e-9:  # a float hair short of a token is a token
                    self._tokens = max(0.0, self._tokens - 1)
                    return
                wait = (1 - self._tokens) / self.rate
            self._sleep(wait)


class Cooldown:
    """A pause every sending thread honours after the transport said "not now".

    A relay's limit is about the account, not one message: if the other threads kept
    knocking, its window would never pass. The wait doubles with each failure in a row,
    from ``base`` to ``cap`` (60 s spans a relay's minute window), with jitter; a success
    ends the streak; a ``retry_after`` the transport gives is believed.
    """

    def __init__(self, *, base: float = 1.0, cap: float = 60.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self.base, self.cap = base, cap
        self._clock, self._sleep, self._rand = clock, sleep, rand
        self._lock = threading.Lock()
        self._until = clock()
        self.streak = 0
        self._since: float | None = None

    def failed(self, retry_after: float | None = None) -> float:
        """Note a temporary failure; the seconds from now until anyone may try again."""
        with self._lock:
            now = self._clock()
            if now < self._until and not retry_after:
                # The same refusal heard by one more thread: N threads must not grow the
                # pause N times too fast.
                return self._until - now
            self.streak += 1
            if self._since is None:
                self._since = now
            wait = (float(retry_after) if retry_after and retry_after > 0
                    else backoff(self.streak, base=self.base, cap=self.cap, rand=self._rand))
            self._until = max(self._until, now + wait)
            return self._until - now

    def succeeded(self) -> None:
        """A message went through: the next failure starts a new streak."""
        with self._lock:
            self.streak = 0
            self._since = None

    def failing_for(self) -> float:
        """How long the transport has refused everything (0 after a success)."""
        with self._lock:
            return 0.0 if self._since is None else self._clock() - self._since

    def remaining(self) -> float:
        """Seconds until the pause ends (0 when there is none)."""
        with self._lock:
            return max(0.0, self._until - self._clock())

    def wait(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Sleep until the pause ends (another thread may push it back), or ``stop()``."""
        while not stop():
            with self._lock:
                target = self._until
                left = target - self._clock()
            if left <= 0:
                return
            self._sleep(left)
            with self._lock:
                if self._until == target:
                    return
