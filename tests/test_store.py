"""The subscriber store on both backends: uniqueness, erasure, the ledger's exclusivity
across threads (and, on SQLite's real files, processes), quotas and leases.

The ``backend`` fixture runs each interface test on SQLite and on DynamoDB (moto); its
``open()`` gives another store on the same data, which is how the concurrency tests get several
clients. Tests of the SQLite file itself use ``path`` and SQLite only.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.store_rules import (
    LedgerRow,
    after_claim,
    after_confirmation,
    after_outcome,
    after_release,
)

from pipeline.wiring import open_store
from subscribers.errors import InvalidAddress, StoreError, UnknownSubscriber
from subscribers.model import STATUSES, AddOutcome, NewSubscriber
from subscribers.store import (
    DeliveryStore,
    Directory,
    Feedback,
    Imports,
    Interests,
    Leases,
    Ledger,
    OnceKeys,
    Quotas,
    SentIssues,
    SubscriberStore,
    SubscriptionStore,
)
from subscribers.store.dynamo import DynamoStore
from subscribers.store.rules import (
    CONFIRMABLE,
    MAIL_EVENTS,
    MailState,
    after_mail_event,
    encode_time,
)
from subscribers.store.sqlite import MIGRATIONS, SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from support.dynamo_support import Dynamo

pytest_plugins = ["support.dynamo_support"]

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
ISSUE = "2026-W48"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "subscribers.sqlite3"


class SqliteBackend:
    """Stores on one SQLite file; what is stored, read from the file as another process
    (``Dynamo`` is its twin on DynamoDB)."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened: list[SqliteStore] = []

    def open(self) -> SqliteStore:
        store = SqliteStore.open(self.path)
        self.opened.append(store)
        return store

    def subscriber_count(self) -> int:
        count: int = raw(self.path, "SELECT count(*) FROM subscribers")[0][0]
        return count

    def suppressions(self) -> list[str]:
        return [row[0] for row in raw(self.path, "SELECT email_hash FROM suppressions")]

    def dump(self) -> bytes:
        """Every byte of the store's files (database, WAL, shared memory)."""
        return b"".join(p.read_bytes() for p in self.path.parent.iterdir() if p.is_file())

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.aws)])
def backend(request, path: Path):
    """One backend's data; ``backend.open()`` is a new store on it (closed at the end)."""
    if request.param == "sqlite":
        chosen: SqliteBackend | Dynamo = SqliteBackend(path)
    else:
        chosen = request.getfixturevalue("dynamo")
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture
def store(backend: SqliteBackend | Dynamo) -> SubscriberStore:
    return backend.open()


def raw(path: Path, query: str) -> list[tuple[Any, ...]]:
    """Read the file with a connection of its own, as another process would."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def active(store: SubscriberStore, email: str, layout: str = "zh-en") -> str:
    sub = store.add(email, layout, status="active", source="test", now=NOW).subscriber
    assert sub is not None
    return sub.id


def together(*work: Callable[[], object]) -> None:
    """Each callable in a thread of its own, all at once; back when all are done."""
    threads = [threading.Thread(target=each) for each in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def old_file(path: Path, version: int, *rows: str) -> None:
    """A store file as a program of schema ``version`` left it, holding ``rows`` (SQL)."""
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:version]:
        conn.executescript(script)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    for row in rows:
        conn.execute(row)
    conn.commit()
    conn.close()


# -- schema ----------------------------------------------------------------------------------

def test_fresh_file_is_migrated_and_reopening_changes_nothing(path):
    with SqliteStore.open(path) as store:
        sid = active(store, "a@example.org")
    assert path.is_file()
    assert raw(path, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]
    tables = {row[0] for row in raw(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"schema_version", "subscribers", "suppressions", "ledger"} <= tables
    assert raw(path, "PRAGMA journal_mode") == [("wal",)]
    with SqliteStore.open(path) as again:
        assert again.get(sid) is not None
    assert raw(path, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]


def test_settings_place_the_store_in_the_data_folder(settings):
    with open_store(settings) as store:
        assert isinstance(store, SqliteStore)  # the default backend
        assert store.path == settings.resolve(settings.paths.data_dir) / "subscribers.sqlite3"
    assert store.path.is_file()


def test_a_file_that_is_not_sqlite_is_one_clear_error(tmp_path):
    bogus = tmp_path / "subscribers.sqlite3"
    bogus.write_text("email,layout\na@example.org,zh\n" * 200)
    with pytest.raises(StoreError) as caught:
        SqliteStore.open(bogus)
    message = str(caught.value)
    assert "\n" not in message
    assert str(bogus) in message and "not a SQLite database" in message
    assert caught.value.path == bogus
    assert caught.value.exit_code == 1


def test_a_schema_from_a_newer_program_is_refused(path):
    SqliteStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        SqliteStore.open(path)


#: A subscriber and a claim in flight, as version 1 of the schema stored them.
OLD_ROWS = (
    "INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source, "
    "created_at, confirmed_at, updated_at) VALUES ('0123456789abcdef01234567', "
    "'old@example.org', 'old@example.org', 'active', 'en', '2026-01-01T00:00:00.000000Z', 'cli', "
    "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')",
    "INSERT INTO ledger (issue_id, subscriber_id, status, updated_at) VALUES ('2026-W48', "
    "'aaaaaaaaaaaaaaaaaaaaaaaa', 'sending', '2026-01-01T00:00:00.000000Z')")


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
def test_an_older_file_is_migrated_keeping_its_rows(path, version):
    """Each migration's rows are usable; an old file's ``sending`` row may have left (no
    hand-over noted): never release it."""
    old_file(path, version, *OLD_ROWS)
    with SqliteStore.open(path) as store:
        old = store.find("old@example.org")
        assert old is not None
        assert (old.status, old.layout, old.areas) == ("active", "en", ())
        assert old.consent_ip is None and old.transient_bounces == 0
        assert store.expire_in_flight(ISSUE, NOW) == 1
        assert store.ledger(ISSUE)["a" * 24].status == "unconfirmed"
        assert store.first_time("k", NOW)
        assert store.acquire_lease("send:x", "me", NOW, timedelta(minutes=5)).owner == "me"
        assert store.record_mail_event(old.id, "delivery", NOW, transient_limit=3,
                                       occurred_at=NOW).status == "active"
        assert store.record_sent(ISSUE, "a" * 64, NOW).first_hash == "a" * 64
        assert store.variant_choices() == [] and store.known_areas() == ()
        store.set_layout(old.id, "en", NOW, areas=["rocm"])
        store.note_areas(["rocm"])
        assert store.variant_choices() == [("en", ("rocm",))]
    assert raw(path, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]
    assert raw(path, "SELECT areas FROM subscribers") == [('["rocm"]',)]
    with SqliteStore.open(path) as store:  # reopening changes nothing
        assert store.known_areas() == ("rocm",)


ROLES = (Directory, Imports, Interests, Ledger, SentIssues, Feedback, Leases, OnceKeys, Quotas)


def methods(protocol: type) -> set[str]:
    """The public methods a Protocol declares (its own and those of the roles it joins)."""
    return {name for name, _ in inspect.getmembers(protocol, inspect.isfunction)
            if not name.startswith("_")}


def test_the_roles_are_small_and_share_no_method():
    """The store is exactly its nine roles (and ``close``): no method in two roles or in none."""
    owned = [methods(role) for role in ROLES]
    assert all(len(names) <= 12 for names in owned), [len(names) for names in owned]
    assert sum(len(names) for names in owned) == len(set().union(*owned))
    assert set().union(*owned) | {"close"} == methods(SubscriberStore)
    assert methods(DeliveryStore) == (methods(Directory) | methods(Interests)
                                      | methods(Ledger) | methods(SentIssues)
                                      | methods(Feedback))
    assert methods(SubscriptionStore) == (methods(Directory) | methods(Interests)
                                          | methods(Ledger) | methods(Feedback)
                                          | methods(OnceKeys) | methods(Quotas))


@pytest.mark.parametrize("implementation", [SqliteStore, DynamoStore])
@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.__name__)
def test_both_stores_keep_every_role(role, implementation):
    """Neither store inherits its roles, so each role's methods and attributes are checked here."""
    for name in methods(role):
        assert (list(inspect.signature(getattr(implementation, name)).parameters)
                == list(inspect.signature(getattr(role, name)).parameters)), name
    for name in vars(role).get("__annotations__", {}):
        assert hasattr(implementation, name), name


