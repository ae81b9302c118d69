"""Pacing: a token bucket shared by every sending thread, and backoff with jitter.

The bucket holds at most ``burst`` tokens and refills at ``rate`` per second; ``acquire``
blocks until a token is free. The clock and the sleep are parameters so tests can drive
time by hand.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable


class TokenBucket:
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
        """Take one token, waiting for it if need be. Unlimited when ``rate`` is None."""
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


def backoff(attempt: int, *, base: float = 0.5, cap: float = 30.0,
            rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, …): exponential, capped, with "full
    jitter" so that many throttled threads do not retry in lockstep."""
    return min(cap, base * 2.0 ** (attempt - 1)) * (0.5 + rand() / 2)
