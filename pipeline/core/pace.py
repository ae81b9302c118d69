"""Pacing: a token bucket shared by every sending thread (the waits between retries are
:func:`pipeline.retry.backoff`'s).

The bucket holds at most ``burst`` tokens and refills at ``rate`` per second; ``acquire``
blocks until a token is free. The clock and the sleep are parameters so tests can drive
time by hand.
"""

from __future__ import annotations

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