# -- subscribers -----------------------------------------------------------------------------

def test_add_normalises_and_records_consent(store):
    pending = store.add("  Li.Wei@Example.ORG ", "zh", source="cli", now=NOW)
    assert pending.outcome is AddOutcome.CREATED and pending.created
    sub = pending.subscriber
    assert sub is not None
    assert sub.email == "Li.Wei@example.org"
    assert (sub.status, sub.layout, sub.consent_source) == ("pending", "zh", "cli")
    assert sub.consent_at is None and sub.confirmed_at is None
    assert len(sub.id) == 24 and int(sub.id, 16) >= 0
    assert sub.created_at == NOW and sub.created_at.tzinfo is UTC

    later = NOW + timedelta(hours=1)
    confirmed = store.add("li.wei@example.org", status="active", source="import:x.csv",
                          now=later)
    assert confirmed.outcome is AddOutcome.ACTIVATED
    assert confirmed.subscriber is not None
    assert confirmed.subscriber.status == "active"
    assert confirmed.subscriber.consent_at == later == confirmed.subscriber.confirmed_at
    assert confirmed.subscriber.consent_source == "import:x.csv"
    assert confirmed.subscriber.layout == "zh"  # an existing row keeps its layout

    again = store.add("LI.WEI@example.org", "en", source="cli", now=later)
    assert again.outcome is AddOutcome.EXISTING and again.subscriber == confirmed.subscriber
    # SQLite's lower() folds ASCII only; the key is lower-cased in Python (for both).
    assert store.add("Ünï@example.org", source="cli", now=NOW).outcome is AddOutcome.CREATED
    assert store.add("üNÏ@EXAMPLE.org", source="cli", now=NOW).outcome is AddOutcome.EXISTING


def test_invalid_addresses_are_refused(store):
    for text in ("", "no-at-sign", "a@localhost", "a@@example.org"):
        with pytest.raises(InvalidAddress) as caught:
            store.add(text, source="cli", now=NOW)
        assert caught.value.exit_code == 2
    assert store.count_by() == {}


# -- adding many (an import's batch) ----------------------------------------------------------

def test_add_many_gives_what_add_gives_one_by_one(store):
    pending = store.add("pending@example.org", source="web", now=NOW).subscriber
    kept = store.add("kept@example.org", "zh", status="active", source="web", now=NOW,
                     areas=["multimodal"]).subscriber
    for address, final in (("gone@example.org", "unsubscribed"),
                           ("bounced@example.org", "bounced")):
        store.set_status(active(store, address), final, NOW)
    store.add("removed@example.org", source="cli", now=NOW)
    store.remove("removed@example.org", NOW)
    later = NOW + timedelta(days=1)
    entries = [NewSubscriber("New@Example.ORG", "en", ("rocm", "KV Connector")),
               NewSubscriber("PENDING@example.org", "en"),
               NewSubscriber("pending@example.org"),
               NewSubscriber("gone@EXAMPLE.org"),
               NewSubscriber("bounced@example.org", "zh"),
               NewSubscriber("Removed@example.org"),
               NewSubscriber("kept@example.org", "en", ("cpu",)),
               NewSubscriber("new@example.org", "zh"),
               NewSubscriber("用户@例子.中国", "en-zh"),
               NewSubscriber("Ünï@example.org"),
               NewSubscriber("üNÏ@EXAMPLE.org", "en")]

    results = store.add_many(entries, status="active", source="import:t.csv", now=later)

    assert [r.outcome for r in results] == [
        AddOutcome.CREATED, AddOutcome.ACTIVATED, AddOutcome.EXISTING, AddOutcome.REFUSED,
        AddOutcome.REFUSED, AddOutcome.SUPPRESSED, AddOutcome.EXISTING, AddOutcome.EXISTING,
        AddOutcome.CREATED, AddOutcome.CREATED, AddOutcome.EXISTING]
    new = results[0].subscriber
    assert new is not None and new == results[7].subscriber
    assert (new.email, new.status, new.layout, new.areas) == (
        "New@example.org", "active", "en", ("kv-connector", "rocm"))
    assert new.consent_at == later == new.confirmed_at == new.created_at
    assert new.consent_source == "import:t.csv"
    assert pending is not None and results[1].subscriber is not None
    assert results[1].subscriber.id == pending.id
    assert (results[1].subscriber.status, results[1].subscriber.consent_at,
            results[1].subscriber.consent_source) == ("active", later, "import:t.csv")
    assert results[2].subscriber == results[1].subscriber
    assert results[3].subscriber is not None and results[3].subscriber.status == "unsubscribed"
    assert results[5].subscriber is None
    assert results[6].subscriber == kept  # a present reader keeps their layout and areas
    assert results[8].subscriber is not None and results[8].subscriber.email == "用户@例子.中国"
    for entry, result in zip(entries, results, strict=True):
        if result.subscriber is not None:
            assert store.find(entry.email) == result.subscriber, entry.email
    assert store.find("removed@example.org") is None
    assert store.count_by_status() == {"pending": 0, "active": 5, "unsubscribed": 1,
                                       "bounced": 1, "complained": 0}
    # The same batch again: nothing new, nothing changed.
    again = store.add_many(entries, status="active", source="import:t.csv", now=later)
    assert [r.outcome for r in again].count(AddOutcome.CREATED) == 0
    assert [r.subscriber for r in again][6:] == [r.subscriber for r in results][6:]


def test_add_many_checks_every_address_before_writing_any(store):
    with pytest.raises(InvalidAddress):
        store.add_many([NewSubscriber("fine@example.org"), NewSubscriber("not-an-address")],
                       source="import:t.csv", now=NOW)
    with pytest.raises(ValueError, match="layout"):
        store.add_many([NewSubscriber("fine@example.org", "klingon")], source="i", now=NOW)
    assert store.count_by() == {}
    assert store.add_many([], source="import:t.csv", now=NOW) == []


