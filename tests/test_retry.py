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


def one_second(n, failure):
    return 1.0


def its_own(n, failure):
    return failure.after


@pytest.mark.parametrize(("fails", "failure", "wait", "waits"), [
    (0, Busy(), one_second, []),                    # a first success neither retries nor sleeps
    (2, Busy(), lambda n, _: n * 10.0, [10.0, 20.0]),
    (1, Busy(after=3), its_own, [3]),               # the server's wait, short enough
    (1, Busy(after=-5), its_own, [0.0]),            # a negative wait sleeps not at all
], ids=["first", "asked", "server", "negative"])
def test_failures_are_retried_with_the_waits_asked_for(fails, failure, wait, waits):
    attempt, calls = failing(fails, failure)
    slept: list[float] = []
    assert retry.call(attempt, retry_on=Busy, attempts=3, wait=wait, max_wait=60,
                      sleep=slept.append) == "done"
    assert calls == list(range(1, fails + 2)) and slept == waits


@pytest.mark.parametrize(("failure", "options", "why", "tried", "waits"), [
    (Busy(), {"attempts": 4}, "attempts", 4, [1.0] * 3),  # the last attempt does not wait
    (Busy(after=3600), {"wait": its_own, "max_wait": 60}, "too long", 1, []),
    (Busy(), {"wait": lambda n, _: None}, "no wait", 1, []),  # nobody knows how long
], ids=["attempts", "too-long", "no-wait"])
def test_giving_up_sleeps_no_more(failure, options, why, tried, waits):
    attempt, calls = failing(9, failure)
    slept: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, **{"attempts": 5, "wait": one_second, **options},
                   sleep=slept.append)
    gave_up = caught.value
    assert (gave_up.why, gave_up.attempts, len(calls), slept) == (why, tried, tried, waits)
    assert isinstance(gave_up.last, Busy) and gave_up.__cause__ is gave_up.last
    if why == "too long":
        assert gave_up.wait == 3600


def test_another_error_propagates_at_once():
    attempt, calls = failing(1, ValueError("a bug"))
    slept: list[float] = []
    with pytest.raises(ValueError, match="a bug"):
        retry.call(attempt, retry_on=Busy, attempts=5, wait=one_second, sleep=slept.append)
    assert calls == [1] and slept == []


def test_a_stop_gives_up_before_the_next_wait():
    attempt, calls = failing(9)
    slept: list[float] = []
    with pytest.raises(retry.GaveUp) as caught:
        retry.call(attempt, retry_on=Busy, attempts=5, wait=one_second,
                   stop=lambda: len(calls) >= 2, sleep=slept.append)
    assert (caught.value.why, caught.value.attempts) == ("stopped", 2)
    assert slept == [1.0]


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
