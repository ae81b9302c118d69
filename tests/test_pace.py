"""Pacing on a hand-driven clock: the token bucket keeps the rate; the cooldown holds every
thread back after a relay said "not now"."""

from __future__ import annotations

import pytest

from pipeline.stages.pace import Cooldown, TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.t += seconds


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


def test_a_non_positive_rate_is_refused():
    with pytest.raises(ValueError):
        TokenBucket(0)


# -- the cooldown a relay's "not now" imposes on every thread ----------------------------------


def cooldown(time: FakeTime, rand: float = 1.0) -> Cooldown:
    return Cooldown(base=1.0, cap=60.0, clock=time.clock, sleep=time.sleep,
                    rand=lambda: rand)


def test_each_failure_in_a_row_doubles_the_wait_up_to_the_cap():
    time = FakeTime()
    pause = cooldown(time)
    waits = []
    for _ in range(9):
        waits.append(pause.failed())
        pause.wait()
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert time.t == sum(waits) and pause.failing_for() == sum(waits)


def test_failures_heard_during_a_pause_are_the_same_refusal():
    """Four threads refused together as a pause ends grow it once, not four times."""
    time = FakeTime()
    pause = cooldown(time)
    first = [pause.failed() for _ in range(4)]
    assert first == [1, 1, 1, 1] and pause.streak == 1
    pause.wait()
    second = [pause.failed() for _ in range(4)]
    assert second == [2, 2, 2, 2] and pause.streak == 2


def test_the_wait_is_jittered_between_half_and_all_of_it_unless_the_transport_says():
    assert cooldown(FakeTime(), rand=0.0).failed() == 0.5
    assert cooldown(FakeTime(), rand=1.0).failed() == 1.0
    assert cooldown(FakeTime()).failed(retry_after=7.5) == 7.5  # the transport's own wait


def test_a_success_ends_the_streak():
    time = FakeTime()
    pause = cooldown(time)
    pause.failed()
    pause.wait()
    pause.failed()
    pause.wait()
    pause.succeeded()
    assert pause.failed() == 1.0 and pause.failing_for() == 0.0


def test_a_pause_only_grows_while_it_lasts():
    """A transport's shorter wait does not cut a running pause short."""
    time = FakeTime()
    pause = cooldown(time)
    for _ in range(4):
        pause.failed()
        pause.wait()
    assert pause.failed() == 16.0
    assert pause.failed(retry_after=1.0) == 16.0  # the longer wait stands
    assert pause.remaining() == 16.0


def test_waiting_sleeps_until_the_pause_ends_then_not_at_all():
    time = FakeTime()
    pause = cooldown(time)
    pause.failed()
    pause.wait()
    assert time.t == 1.0 and pause.remaining() == 0
    pause.failed()
    pause.wait()
    assert time.t == 3.0 and pause.remaining() == 0
    pause.wait()
    assert time.t == 3.0


def test_a_pause_pushed_back_during_the_wait_is_waited_out_too():
    time = FakeTime()
    pause = cooldown(time)
    pushed: list[float] = []

    def sleep(seconds: float) -> None:
        time.sleep(seconds)
        if not pushed:  # another thread failed meanwhile
            pushed.append(pause.failed())

    pause._sleep = sleep
    pause.failed()
    pause.wait()
    assert pause.remaining() == 0 and time.t == 1.0 + pushed[0]


def test_a_stop_ends_the_wait():
    time = FakeTime()
    pause = cooldown(time)
    pause.failed()
    pause.wait(stop=lambda: True)
    assert time.t == 0.0
