"""Pacing: the token bucket keeps the rate on a hand-driven clock."""

from __future__ import annotations

import pytest

from pipeline.core.pace import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.t += seconds


def test_bucket_holds_the_rate():
    time = FakeTime()
    bucket = TokenBucket(10.0, burst=1, clock=time.clock, sleep=time.sleep)
    for _ in range(101):
        bucket.acquire()
    # The first token is free, the next hundred cost 0.1 s each.
    assert time.t == pytest.approx(10.0)


def test_burst_allows_that_many_at_once_then_the_rate():
    time = FakeTime()
    bucket = TokenBucket(2.0, burst=4, clock=time.clock, sleep=time.sleep)
    for _ in range(4):
        bucket.acquire()
    assert time.t == 0
    bucket.acquire()
    assert time.t == pytest.approx(0.5)


def test_idle_time_refills_but_never_above_the_burst():
    time = FakeTime()
    bucket = TokenBucket(1.0, burst=2, clock=time.clock, sleep=time.sleep)
    bucket.acquire()
    bucket.acquire()
    time.t += 100  # a long pause
    bucket.acquire()
    bucket.acquire()
    assert time.t == pytest.approx(100)
    bucket.acquire()
    assert time.t == pytest.approx(101)


def test_unlimited_bucket_never_waits():
    time = FakeTime()
    bucket = TokenBucket(None, clock=time.clock, sleep=time.sleep)
    for _ in range(1000):
        bucket.acquire()
    assert time.t == 0


def test_a_non_positive_rate_is_refused():
    with pytest.raises(ValueError):
        TokenBucket(0)