def test_a_batch_of_new_subscribers_takes_neighbouring_ids(store):
    """A batch's ids share a random prefix (SQLite keeps rows in id order), each still 24 hex."""
    first = store.add_many([NewSubscriber(f"r{i}@example.org") for i in range(50)],
                           source="i", now=NOW)
    second = store.add_many([NewSubscriber(f"s{i}@example.org") for i in range(50)],
                            source="i", now=NOW)
    ids = [[r.subscriber.id for r in batch if r.subscriber] for batch in (first, second)]
    assert all(len(set(batch)) == 50 for batch in ids)
    assert all(re.fullmatch(r"[0-9a-f]{24}", sid) for batch in ids for sid in batch)
    assert {sid[:12] for sid in ids[0]} != {sid[:12] for sid in ids[1]}
    assert all(len({sid[:12] for sid in batch}) == 1 for batch in ids)


@pytest.mark.parametrize("separate_connections", [False, True])
def test_uniqueness_is_case_insensitive_under_concurrent_adds(backend, separate_connections):
    backend.open().close()
    stores = [backend.open() for _ in range(2)] if separate_connections else []
    shared = backend.open()
    rounds = 30
    outcomes: list[AddOutcome] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def worker(n: int, spelling: str) -> None:
        own = stores[n] if separate_connections else shared
        for i in range(rounds):
            barrier.wait()
            result = own.add(spelling.format(i), source="test", now=NOW)
            with lock:
                outcomes.append(result.outcome)

    together(lambda: worker(0, "A{}@x.org"), lambda: worker(1, "a{}@X.org"))
    for each in [*stores, shared]:
        each.close()
    assert outcomes.count(AddOutcome.CREATED) == rounds
    assert outcomes.count(AddOutcome.EXISTING) == rounds
    assert backend.subscriber_count() == rounds


@pytest.mark.parametrize("final", ["unsubscribed", "bounced", "complained"])
def test_adding_again_never_reactivates(store, final):
    sid = active(store, "gone@example.org")
    before = store.set_status(sid, final, NOW)
    for status in ("active", "pending"):
        result = store.add("GONE@example.org", "en", status=status, source="import:a.csv",
                           now=NOW + timedelta(days=1))
        assert result.outcome is AddOutcome.REFUSED
        assert result.subscriber == before
    assert store.get(sid) == before


def test_set_layout_and_status_refuse_unknown_subscribers_and_values(store):
    sub = store.add("p@example.org", source="web", now=NOW).subscriber
    assert sub is not None
    moved = store.set_layout(sub.id, "en-zh", NOW + timedelta(days=1))
    assert moved.layout == "en-zh" and moved.updated_at == NOW + timedelta(days=1)
    with pytest.raises(UnknownSubscriber):
        store.set_status("0" * 24, "active", NOW)
    with pytest.raises(UnknownSubscriber):
        store.set_layout("0" * 24, "en", NOW)
    with pytest.raises(ValueError):
        store.set_status(sub.id, "asleep", NOW)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.set_layout(sub.id, "en", datetime(2026, 1, 1))


def test_count_by_status_and_layout(store):
    active(store, "a@example.org", "zh")
    active(store, "b@example.org", "zh")
    active(store, "c@example.org", "en")
    store.add("d@example.org", "en", source="cli", now=NOW)
    assert store.count_by() == {("active", "en"): 1, ("active", "zh"): 2, ("pending", "en"): 1}
    assert store.count_by_status() == {"pending": 1, "active": 3, "unsubscribed": 0,
                                       "bounced": 0, "complained": 0}


def test_remove_erases_the_address_and_keeps_only_its_hash(backend, store):
    sid = active(store, "Erase.Me@Example.org")
    keep = active(store, "stays@example.org")
    assert store.claim(ISSUE, sid, NOW)
    store.mark_failed(ISSUE, sid, "550 5.1.1 <Erase.Me@example.org>: no such user", True, NOW)
    assert store.claim(ISSUE, keep, NOW)

    assert store.remove("erase.me@EXAMPLE.org", NOW) is True
    assert store.find("Erase.Me@example.org") is None
    assert store.get(sid) is None
    assert sid not in store.ledger(ISSUE) and keep in store.ledger(ISSUE)
    assert store.is_suppressed("ERASE.ME@example.org")
    expected = hashlib.sha256(b"erase.me@example.org").hexdigest()
    assert backend.suppressions() == [expected]
    files = backend.dump()
    assert b"erase.me" not in files.lower()
    assert b"stays@example.org" in files  # the check can see addresses that are there

    again = store.add("Erase.Me@example.org", status="active", source="import:a.csv", now=NOW)
    assert again.outcome is AddOutcome.SUPPRESSED and again.subscriber is None
    assert store.find("erase.me@example.org") is None
    assert store.remove("nobody@example.org", NOW) is False
    assert not store.is_suppressed("nobody@example.org")


@pytest.mark.slow
def test_iter_subscribers_streams_every_row_once_in_id_order(backend):
    # moto deep-copies the whole table for each action of a transaction (an add is one
    # transaction of three): fewer rows there. tests/test_dynamo.py also pages through small
    # batches across statuses.
    total = 5000 if backend.name == "sqlite" else 110  # still past a batch of 100
    with backend.open() as store:
        # Added as an import adds them (one batch per status): the stream is what is tested.
        readers = [NewSubscriber(f"reader{n}@example.org", ("zh-en", "en")[n % 2])
                   for n in range(total)]
        for status, chosen in (("active", readers[1::5] + readers[2::5] + readers[3::5]
                                + readers[4::5]), ("pending", readers[::5])):
            added = store.add_many(chosen, status=status, source="test", now=NOW)
            assert {a.outcome for a in added} == {AddOutcome.CREATED}
        ids = [sub.id for sub in store.iter_subscribers(batch=100)]
        assert len(ids) == total == len(set(ids))
        assert ids == sorted(ids)
        pending = list(store.iter_subscribers("pending", batch=7))
        assert len(pending) == total // 5 and all(sub.status == "pending" for sub in pending)
        assert [s.id for s in pending] == sorted(s.id for s in pending)
        # A batch is fetched only when the previous one is used up: the lock is free between.
        stream = store.iter_subscribers(batch=100)
        next(stream)
        active(store, "late@example.org")
        assert sum(1 for _ in stream) >= total - 1


# -- ledger ----------------------------------------------------------------------------------

@pytest.mark.slow  # eight threads race through moto's DynamoDB, which serialises each call
def test_claim_is_exclusive_under_eight_threads(backend):
    backend.open().close()
    shared = backend.open()
    own = [backend.open() for _ in range(4)]
    # 20 races on DynamoDB: moto answers one request at a time, and every loser reads the
    # issue's ledger, so each race there costs a round of eight requests.
    count = 40 if backend.name == "sqlite" else 20
    sids = [f"{n:024x}" for n in range(count)]
    wins: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        store = own[n] if n < 4 else shared  # half on their own client, half sharing one
        for sid in sids:
            barrier.wait()
            if store.claim(ISSUE, sid, NOW):
                with lock:
                    wins.append(sid)
                store.mark_sent(ISSUE, sid, f"msg-{sid}", NOW)
            else:
                store.ledger_counts(ISSUE)

    together(*(functools.partial(worker, n) for n in range(8)))
    assert sorted(wins) == sids  # every subscriber claimed exactly once
    assert shared.ledger_counts(ISSUE) == {"sending": 0, "sent": count, "failed": 0,
                                           "unconfirmed": 0}
    for store in [shared, *own]:
        store.close()


