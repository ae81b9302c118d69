"""The weekly job's order (pipeline/stages/run.py), its outside steps recorded: the promises
a process test sees only as their absence. A real SQLite store and a real build.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.project import SAMPLE_WEEK

from pipeline.config import Settings
from pipeline.errors import TransportError, UsageError
from pipeline.stages.approve import approve
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, choose_week, load_built
from pipeline.stages.deliver import SendRequest
from pipeline.stages.lock import LEASE_TTL, owner_id
from pipeline.stages.run import RunRequest, run_week
from pipeline.stages.send import SendOptions
from subscribers.store.sqlite import SqliteStore

#: After the sample week ended.
LATER = datetime(2026, 12, 2, 12, tzinfo=UTC)


class _Store(SqliteStore):
    """The real SQLite store, saying whether it was closed."""

    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


class _Delivery:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __enter__(self) -> _Delivery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.append("delivery closed")


class Recorded:
    """The job's outside steps: each says what it was given in ``log``."""

    def __init__(self, settings: Settings, folder: Path, *, check_fails: bool = False) -> None:
        self.settings, self.folder, self.check_fails = settings, folder, check_fails
        self.log: list[str] = []
        self.stores: list[_Store] = []

    def open_store(self) -> _Store:
        store = _Store.open(self.folder / "data" / "subscribers.sqlite3")
        self.stores.append(store)
        self.log.append("store opened")
        return store

    def reuse(self, built: BuiltIssue, sent: bool) -> None:
        self.log.append(f"reuse {built.content_hash[:12]}" + (" sent" if sent else ""))

    def build(self, week, feeds, choices, sent) -> BuiltIssue:
        store = self.stores[-1]
        lease = store.acquire_lease(f"send:{week.id}", "another-run", datetime.now(UTC),
                                    LEASE_TTL)
        held = lease.owner == owner_id()
        self.log.append(f"build {week.id} choices={list(choices)} lease={held}")
        return load_built(build(self.settings, week_id=week.id, feeds=list(feeds),
                                out=self.folder / "issue", choices=choices, sent=sent).out_dir)

    def open_delivery(self, built, request):
        self.log.append(f"checks partial={request.allow_partial_week}")
        if self.check_fails:
            raise TransportError("the relay refused the login")
        return _Delivery(self.log)

    def publish(self, built, store) -> None:
        self.log.append(f"publish same-store={store is self.stores[-1]}")

    def send(self, built, delivery, store, request) -> int:
        self.log.append(f"send same-store={store is self.stores[-1]} "
                        f"dry={request.options.dry_run}")
        return 0


def request(settings: Settings, **send) -> RunRequest:
    return RunRequest(choose_week(settings, SAMPLE_WEEK), (), SendRequest(**send))


def run(settings: Settings, steps: Recorded, job: RunRequest, at: datetime = LATER) -> int:
    return run_week(job, steps, at=at, issue_folder=steps.folder / "issue")


def test_checks_pass_before_the_publish_and_one_store_serves_every_step(settings, tmp_path):
    steps = Recorded(settings, tmp_path)
    store = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    store.add("reader@example.org", "en", status="active", source="test", now=LATER,
              areas=("rocm",))
    store.close()
    assert run(settings, steps, request(settings)) == 0
    assert steps.log == [
        "store opened",
        "build 2026-W48 choices=[('en', ('rocm',))] lease=True",
        "checks partial=False",
        "publish same-store=True",
        "send same-store=True dry=False",
        "delivery closed",
    ]
    # The job closed its store, and the lease is free for the next run.
    assert steps.stores[0].closed
    again = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    lease = again.acquire_lease(f"send:{SAMPLE_WEEK}", "next-run", LATER, timedelta(minutes=1))
    assert lease.owner == "next-run"
    again.close()


def test_a_dry_run_publishes_nothing(settings, tmp_path):
    steps = Recorded(settings, tmp_path)
    run(settings, steps, request(settings, options=SendOptions(dry_run=True)))
    assert not any(line.startswith("publish") for line in steps.log)
    assert steps.log[-2:] == ["send same-store=True dry=True", "delivery closed"]


def test_a_failed_check_publishes_and_sends_nothing(settings, tmp_path):
    steps = Recorded(settings, tmp_path, check_fails=True)
    with pytest.raises(TransportError):
        run(settings, steps, request(settings))
    assert [line.split()[0] for line in steps.log] == ["store", "build", "checks"]
    assert steps.stores[0].closed


def test_a_week_still_running_is_refused_before_anything_is_opened(settings, tmp_path):
    steps = Recorded(settings, tmp_path)
    during = datetime(2026, 11, 27, 12, tzinfo=UTC)  # the sample week's Friday
    with pytest.raises(UsageError, match="has not ended"):
        run(settings, steps, request(settings), at=during)
    assert steps.log == []
    assert not (tmp_path / "data").exists()  # no store file made for a refused week
    run(settings, steps, request(settings, allow_partial_week=True), at=during)
    assert "checks partial=True" in steps.log


def test_an_approved_issue_is_sent_as_proofed_not_built_again(settings, tmp_path):
    folder = tmp_path / "issue"
    approve(load_built(build(settings, week_id=SAMPLE_WEEK, out=folder).out_dir), LATER)
    proofed = load_built(folder)
    steps = Recorded(settings, tmp_path)
    run(settings, steps, request(settings))
    assert steps.log[1] == f"reuse {proofed.content_hash[:12]}"
    assert not any(line.startswith("build") for line in steps.log)
