"""The per-issue lock: a lease in the store. A second holder is refused with exit 5 naming the
first; a holder that died on this machine frees it at once; one on another machine frees it
when its lease expires; a live holder keeps renewing it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.errors import LockedError
from pipeline.stages.lock import hold
from subscribers.store.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path):
    with SqliteStore.open(tmp_path / "subscribers.sqlite3") as opened:
        yield opened


def heard_within(seconds: float, heard) -> None:
    """Poll ``heard()`` until it is true or ``seconds`` pass (the lease thread tells)."""
    deadline = time.monotonic() + seconds
    while not heard() and time.monotonic() < deadline:
        time.sleep(0.05)


def holder_process(path) -> subprocess.Popen[str]:
    code = ("import time; from pathlib import Path; from pipeline.stages.lock import hold; "
            "from subscribers.store.sqlite import SqliteStore\n"
            f"store = SqliteStore.open(Path({str(path)!r}))\n"
            "with hold(store, 'send:2026-W48', 'send 2026-W48'):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.subprocess
def test_a_second_holder_is_refused_naming_the_first(store, tmp_path):
    holder = holder_process(tmp_path / "subscribers.sqlite3")
    try:
        assert holder.stdout is not None  # piped
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError) as info, hold(store, "send:2026-W48",
                                                      "send 2026-W48"):
            pass
        assert info.value.exit_code == 5
        assert f":{holder.pid}:" in str(info.value) and "send 2026-W48" in str(info.value)
        with hold(store, "send:2026-W49", "send 2026-W49"):  # another issue: its own lock
            pass
    finally:
        holder.kill()
        holder.wait()
    with hold(store, "send:2026-W48", "send 2026-W48"):  # its holder died here: taken at once
        pass


def test_a_holder_elsewhere_blocks_until_its_lease_expires(store):
    now = datetime.now(UTC)
    store.acquire_lease("send:2026-W48", "other-host:4242:abcdef", now, timedelta(minutes=2))
    with pytest.raises(LockedError, match="other-host:4242"), hold(
            store, "send:2026-W48", "send 2026-W48"):
        pass
    later = lambda: now + timedelta(minutes=3)  # noqa: E731 - a clock past the lease
    with hold(store, "send:2026-W48", "send 2026-W48", clock=later) as lease:
        assert lease.owner != "other-host:4242:abcdef"  # the stale lease was taken over


def test_a_live_holder_renews_its_lease_and_releases_it(store):
    ttl = timedelta(seconds=0.4)
    start = datetime.now(UTC)
    later = start + 3 * ttl  # long past the first lease: only a renewal can have kept it
    clock = [start]
    renewed_later = threading.Event()

    class Watched:
        """The store, telling the test once a renewal at ``later`` is written."""

        def __getattr__(self, name):
            return getattr(store, name)

        def renew_lease(self, name, owner, now, ttl):
            kept = store.renew_lease(name, owner, now, ttl)
            if now == later:
                renewed_later.set()
            return kept

    with hold(Watched(), "send:x", "send x", ttl=ttl, clock=lambda: clock[0]) as lease:
        clock[0] = later
        assert renewed_later.wait(30), "the lease was never renewed"
        current = store.acquire_lease("send:x", "someone-else:1:1", later, ttl)
        assert current.owner == lease.owner
    free = store.acquire_lease("send:x", "someone-else:1:1", later, ttl)
    assert free.owner == "someone-else:1:1"


def test_a_holder_that_loses_its_lease_is_told(store):
    ttl = timedelta(seconds=0.4)
    lost = []
    with hold(store, "send:y", "send y", ttl=ttl, on_lost=lambda: lost.append(True)):
        # Another run takes it over, as if this one had stalled past its lease.
        thief = store.acquire_lease("send:y", "thief:1:1",
                                    datetime.now(UTC) + timedelta(hours=1), timedelta(hours=2))
        assert thief.owner == "thief:1:1"
        heard_within(5, lambda: bool(lost))
    assert lost == [True]
    assert store.acquire_lease("send:y", "z", datetime.now(UTC), ttl).owner == "thief:1:1"


def test_a_nested_hold_is_the_same_run_and_hears_of_a_loss(store):
    ttl = timedelta(seconds=0.4)
    heard = []
    with hold(store, "send:z", "run z", ttl=ttl) as outer:
        with hold(store, "send:z", "send z", ttl=ttl,
                  on_lost=lambda: heard.append("send")) as inner:
            assert inner.owner == outer.owner
            store.acquire_lease("send:z", "thief:1:1", datetime.now(UTC) + timedelta(hours=1),
                                timedelta(hours=2))
            heard_within(5, lambda: bool(heard))
        assert heard == ["send"]  # the send inside the run is told to stop
        with pytest.raises(LockedError, match="thief"), hold(store, "send:z", "send z"):
            pass  # and a later nested hold does not pretend to hold it


def test_a_store_that_stops_answering_counts_as_a_lost_lease(store):
    ttl = timedelta(seconds=0.4)
    heard = []

    class Failing:
        def __getattr__(self, name):
            return getattr(store, name)

        def renew_lease(self, *args, **kwargs):
            raise OSError("the store is unreachable")

    with hold(Failing(), "send:w", "send w", ttl=ttl, on_lost=lambda: heard.append(1)):
        heard_within(5, lambda: bool(heard))
    assert heard == [1]