_CLAIMER = """
import json, random, sys, time
from datetime import UTC, datetime
from pathlib import Path
from subscribers.store.sqlite import SqliteStore
path, go, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
sids = [f"{n:024x}" for n in range(300)]
random.Random(seed).shuffle(sids)
with SqliteStore.open(path) as store:
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    won = [sid for sid in sids if store.claim("2026-W48", sid, datetime.now(UTC))]
print(json.dumps(won))
"""


@pytest.mark.subprocess
def test_claim_is_exclusive_across_processes(path, tmp_path):
    SqliteStore.open(path).close()
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIMER, str(path), str(go), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(3)]
    for proc in procs:  # all three have the store open and wait: they start together
        assert proc.stdout is not None and proc.stderr is not None  # both piped
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    go.touch()
    won: list[list[str]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        won.append(json.loads(out))
    everything = [sid for part in won for sid in part]
    assert len(everything) == 300 == len(set(everything))
    with SqliteStore.open(path) as store:
        assert store.ledger_counts(ISSUE)["sending"] == 300


@pytest.mark.subprocess
def test_a_claim_survives_a_killed_process(path):
    """Committed at once: a process killed right after claiming leaves the claim behind."""
    script = ("import os, signal, sys\nfrom datetime import UTC, datetime\n"
              "from pathlib import Path\nfrom subscribers.store.sqlite import SqliteStore\n"
              "store = SqliteStore.open(Path(sys.argv[1]))\n"
              "store.claim('2026-W48', 'a' * 24, datetime.now(UTC))\n"
              "store.mark_handed_over('2026-W48', 'a' * 24)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], check=False, timeout=60)
    assert proc.returncode != 0
    with SqliteStore.open(path) as store:
        assert store.ledger(ISSUE)["a" * 24].status == "sending"
        assert not store.claim(ISSUE, "a" * 24, NOW)
        assert store.expire_in_flight(ISSUE, NOW) == 1


def test_expire_in_flight_turns_leftover_claims_unconfirmed(store):
    done, caught = "1" * 24, "2" * 24
    assert store.claim(ISSUE, done, NOW) and store.claim(ISSUE, caught, NOW)
    store.mark_handed_over(ISSUE, caught)  # the run died in the transport call
    store.mark_sent(ISSUE, done, "ses-1", NOW)
    assert store.claim("2026-W49", caught, NOW)  # another issue is not touched
    assert store.expire_in_flight(ISSUE, NOW + timedelta(hours=1)) == 1
    entry = store.ledger(ISSUE)[caught]
    assert entry.status == "unconfirmed" and entry.reason
    assert entry.updated_at == NOW + timedelta(hours=1)
    assert store.ledger(ISSUE)[done].status == "sent"
    assert store.ledger("2026-W49")[caught].status == "sending"
    assert not store.claim(ISSUE, caught, NOW)  # never re-sent without asking
    assert store.expire_in_flight(ISSUE, NOW) == 0
    assert list(store.ledger(ISSUE, "unconfirmed")) == [caught]


def test_a_claim_never_handed_over_is_released_not_withheld(store):
    """Nothing left before the hand-over: the claim is released; a handed-over one is withheld."""
    waiting, handed, returned = "1" * 24, "2" * 24, "3" * 24
    for sid in (waiting, handed, returned):
        assert store.claim(ISSUE, sid, NOW)
    store.mark_handed_over(ISSUE, handed)
    store.mark_handed_over(ISSUE, returned)
    store.mark_handed_over(ISSUE, returned, False)  # a 454: not taken, waiting to retry

    assert store.expire_in_flight(ISSUE, NOW) == 1

    assert {sid: e.status for sid, e in store.ledger(ISSUE).items()} == {handed: "unconfirmed"}
    assert store.claim(ISSUE, waiting, NOW) and store.claim(ISSUE, returned, NOW)
    assert not store.claim(ISSUE, handed, NOW)
    # A retried claim starts not handed over again.
    store.mark_unconfirmed(ISSUE, waiting, "timeout", NOW)
    assert store.claim(ISSUE, waiting, NOW, retry=True)
    assert store.expire_in_flight(ISSUE, NOW) == 0
    assert set(store.ledger(ISSUE)) == {handed}
    # Noting a hand-over on a settled row changes nothing.
    store.mark_handed_over(ISSUE, handed)
    assert store.ledger(ISSUE)[handed].status == "unconfirmed"


def test_retry_takes_over_only_what_was_not_delivered(store):
    rows = {name: f"{n:024x}" for n, name in enumerate(
        ["sent", "permanent", "temporary", "unconfirmed", "sending"])}
    for sid in rows.values():
        assert store.claim(ISSUE, sid, NOW)
    store.mark_sent(ISSUE, rows["sent"], "m-1", NOW)
    store.mark_failed(ISSUE, rows["permanent"], "550 no such user", True, NOW)
    store.mark_failed(ISSUE, rows["temporary"], "454 throttling", False, NOW)
    store.mark_unconfirmed(ISSUE, rows["unconfirmed"], "timeout", NOW)

    assert not any(store.claim(ISSUE, sid, NOW) for sid in rows.values())
    assert [name for name, sid in rows.items()
            if store.claim(ISSUE, sid, NOW, retry_temporary=True)] == ["temporary"]
    store.mark_failed(ISSUE, rows["temporary"], "454 throttling", False, NOW)
    taken = [name for name, sid in rows.items() if store.claim(ISSUE, sid, NOW, retry=True)]
    assert taken == ["temporary", "unconfirmed"]
    ledger = store.ledger(ISSUE)
    assert ledger[rows["temporary"]].attempts == 3
    assert ledger[rows["unconfirmed"]].attempts == 2
    assert ledger[rows["unconfirmed"]].status == "sending"
    assert ledger[rows["unconfirmed"]].reason is None
    assert ledger[rows["sent"]].message_id == "m-1" and ledger[rows["sent"]].attempts == 1
    assert ledger[rows["permanent"]].permanent is True
    assert store.ledger_entry(ISSUE, rows["permanent"]) == ledger[rows["permanent"]]
    assert store.ledger_entry(ISSUE, "f" * 24) is None
    # Taken over once only: a second retry finds it `sending`.
    assert not store.claim(ISSUE, rows["unconfirmed"], NOW, retry=True)


def test_a_delivery_is_never_downgraded_and_release_drops_only_claims(store):
    sid, other = "1" * 24, "2" * 24
    assert store.claim(ISSUE, sid, NOW)
    store.mark_sent(ISSUE, sid, "m-1", NOW)
    store.mark_failed(ISSUE, sid, "late error", False, NOW)
    store.mark_unconfirmed(ISSUE, sid, "late timeout", NOW)
    assert store.ledger(ISSUE)[sid].status == "sent"
    assert store.release(ISSUE, sid) is False
    assert store.claim(ISSUE, other, NOW)
    assert store.release(ISSUE, other) is True
    assert other not in store.ledger(ISSUE)
    assert store.claim(ISSUE, other, NOW)  # released: the next run sends it normally
    # The transport's word is recorded even over an expired claim.
    store.expire_in_flight(ISSUE, NOW)
    store.mark_sent(ISSUE, other, "m-2", NOW)
    assert store.ledger_counts(ISSUE) == {"sending": 0, "sent": 2, "failed": 0,
                                          "unconfirmed": 0}


# -- the subscription app's needs ---------------------------------------------------------------

def test_request_subscription_stores_pending_and_never_touches_an_active_reader(store):
    first = store.request_subscription("New@Example.org", "en", source="web", now=NOW,
                                       areas=["rocm"])
    assert first.outcome.value == "created"
    assert first.subscriber.status == "pending" and first.subscriber.consent_at is None
    sid = first.subscriber.id
    again = store.request_subscription("new@example.org", "zh", source="web", now=NOW,
                                       areas=["multimodal", "rocm"])
    assert again.outcome.value == "existing"
    assert (again.subscriber.layout, again.subscriber.areas) == ("zh", ("multimodal", "rocm"))
    assert store.set_status(sid, "active", NOW, source="web").areas == ("multimodal", "rocm")
    # An active reader's layout and areas are not the business of an unproven request...
    kept = store.request_subscription("new@example.org", "en", source="web", now=NOW,
                                      areas=["tpu"])
    assert kept.outcome.value == "existing"
    assert (kept.subscriber.layout, kept.subscriber.areas) == ("zh", ("multimodal", "rocm"))
    store.set_status(sid, "unsubscribed", NOW)
    # ...but a leaver's request, refused, sets the layout and (given none) clears the areas.
    left = store.request_subscription("new@example.org", "en", source="web", now=NOW)
    assert left.outcome.value == "refused-reactivation"
    assert left.subscriber.status == "unsubscribed"
    assert (left.subscriber.layout, left.subscriber.areas) == ("en", ())
    store.remove("new@example.org", NOW)
    gone = store.request_subscription("new@example.org", "en", source="web", now=NOW)
    assert gone.outcome.value == "suppressed" and gone.subscriber is None
    assert store.find("new@example.org") is None


def test_confirmation_records_consent_and_its_client(store):
    sid = store.request_subscription("c@example.org", "zh-en", source="web",
                                     now=NOW).subscriber.id
    later = NOW + timedelta(hours=1)
    confirmed = store.set_status(sid, "active", later, source="web", client="203.0.113.9")
    assert confirmed.consent_at == later and confirmed.confirmed_at == later
    assert confirmed.consent_source == "web" and confirmed.consent_ip == "203.0.113.9"
    again = store.set_status(sid, "active", later + timedelta(days=1), source="mail",
                             client="198.51.100.1")
    assert again == confirmed  # confirming twice changes nothing (link scanners click first)


def test_each_backend_confirms_only_a_pending_subscriber_as_the_rule_says(store):
    """A refused confirmation changes nothing, consent included: no old link revives a leaver."""
    later = NOW + timedelta(hours=1)
    for status in STATUSES:
        sid = store.add(f"{status}@example.org", source="web", now=NOW).subscriber.id
        if status != "pending":
            store.set_status(sid, "active", NOW, source="web", client="198.51.100.1")
            store.set_status(sid, status, NOW)
        before = store.get(sid)
        got = store.set_status(sid, "active", later, source="web", client="203.0.113.9",
                               only_from=CONFIRMABLE)
        assert got.status == after_confirmation(status), status
        assert store.get(sid) == got
        if status == "pending":
            assert (got.consent_at, got.consent_ip) == (later, "203.0.113.9")
        else:
            assert got == before, status
    with pytest.raises(UnknownSubscriber):
        store.set_status("0" * 24, "active", NOW, only_from=CONFIRMABLE)


def test_mail_events_count_transient_bounces_in_a_row(store):
    """A limit of 3 reached in a row: the rule comparison below only runs a limit of 2."""
    sid = active(store, "b@example.org")
    t1 = store.record_mail_event(sid, "bounce-transient", NOW, transient_limit=3)
    assert t1.status == "active" and t1.transient_bounces == 1
    store.record_mail_event(sid, "delivery", NOW, transient_limit=3)
    assert store.get(sid).transient_bounces == 0  # a delivery ends the run
    for _ in (1, 2):
        assert store.record_mail_event(sid, "bounce-transient", NOW,
                                       transient_limit=3).status == "active"
    assert store.record_mail_event(sid, "bounce-transient", NOW,
                                   transient_limit=3).status == "bounced"
    back = store.set_status(sid, "active", NOW, source="web")  # a new confirmation
    assert back.transient_bounces == 0
    with pytest.raises(UnknownSubscriber):
        store.record_mail_event("f" * 24, "complaint", NOW, transient_limit=3)
    with pytest.raises(ValueError):
        store.record_mail_event(sid, "opened", NOW, transient_limit=3)


def test_each_backend_applies_mail_events_as_the_rules_say(store):
    """Each store's updates match rules.after_mail_event from every status, count and event age."""
    t0 = NOW + timedelta(minutes=10)
    times = {"untimed": None, "older": t0 - timedelta(minutes=5),
             "newer": t0 + timedelta(minutes=5)}
    cases = [(status, count, kind, when) for status in STATUSES for count in (0, 1)
             for kind in MAIL_EVENTS
             for when in (times if kind in ("bounce-transient", "delivery") else ["untimed"])]
    ids: dict[int, str] = {}
    for start in ("pending", "active"):  # one batch each: fewer requests than one by one
        mine = [n for n, case in enumerate(cases) if (case[0] == "pending") == (start == "pending")]
        added = store.add_many([NewSubscriber(f"rule{n}@example.org", "en") for n in mine],
                               status=start, source="test", now=NOW)
        ids.update((n, result.subscriber.id) for n, result in zip(mine, added, strict=True)
                   if result.subscriber is not None)
    wrong = []
    for n, (status, count, kind, when) in enumerate(cases):
        # The latest event applied happened at t0: a counted bounce, or a delivery.
        store.record_mail_event(ids[n], "bounce-transient" if count else "delivery", NOW,
                                transient_limit=99, occurred_at=t0)
        if status not in ("pending", "active"):
            store.set_status(ids[n], status, NOW)
        at = times[when]
        expected = after_mail_event(MailState(status, count, encode_time(t0)), kind,
                                    transient_limit=2,
                                    occurred_at=None if at is None else encode_time(at))
        got = store.record_mail_event(ids[n], kind, NOW, transient_limit=2, occurred_at=at)
        if (got.status, got.transient_bounces) != (expected.status,
                                                   expected.transient_bounces):
            wrong.append(f"{status}/{count} + {kind} ({when}): got {got.status}/"
                         f"{got.transient_bounces}, the rule says {expected.status}/"
                         f"{expected.transient_bounces}")
    assert len(ids) == len(cases) == 80 and wrong == []


def test_each_backend_keeps_the_ledger_as_the_rules_say(store):
    """Each store's ledger writes match rules.after_claim/outcome/release from every row state."""
    issue = "2026-W48"
    setups = {  # how a row gets to each state, and the state the rules say it is in
        "none": ([], LedgerRow()),
        "sending": (["claim"], LedgerRow("sending", False, 1)),
        "sent": (["claim", "sent"], LedgerRow("sent", False, 1)),
        "temporary": (["claim", "failed temporary"], LedgerRow("failed", False, 1)),
        "permanent": (["claim", "failed permanent"], LedgerRow("failed", True, 1)),
        "unconfirmed": (["claim", "unconfirmed"], LedgerRow("unconfirmed", False, 1)),
    }
    writes = ["claim", "claim retry", "claim retry_temporary", "sent", "failed temporary",
              "failed permanent", "unconfirmed", "release"]

    def entry(subscriber: str) -> LedgerRow:
        found = store.ledger_entry(issue, subscriber)
        return (LedgerRow() if found is None
                else LedgerRow(found.status, found.permanent, found.attempts))

    def apply(subscriber: str, write: str) -> bool | None:
        name, _, option = write.partition(" ")
        if name == "claim":
            return bool(store.claim(issue, subscriber, NOW, retry=option == "retry",
                                    retry_temporary=option == "retry_temporary"))
        if name == "sent":
            store.mark_sent(issue, subscriber, "msg-1", NOW)
        elif name == "failed":
            store.mark_failed(issue, subscriber, "refused", option == "permanent", NOW)
        elif name == "unconfirmed":
            store.mark_unconfirmed(issue, subscriber, "timed out", NOW)
        else:
            return bool(store.release(issue, subscriber))
        return None

    wrong = []
    for n, ((state, (steps, before)), write) in enumerate(
            (setup, write) for setup in setups.items() for write in writes):
        subscriber = f"{n:024x}"
        for step in steps:
            apply(subscriber, step)
        assert entry(subscriber) == before, state  # the setup reached the state it names
        name, _, option = write.partition(" ")
        if name == "claim":
            claimed = after_claim(before, retry=option == "retry",
                                  retry_temporary=option == "retry_temporary")
            expected, answer = claimed or before, claimed is not None
        elif name == "release":
            expected = after_release(before)
            answer = expected != before
        else:
            expected = after_outcome(before, name, permanent=option == "permanent")
            answer = None
        got_answer = apply(subscriber, write)
        got = entry(subscriber)
        if (got, got_answer) != (expected, answer):
            wrong.append(f"{state} + {write}: got {got} ({got_answer}), the rules say "
                         f"{expected} ({answer})")
    assert wrong == []


def test_the_mail_event_rule_itself():
    """The rule's corners, which the comparison above misses if rule and store are wrong alike."""
    active_ = MailState("active", 2, "2026-11-30T01:10:00.000000Z")
    assert after_mail_event(active_, "bounce-transient", transient_limit=3).status == "bounced"
    assert after_mail_event(active_, "bounce-transient", transient_limit=4) == MailState(
        "active", 3, active_.mail_event_at)
    assert after_mail_event(MailState("active"), "bounce-permanent",
                            transient_limit=3).status == "bounced"
    assert after_mail_event(MailState("unsubscribed"), "bounce-permanent",
                            transient_limit=3).status == "unsubscribed"
    assert after_mail_event(MailState("bounced"), "complaint",
                            transient_limit=3).status == "complained"
    assert after_mail_event(MailState("complained"), "bounce-permanent",
                            transient_limit=3).status == "complained"
    older = "2026-11-30T01:05:00.000000Z"
    assert after_mail_event(active_, "delivery", transient_limit=3, occurred_at=older) is active_
    assert after_mail_event(active_, "delivery", transient_limit=3).transient_bounces == 0
    with pytest.raises(ValueError):
        after_mail_event(active_, "opened", transient_limit=3)


def test_an_old_event_arriving_late_does_not_undo_a_newer_one(store):
    """SNS keeps no order and redelivers: the count follows when the events happened."""
    sid = active(store, "late@example.org")
    at = [NOW + timedelta(minutes=n) for n in range(6)]

    def event(kind: str, when: datetime):
        return store.record_mail_event(sid, kind, NOW + timedelta(hours=1), transient_limit=3,
                                       occurred_at=when)

    event("delivery", at[0])
    event("bounce-transient", at[1])
    assert event("bounce-transient", at[2]).transient_bounces == 2
    # The delivery of minute 0, replayed: older than both bounces, so they stay counted.
    assert event("delivery", at[0]).transient_bounces == 2
    assert event("bounce-transient", at[3]).status == "bounced"  # the third in a row

    other = active(store, "order@example.org")
    store.record_mail_event(other, "delivery", NOW, transient_limit=3, occurred_at=at[5])
    # A bounce of minute 4 arriving after the delivery of minute 5: that run had ended.
    assert store.record_mail_event(other, "bounce-transient", NOW, transient_limit=3,
                                   occurred_at=at[4]).transient_bounces == 0
    # A permanent bounce stops mail whenever it arrives.
    assert store.record_mail_event(other, "bounce-permanent", NOW, transient_limit=3,
                                   occurred_at=at[1]).status == "bounced"
    # Without a time an event applies as it comes.
    untimed = active(store, "untimed@example.org")
    store.record_mail_event(untimed, "bounce-transient", NOW, transient_limit=3,
                            occurred_at=at[3])
    assert store.record_mail_event(untimed, "delivery", NOW,
                                   transient_limit=3).transient_bounces == 0


def test_first_time_is_true_once_forget_undoes_it_and_purge_drops_old_keys(store):
    assert store.first_time("sns:1", NOW)
    assert not store.first_time("sns:1", NOW)
    store.forget("sns:1")
    assert store.first_time("sns:1", NOW)
    store.first_time("sns:2", NOW + timedelta(days=10))
    assert store.purge_seen(NOW + timedelta(days=1)) == 1
    assert store.first_time("sns:1", NOW) and not store.first_time("sns:2", NOW)


def test_quota_counts_in_a_fixed_window_and_takes_a_use_back(store):
    window = timedelta(hours=1)
    assert [store.take_quota("k", NOW, limit=2, window=window) for _ in range(3)] == [
        True, True, False]
    assert not store.take_quota("k", NOW + timedelta(minutes=59), limit=2, window=window)
    assert store.take_quota("other", NOW, limit=2, window=window)
    store.return_quota("k")
    assert store.take_quota("k", NOW, limit=2, window=window)
    assert not store.take_quota("k", NOW, limit=2, window=window)
    assert store.take_quota("k", NOW + timedelta(hours=1), limit=2, window=window)
    store.return_quota("nobody")  # nothing to return: nothing happens
    assert store.take_quota("nobody", NOW, limit=1, window=window)


# -- production: feedback, shards, leases ----------------------------------------------------------

def test_feedback_is_noted_on_the_ledger_row_of_its_message(store):
    a, b = active(store, "a@example.org"), active(store, "b@example.org")
    for sid, mid in ((a, "ses-a"), (b, "ses-b")):
        assert store.claim(ISSUE, sid, NOW)
        store.mark_sent(ISSUE, sid, mid, NOW)
    assert store.record_feedback("ses-a", "bounce", NOW) == ISSUE
    assert store.record_feedback("ses-b", "complaint", NOW) == ISSUE
    assert store.record_feedback("ses-b", "bounce", NOW) == ISSUE  # a complaint stays one
    assert store.record_feedback("unknown", "complaint", NOW) is None
    assert store.feedback_counts(ISSUE) == {"bounce": 1, "complaint": 1}
    assert store.feedback_counts("2026-W01") == {"bounce": 0, "complaint": 0}
    with pytest.raises(ValueError):
        store.record_feedback("ses-a", "opened", NOW)


def test_a_refusal_saying_the_mailbox_is_gone_counts_as_a_bounce(store):
    """A 550 5.1.1 (or a returned message) is noted on the issue's row, for its bounce rate."""
    gone, refused, sent = (active(store, f"{n}@example.org") for n in ("gone", "no", "ok"))
    for sid in (gone, refused, sent):
        assert store.claim(ISSUE, sid, NOW)
    store.mark_failed(ISSUE, gone, "550 5.1.1 User unknown", True, NOW)
    assert store.note_feedback(ISSUE, gone, "bounce")
    store.mark_failed(ISSUE, refused, "550 5.7.1 policy", True, NOW)
    store.mark_sent(ISSUE, sent, "queued-1", NOW)
    assert store.feedback_counts(ISSUE) == {"bounce": 1, "complaint": 0}
    # A bounce notification for a message that was sent; then its reader complains.
    assert store.note_feedback(ISSUE, sent, "bounce")
    assert store.note_feedback(ISSUE, sent, "complaint")
    assert store.note_feedback(ISSUE, sent, "bounce")  # a complaint stays one
    assert store.feedback_counts(ISSUE) == {"bounce": 1, "complaint": 1}
    assert not store.note_feedback("2026-W01", gone, "bounce")  # no such row: nothing made
    assert store.ledger("2026-W01") == {}
    with pytest.raises(ValueError):
        store.note_feedback(ISSUE, gone, "opened")


def test_expire_in_flight_of_one_shard_leaves_the_others_alone(store):
    from subscribers.shards import Shard

    ids = [active(store, f"s{n}@example.org") for n in range(40)]
    for sid in ids:
        assert store.claim(ISSUE, sid, NOW)
        store.mark_handed_over(ISSUE, sid)
    first = Shard(1, 2)
    mine = [sid for sid in ids if sid in first]
    assert 0 < len(mine) < len(ids)
    assert store.expire_in_flight(ISSUE, NOW, shard=first) == len(mine)
    ledger = store.ledger(ISSUE)
    assert {sid for sid, e in ledger.items() if e.status == "unconfirmed"} == set(mine)
    assert store.expire_in_flight(ISSUE, NOW) == len(ids) - len(mine)


def test_a_lease_is_held_by_one_owner_until_it_expires(store):
    ttl = timedelta(minutes=5)
    first = store.acquire_lease("send:2026-W48", "host-a:1", NOW, ttl)
    assert first.owner == "host-a:1" and first.expires_at == NOW + ttl
    held = store.acquire_lease("send:2026-W48", "host-b:2", NOW + timedelta(minutes=1), ttl)
    assert held == first  # the second taker is told who holds it
    assert store.renew_lease("send:2026-W48", "host-a:1", NOW + timedelta(minutes=4), ttl)
    assert not store.renew_lease("send:2026-W48", "host-b:2", NOW, ttl)
    still = store.acquire_lease("send:2026-W48", "host-b:2", NOW + timedelta(minutes=8), ttl)
    assert still.owner == "host-a:1"  # renewed until 9 minutes
    taken = store.acquire_lease("send:2026-W48", "host-b:2", NOW + timedelta(minutes=9), ttl)
    assert taken.owner == "host-b:2"  # stale: taken over
    assert not store.renew_lease("send:2026-W48", "host-a:1", NOW + timedelta(minutes=9), ttl)
    store.release_lease("send:2026-W48", "host-a:1")  # not the holder: nothing happens
    assert store.acquire_lease("send:2026-W48", "c", NOW + timedelta(minutes=10),
                               ttl).owner == "host-b:2"
    store.release_lease("send:2026-W48", "host-b:2")
    assert store.acquire_lease("send:2026-W48", "c", NOW + timedelta(minutes=10),
                               ttl).owner == "c"
    assert store.acquire_lease("other", "d", NOW, ttl).owner == "d"  # leases are per name


def test_stores_at_once_agree_on_the_lease_first_send_quota_areas_and_bounces(backend):
    """Also: each transient bounce is decided from the subscriber as read, and one applied
    meanwhile is read again, so every bounce counts."""
    sid = active(backend.open(), "busy@example.org")
    stores = [backend.open() for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    winners = []
    answers: dict[int, str] = {}
    taken: list[bool] = []
    lock = threading.Lock()

    def take(n: int, s: SubscriberStore) -> None:
        barrier.wait()
        lease = s.acquire_lease("send:x", f"owner-{n}", NOW, timedelta(minutes=5))
        if lease.owner == f"owner-{n}":
            winners.append(n)
        barrier.wait()
        answers[n] = s.record_sent(ISSUE, f"{n:064x}", NOW).content_hash
        barrier.wait()
        s.note_areas([f"t{n}", "shared"])
        for _ in range(20):
            ok = s.take_quota("shared", NOW, limit=30, window=timedelta(hours=1))
            with lock:
                taken.append(ok)
        for _ in range(5):
            s.record_mail_event(sid, "bounce-transient", NOW, transient_limit=99)

    together(*(functools.partial(take, n, each) for n, each in enumerate(stores)))
    assert len(winners) == 1
    assert len(set(answers.values())) == 1 and len(answers) == len(stores)
    assert taken.count(True) == 30 and len(taken) == 120
    assert stores[0].known_areas() == ("shared", "t0", "t1", "t2", "t3", "t4", "t5")
    assert stores[0].get(sid).transient_bounces == 5 * len(stores)


# -- what each issue went out as ------------------------------------------------------------

def test_the_first_send_of_an_issue_is_noted_once_and_only_a_correction_replaces_it(store):
    assert store.sent_issue(ISSUE) is None
    first = store.record_sent(ISSUE, "a" * 64, NOW)
    assert (first.content_hash, first.first_hash, first.first_sent_at) == ("a" * 64,
                                                                          "a" * 64, NOW)
    assert first.corrected_on is None and first.correction is None
    # Another issue under the same week's name is told what went out, and changes nothing.
    assert store.record_sent(ISSUE, "b" * 64, NOW + timedelta(hours=1)) == first
    assert store.sent_issue(ISSUE) == first
    # A correction replaces only the hash it names.
    assert store.record_correction(ISSUE, "c" * 64, replacing="b" * 64,
                                   corrected_on="2026-12-01", reason="x") == first
    corrected = store.record_correction(ISSUE, "c" * 64, replacing="a" * 64,
                                        corrected_on="2026-12-01", reason="typo in #1")
    assert corrected is not None
    assert (corrected.content_hash, corrected.first_hash) == ("c" * 64, "a" * 64)
    assert (corrected.corrected_on, corrected.correction) == ("2026-12-01", "typo in #1")
    assert corrected.first_sent_at == NOW
    assert store.sent_issue(ISSUE) == corrected
    assert store.record_sent(ISSUE, "c" * 64, NOW) == corrected
    # Nothing sent: nothing to correct, and nothing is created.
    assert store.record_correction("2026-W49", "d" * 64, replacing="a" * 64,
                                   corrected_on="2026-12-08", reason="x") is None
    assert store.sent_issue("2026-W49") is None


# -- interests: the areas a subscriber follows, the variants, the catalog ------------------

HOSTILE_AREAS = ["  KV Connector ", "rocm", "rocm", "../x", "<script>alert(1)</script>",
                 "%%unsubscribe_url%%", "x" * 500, "", "a\nb", "a\x00b", "多模态"]
CLEANED = ("%%unsubscribe_url%%", "../x", "<script>alert(1)</script>", "a-b",
           "kv-connector", "rocm", "多模态")


def requests_made(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every request ``store`` sends from now on: SQL statements on SQLite, API calls on
    DynamoDB (each page of a Query or Scan is one)."""
    made: list[str] = []
    if isinstance(store, SqliteStore):
        store._conn.set_trace_callback(made.append)
    else:
        original = store._call

        def call(table: str, operation: str, **params: Any) -> Any:
            made.append(operation)
            return original(table, operation, **params)

        monkeypatch.setattr(store, "_call", call)
    return made


def test_areas_are_stored_cleaned_and_read_back_everywhere(backend, store):
    created = store.add("a@example.org", "en", status="active", source="test", now=NOW,
                        areas=HOSTILE_AREAS).subscriber
    assert created.areas == CLEANED
    again = backend.open()  # another connection or client: what was stored, not a cache
    assert again.get(created.id).areas == CLEANED
    assert again.find("A@example.org").areas == CLEANED
    assert [s.areas for s in again.iter_subscribers("active")] == [CLEANED]
    plain = store.add("b@example.org", source="test", now=NOW).subscriber
    assert plain.areas == () and again.get(plain.id).areas == ()


def test_the_preferences_update_sets_keeps_or_clears_the_areas(store):
    sid = active(store, "p@example.org", "zh")
    chosen = store.set_layout(sid, "en", NOW, areas=["ROCm", "kv-connector"])
    assert (chosen.layout, chosen.areas) == ("en", ("kv-connector", "rocm"))
    kept = store.set_layout(sid, "zh-en", NOW)  # areas=None: the layout only
    assert (kept.layout, kept.areas) == ("zh-en", ("kv-connector", "rocm"))
    cleared = store.set_layout(sid, "zh-en", NOW, areas=[])
    assert cleared.areas == () and store.get(sid).areas == ()
    assert store.set_layout(sid, "zh-en", NOW, areas=["", " ", "y" * 61]).areas == ()
    with pytest.raises(UnknownSubscriber):
        store.set_layout("f" * 24, "en", NOW, areas=["rocm"])


def test_variant_choices_are_the_distinct_choices_of_active_readers(store, monkeypatch):
    assert store.variant_choices() == []
    for n in range(6):
        store.add(f"r{n}@example.org", "zh-en", status="active", source="test", now=NOW,
                  areas=["rocm", "kv-connector"] if n % 2 else ["rocm"])
    store.add("en@example.org", "en", status="active", source="test", now=NOW,
              areas=["rocm"])
    active(store, "plain@example.org")  # no areas: the plain layout, not a choice
    store.add("pending@example.org", "zh", source="test", now=NOW, areas=["tpu"])
    gone = active(store, "gone@example.org")
    store.set_layout(gone, "zh", NOW, areas=["cpu"])
    store.set_status(gone, "unsubscribed", NOW)
    made = requests_made(store, monkeypatch)
    assert store.variant_choices() == [("en", ("rocm",)),
                                       ("zh-en", ("kv-connector", "rocm")),
                                       ("zh-en", ("rocm",))]
    assert len(made) == 1, made  # one query for the whole list


def test_the_area_catalog_only_grows_and_holds_cleaned_names(backend, store):
    assert store.known_areas() == ()
    store.note_areas([])
    store.note_areas(["ROCm", "kv connector", "", "z" * 61, "a\tb", "<b>x</b>"])
    store.note_areas(["rocm", "multimodal"])
    expected = ("<b>x</b>", "a-b", "kv-connector", "multimodal", "rocm")
    assert backend.open().known_areas() == expected
    many = [f"area-{n:03}" for n in range(120)]  # more than a reader may follow at once
    store.note_areas(many)
    assert set(many) <= set(store.known_areas())
    assert len(store.known_areas()) == 125


def test_areas_edited_by_hand_read_as_what_could_be_stored(path):
    with SqliteStore.open(path) as store:
        good = active(store, "h1@example.org")
        bad = active(store, "h2@example.org")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE subscribers SET areas = ? WHERE id = ?",
                 ('["ROCm", 3, "rocm", "x\\u0000y"]', good))
    conn.execute("UPDATE subscribers SET areas = 'not json' WHERE id = ?", (bad,))
    conn.commit()
    conn.close()
    with SqliteStore.open(path) as store:
        got_good, got_bad = store.get(good), store.get(bad)
        assert got_good is not None and got_bad is not None
        assert got_good.areas == ("rocm",)
        assert got_bad.areas == ()
        assert store.variant_choices() == [("zh-en", ("rocm",))]


@pytest.mark.aws
def test_dynamo_add_many_decides_again_what_changed_since_its_read(dynamo, monkeypatch):
    """A writer racing add_many's read and writes: those entries go through add, none doubled."""
    store = dynamo.open()
    other = dynamo.open()
    store.add("waiting@example.org", source="web", now=NOW)
    read = DynamoStore._existing

    def stale(self, normals):
        found = read(self, normals)
        other.add("racer@example.org", "zh", status="active", source="web", now=NOW)
        other.add("waiting@example.org", status="active", source="web", now=NOW)
        return {key: sub for key, sub in found.items() if key != "racer@example.org"}

    monkeypatch.setattr(DynamoStore, "_existing", stale)
    results = store.add_many([NewSubscriber("Racer@example.org", "en"),
                              NewSubscriber("waiting@example.org"),
                              NewSubscriber("racer@EXAMPLE.org"),
                              NewSubscriber("fresh@example.org")],
                             status="active", source="import:t.csv", now=NOW)
    assert [r.outcome for r in results] == [AddOutcome.EXISTING, AddOutcome.EXISTING,
                                            AddOutcome.EXISTING, AddOutcome.CREATED]
    racer = store.find("racer@example.org")
    assert racer is not None and racer.layout == "zh" and racer.consent_source == "web"
    assert results[0].subscriber == racer == results[2].subscriber
    assert len(dynamo.keys("sub#")) == 3
