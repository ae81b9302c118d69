"""The retry helper: how many attempts, which failures retry, how long the waits are, and
that nothing sleeps when the first attempt succeeds (sleeping is a recorded list here)."""

from __future__ import annotations

import pytest

from pipeline import retry


class Busy(Exception):
    def __init__(self, after: float | None = None) -> None:
        super().__init__("busy")
        self.after = after


def failing(times: int, failure: BaseException | None = None):
    """An attempt that fails ``times`` times (with ``failure``, else Busy), then answers."""
    calls: list[int] = []

    def attempt() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= times:
            raise failure or Busy()
        return "done"

    return attempt, calls


def test_a_first_success_neither_retries_nor_sleeps():
    attempt, calls = failing(0)
    waits: list[float] = []
    assert retry.call(attempt, retry_on=Busy, attempts=5, wait=lambda n, _: 1.0,
                      sleep=waits.append) == "done"
    assert calls == [1] and waits == []


def test_failures_are_retried_with_the_waits_asked_for():
    attempt, calls = failing(2)
    waits: list[float] = []
    assert retry.call(attempt, retry_on=Busy, attempts=3, wait=lambda n, _: n * 10.0,
                      sleep=waits.append) == "done"
    assert calls == [1, 2, 3] and waits == [10.0, 20.0]


def test_the_last_attempt_gives_up_without_a_wait():
    attempt, calls = failing(9)
    waits: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, attempts=4, wait=lambda n, _: 1.0,
                   sleep=waits.append)
    assert len(calls) == 4 and len(waits) == 3
    gave_up = caught.value
    assert (gave_up.attempts, gave_up.why) == (4, "attempts")
    assert isinstance(gave_up.last, Busy) and gave_up.__cause__ is gave_up.last


def test_another_error_propagates_at_once():
    attempt, calls = failing(1, ValueError("a bug"))
    waits: list[float] = []
    with pytest.raises(ValueError, match="a bug"):
        retry.call(attempt, retry_on=Busy, attempts=5, wait=lambda n, _: 1.0,
                   sleep=waits.append)
    assert calls == [1] and waits == []


def test_a_wait_longer_than_allowed_gives_up_without_sleeping():
    attempt, calls = failing(1, Busy(after=3600))
    waits: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, attempts=5, wait=lambda n, exc: exc.after,
                   max_wait=60, sleep=waits.append)
    assert (caught.value.why, caught.value.wait, caught.value.attempts) == ("too long", 3600, 1)
    assert calls == [1] and waits == []


def test_the_servers_wait_is_honoured_when_short_enough():
    attempt, _ = failing(1, Busy(after=3))
    waits: list[float] = []
    retry.call(attempt, retry_on=Busy, attempts=2, wait=lambda n, exc: exc.after, max_wait=10,
               sleep=waits.append)
    assert waits == [3]


def test_no_known_wait_gives_up_at_once():
    attempt, calls = failing(1)
    waits: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, attempts=5, wait=lambda n, _: None,
                   sleep=waits.append)
    assert caught.value.why == "no wait" and calls == [1] and waits == []


def test_a_stop_gives_up_before_the_next_wait():
    attempt, calls = failing(9)
    waits: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, attempts=5, wait=lambda n, _: 1.0,
                   stop=lambda: len(calls) >= 2, sleep=waits.append)
    assert (caught.value.why, caught.value.attempts) == ("stopped", 2)
    assert waits == [1.0]


def test_a_negative_wait_sleeps_not_at_all():
    attempt, _ = failing(1, Busy(after=-5))
    waits: list[float] = []
    retry.call(attempt, retry_on=Busy, attempts=2, wait=lambda n, exc: exc.after,
               sleep=waits.append)
    assert waits == [0.0]


def test_backoff_grows_caps_and_jitters():
    assert retry.backoff(1, rand=lambda: 1.0) == pytest.approx(0.5)
    assert retry.backoff(1, rand=lambda: 0.0) == pytest.approx(0.25)
    assert retry.backoff(4, rand=lambda: 1.0) == pytest.approx(4.0)
    assert retry.backoff(30, rand=lambda: 1.0) == pytest.approx(30.0)
    assert retry.backoff(30, rand=lambda: 0.0) == pytest.approx(15.0)


@pytest.mark.parametrize("attempt", [1, 2, 3, 8, 40])
@pytest.mark.parametrize("rand", [0.0, 0.3, 0.999])
def test_backoff_stays_within_its_bounds(attempt, rand):
    ceiling = min(8.0, 0.25 * 2 ** (attempt - 1))
    assert retry.backoff(attempt, base=0.25, cap=8, jitter="none") == ceiling
    half = retry.backoff(attempt, base=0.25, cap=8, jitter="half", rand=lambda: rand)
    assert ceiling / 2 <= half <= ceiling
    full = retry.backoff(attempt, base=0.25, cap=8, jitter="full", rand=lambda: rand)
    assert 0 <= full <= ceiling
