"""``newsletter store migrate --to dynamodb``: a SQLite store with every kind of record is
copied into DynamoDB (moto), which then answers as SQLite did; running it again copies nothing;
an address DynamoDB holds under another id is reported, not overwritten. The handler is reached
through a parser ``store_commands.add_parser`` registered on, as pipeline/cli/ does.
"""

from __future__ import annotations

import argparse
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from pipeline.cli.store import add_parser
from pipeline.errors import BlockedError, UsageError
from subscribers.errors import StoreError
from subscribers.model import STATUSES
from subscribers.store.dynamo import DynamoStore
from subscribers.store.sqlite import FILE_NAME, MIGRATIONS, SqliteStore

pytest_plugins = ["support.dynamo_support"]

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
ISSUES = ("2026-W47", "2026-W48")


def run(settings: Any, *argv: str) -> int:
    """``newsletter store migrate …`` through a parser ``add_parser`` registered on."""
    parser = argparse.ArgumentParser(prog="newsletter")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    add_parser(commands)
    args = parser.parse_args(["store", *argv])
    code: int = args.handler(args, settings)
    return code


def sqlite_path(settings: Any) -> Path:
    path: Path = settings.resolve(settings.paths.data_dir) / FILE_NAME
    return path


@pytest.fixture
def source(dynamo) -> dict[str, Any]:
    """A SQLite store (where ``[paths] data_dir`` puts it) with every kind of record; what
    was made, by name."""
    made: dict[str, Any] = {}
    with SqliteStore.open(sqlite_path(dynamo.settings)) as store:
        for n, status in enumerate(STATUSES):
            sub = store.add(f"{status}.Reader@Example.org", ("zh-en", "en", "zh", "en-zh")[n % 4],
                            status="active", source="import:list.csv", now=NOW).subscriber
            assert sub is not None
            if status != "active":
                store.set_status(sub.id, status, NOW + timedelta(hours=n))
            made[status] = sub.id
        fresh = store.request_subscription("new@example.org", "en", source="web", now=NOW)
        assert fresh.subscriber is not None
        made["fresh"] = fresh.subscriber.id
        confirmed = store.request_subscription("web@example.org", "zh", source="web", now=NOW,
                                               areas=["ROCm", "kv-connector"])
        assert confirmed.subscriber is not None
        store.note_areas(["rocm", "kv-connector"])
        store.set_status(confirmed.subscriber.id, "active", NOW + timedelta(minutes=3),
                         source="web", client="203.0.113.9")
        store.record_mail_event(confirmed.subscriber.id, "bounce-transient", NOW,
                                transient_limit=3, occurred_at=NOW - timedelta(minutes=1))
        made["web"] = confirmed.subscriber.id
        gone = store.add("gone@example.org", status="active", source="cli", now=NOW).subscriber
        assert gone is not None
        readers = [made["active"], made["web"], gone.id]
        for week, issue in enumerate(ISSUES):
            for n, sid in enumerate(readers):
                assert store.claim(issue, sid, NOW + timedelta(weeks=week))
                store.mark_sent(issue, sid, f"ses-{issue}-{n}", NOW + timedelta(weeks=week))
            store.mark_failed(issue, made["bounced"], "550 no such user", True, NOW)
            store.mark_unconfirmed(issue, made["pending"], "timeout", NOW)
        assert store.claim(ISSUES[1], made["fresh"], NOW)  # left `sending`, not handed over
        assert store.claim(ISSUES[1], made["unsubscribed"], NOW)  # left `sending`, handed over
        store.mark_handed_over(ISSUES[1], made["unsubscribed"])
        store.record_feedback(f"ses-{ISSUES[0]}-0", "bounce", NOW)
        store.record_feedback(f"ses-{ISSUES[1]}-1", "complaint", NOW)
        store.record_feedback(f"ses-{ISSUES[1]}-0", "bounce", NOW)
        assert store.remove("gone@example.org", NOW)  # suppressed, its ledger rows erased
        assert store.first_time("sns:handled-1", NOW)
        store.record_sent(ISSUES[0], "a" * 64, NOW)
        store.record_sent(ISSUES[1], "b" * 64, NOW)
        store.record_correction(ISSUES[1], "c" * 64, replacing="b" * 64,
                                corrected_on="2026-12-08", reason="a wrong figure in #1")
        made["addresses"] = [sub.email for sub in store.iter_subscribers()]
    return made


def test_everything_is_copied_and_answers_the_same(dynamo, source, capsys):
    assert run(dynamo.settings, "migrate", "--to", "dynamodb", "--dry-run") == 0
    out, _ = capsys.readouterr()
    assert out.startswith("dry run, nothing written")
    assert "would copy 23, 0 already there, 0 conflicting" in out
    assert dynamo.items() == [] and dynamo.items(dynamo.ledger_table) == []

    assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.count("\n") == 1
    # 7 subscribers, 1 suppression, 10 ledger rows (2 issues x 5, gone's 2 erased, two
    # claims), 1 handled key, 2 areas of the catalog, 2 issues sent (one corrected).
    assert "23 copied, 0 already there, 0 conflicting" in out
    assert ("subscribers 7/0/0, suppressions 1/0/0, ledger rows 10/0/0, handled keys 1/0/0, "
            "catalog areas 2/0/0, sent issues 2/0/0") in out

    with SqliteStore.open(sqlite_path(dynamo.settings)) as old, dynamo.open() as new:
        for email in source["addresses"]:
            assert new.find(email) == old.find(email) is not None
            assert new.find(email.upper()) == old.find(email)
        for name in (*STATUSES, "fresh", "web"):
            assert new.get(source[name]) == old.get(source[name]) is not None
        assert new.get(source["web"]).consent_ip == "203.0.113.9"
        assert new.get(source["web"]).transient_bounces == 1
        assert new.get(source["web"]).areas == ("kv-connector", "rocm")
        assert new.variant_choices() == old.variant_choices() == [
            ("zh", ("kv-connector", "rocm"))]
        assert new.known_areas() == old.known_areas() == ("kv-connector", "rocm")
        assert new.count_by() == old.count_by()
        assert new.count_by_status() == old.count_by_status()
        assert [s.id for s in new.iter_subscribers()] == [s.id for s in old.iter_subscribers()]
        for issue in ISSUES:
            assert new.sent_issue(issue) == old.sent_issue(issue) is not None
            assert new.ledger(issue) == old.ledger(issue)
            assert new.ledger_counts(issue) == old.ledger_counts(issue)
            assert new.feedback_counts(issue) == old.feedback_counts(issue)
        assert new.feedback_counts(ISSUES[1]) == {"bounce": 1, "complaint": 1}
        assert new.ledger_entry(ISSUES[1], source["fresh"]).status == "sending"
        assert new.is_suppressed("Gone@example.org") and old.is_suppressed("gone@example.org")
        assert new.find("gone@example.org") is None
        assert new.add("gone@example.org", status="active", source="cli",
                       now=NOW).subscriber is None  # still refused
        assert not new.first_time("sns:handled-1", NOW)
        before = dynamo.dump()
        # Running it again copies nothing.
        assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
        out, err = capsys.readouterr()
        assert err == "" and "0 copied, 23 already there, 0 conflicting" in out
        assert dynamo.dump() == before
        # The ids are kept: a token signed for the SQLite id finds the same person.
        assert new.set_status(source["pending"], "active", NOW, source="web").status == "active"


#: Every table a migration carries, with the order that makes two dumps comparable.
_TABLES = {"subscribers": "id", "suppressions": "email_hash", "seen": "key",
           "area_catalog": "name", "ledger": "issue_id, subscriber_id",
           "sent_issues": "issue_id"}


def _dump(path: Path) -> dict[str, list[dict[str, Any]]]:
    conn = sqlite3.connect(path)
    try:
        conn.row_factory = sqlite3.Row
        return {table: [dict(row) for row in conn.execute(
                    f"SELECT * FROM {table} ORDER BY {order}")]  # noqa: S608
                for table, order in _TABLES.items()}
    finally:
        conn.close()


def test_sqlite_to_dynamodb_and_back_gives_the_same_rows(dynamo, source, capsys, tmp_path):
    """Field by field (``SELECT *``): a column the copy forgets either way fails here."""
    assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
    back = tmp_path / "back" / "subscribers.sqlite3"
    assert run(dynamo.settings, "migrate", "--to", "sqlite", "--to-sqlite", str(back),
               "--dry-run") == 0
    assert "would copy 23" in capsys.readouterr().out and not back.parent.exists()
    assert run(dynamo.settings, "migrate", "--to", "sqlite", "--to-sqlite", str(back)) == 0
    out = capsys.readouterr().out
    assert "23 copied (subscribers 7, suppressions 1, ledger rows 10, handled keys 1, " \
           "catalog areas 2, sent issues 2)" in out
    before, after = _dump(sqlite_path(dynamo.settings)), _dump(back)
    subscribers, ledger = before["subscribers"], before["ledger"]
    assert {row["status"] for row in subscribers} == set(STATUSES)
    assert any(row["mail_event_at"] for row in subscribers)
    assert any(row["areas"] for row in subscribers)
    assert {row["status"] for row in ledger} == {"sending", "sent", "failed", "unconfirmed"}
    assert {row["handed_over"] for row in ledger if row["status"] == "sending"} == {0, 1}
    assert {row["feedback"] for row in ledger} == {None, "bounce", "complaint"}
    assert after == before
    assert [p.name for p in back.parent.iterdir()] == ["subscribers.sqlite3"]  # no leftovers
    with SqliteStore.open(back) as store:  # a store like any other, schema current
        assert store.find("web@example.org") is not None


def test_back_to_sqlite_never_writes_over_a_file_nor_leaves_half_of_one(dynamo, source,
                                                                        tmp_path):
    taken = sqlite_path(dynamo.settings)  # the default: the store that is still there
    before = taken.read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        run(dynamo.settings, "migrate", "--to", "sqlite")
    assert taken.read_bytes() == before
    missing = replace(dynamo.settings, store=replace(dynamo.settings.store,
                                                     subscribers_table="absent"))
    target = tmp_path / "new" / "subscribers.sqlite3"
    with pytest.raises(StoreError):
        run(missing, "migrate", "--to", "sqlite", "--to-sqlite", str(target))
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_an_address_already_in_dynamodb_under_another_id_is_reported_not_overwritten(
        dynamo, source, capsys):
    with dynamo.open() as new:
        theirs = new.request_subscription("Active.Reader@example.org", "en", source="web",
                                          now=NOW + timedelta(days=3)).subscriber
    assert run(dynamo.settings, "migrate", "--to", "dynamodb", "--dry-run") == 0
    out, err = capsys.readouterr()
    assert "would copy 22, 0 already there, 1 conflicting" in out
    assert f"not copied: active.Reader@example.org (id {source['active']})" in err
    assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1
    assert "not copied: active.Reader@example.org" in err
    assert f"under another id ({theirs.id})" in err and source["active"] in err
    assert "22 copied, 0 already there, 1 conflicting" in out
    with dynamo.open() as new:
        assert new.find("active.reader@example.org") == theirs
        assert new.get(source["active"]) is None
    capsys.readouterr()
    assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
    out, _ = capsys.readouterr()
    assert "0 copied, 22 already there, 1 conflicting" in out


#: (table, the row first in the migration's order, its column made larger than an item may
#: be, how the report names the row)
OVERSIZED = {
    "subscriber": ("subscribers", "SELECT id FROM subscribers ORDER BY id LIMIT 1",
                   "UPDATE subscribers SET consent_source = ? WHERE id = ?", "subscriber {}"),
    "ledger row": ("ledger", "SELECT issue_id || '/' || subscriber_id FROM ledger "
                   "ORDER BY issue_id, subscriber_id LIMIT 1",
                   "UPDATE ledger SET reason = ? WHERE issue_id || '/' || subscriber_id = ?",
                   "ledger row {}"),
}


@pytest.mark.parametrize("kind", list(OVERSIZED))
def test_a_row_over_dynamodbs_item_limit_is_named_and_the_rest_copied(dynamo, source, capsys,
                                                                      kind):
    """Named by id, never address; the rest copied; exit 3; once fixed, a rerun copies it alone."""
    _, first, update, named = OVERSIZED[kind]
    with sqlite3.connect(sqlite_path(dynamo.settings)) as conn:
        (row,) = conn.execute(first).fetchone()
        conn.execute(update, ("x" * 410_000, row))
    with pytest.raises(BlockedError) as caught:
        run(dynamo.settings, "migrate", "--to", "dynamodb")
    assert caught.value.exit_code == 3 and "1 record" in str(caught.value)
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and named.format(row) in err
    assert "Item size has exceeded the maximum allowed size" in err
    assert "@" not in err and "xxxx" not in err
    assert ("22 copied, 0 already there, 0 conflicting, not overwritten, 1 refused by "
            "DynamoDB, not copied") in out
    assert "suppressions 1/0/0" in out and "handled keys 1/0/0" in out
    with sqlite3.connect(sqlite_path(dynamo.settings)) as conn:
        conn.execute(update, ("fixed", row))
    assert run(dynamo.settings, "migrate", "--to", "dynamodb") == 0
    out, err = capsys.readouterr()
    assert err == "" and "1 copied, 22 already there, 0 conflicting" in out


def test_a_key_over_dynamodbs_limit_is_named_by_its_start(dynamo, source, capsys):
    key = "mail:" + "k" * 3000  # over 2,048 bytes, DynamoDB's limit for a partition key
    with sqlite3.connect(sqlite_path(dynamo.settings)) as conn:
        conn.execute("INSERT INTO seen (key, at) VALUES (?, ?)", (key, "2026-11-30T01:00:00Z"))
    with pytest.raises(BlockedError):
        run(dynamo.settings, "migrate", "--to", "dynamodb")
    out, err = capsys.readouterr()
    assert f"not copied: handled key {key[:80]}… (3.0 KB in SQLite)" in err
    assert "23 copied" in out and len(err) < 500


def test_a_catalog_over_the_item_limit_is_named_and_the_rest_copied(dynamo, source, capsys,
                                                                    monkeypatch):
    """moto lets a string set grow past 400 KB; DynamoDB refuses the update, as here."""

    def refused(self, names):
        error = ClientError({"Error": {"Code": "ValidationException", "Message": "Item size "
                                       "to update has exceeded the maximum allowed size"}},
                            "UpdateItem")
        raise StoreError("dynamodb:t", "refused") from error

    monkeypatch.setattr(DynamoStore, "note_areas", refused)
    with pytest.raises(BlockedError):
        run(dynamo.settings, "migrate", "--to", "dynamodb")
    out, err = capsys.readouterr()
    assert "not copied: the area catalog's 2 new name(s)" in err
    assert "21 copied" in out and "suppressions 1/0/0" in out


def test_create_tables_makes_them_first(dynamo, source, capsys):
    store_settings = replace(dynamo.settings.store, subscribers_table="fresh-subscribers",
                             ledger_table="fresh-ledger")
    settings = replace(dynamo.settings, store=store_settings)
    with pytest.raises(StoreError) as caught:  # not made unless asked
        run(settings, "migrate", "--to", "dynamodb")
    assert caught.value.exit_code == 1 and "\n" not in str(caught.value)
    assert "table fresh-subscribers does not exist" in str(caught.value)
    assert run(settings, "migrate", "--to", "dynamodb", "--create-tables", "--dry-run") == 0
    out, _ = capsys.readouterr()
    assert "would create table fresh-subscribers\nwould create table fresh-ledger\n" in out
    assert "would copy 23" in out
    assert "fresh-ledger" not in dynamo.client.list_tables()["TableNames"]

    assert run(settings, "migrate", "--to", "dynamodb", "--create-tables") == 0
    out, _ = capsys.readouterr()
    assert out.startswith("created table fresh-subscribers\ncreated table fresh-ledger\n")
    assert "23 copied, 0 already there" in out
    assert run(settings, "migrate", "--to", "dynamodb", "--create-tables") == 0
    out, _ = capsys.readouterr()
    assert "created table" not in out and "0 copied, 23 already there" in out


def test_a_missing_older_or_foreign_sqlite_file_is_refused_untouched(dynamo, tmp_path):
    with pytest.raises(UsageError) as missing:
        run(dynamo.settings, "migrate", "--to", "dynamodb", "--from-sqlite",
            str(tmp_path / "elsewhere.sqlite3"))
    assert missing.value.exit_code == 2 and "no such file" in str(missing.value)
    old = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.commit()
    conn.close()
    before = old.read_bytes()
    with pytest.raises(StoreError, match=f"schema version 1, this program knows "
                                         f"{len(MIGRATIONS)}: open it"):
        run(dynamo.settings, "migrate", "--to", "dynamodb", "--from-sqlite", str(old))
    assert old.read_bytes() == before  # read-only: not upgraded behind the operator's back
    foreign = tmp_path / "foreign.sqlite3"
    foreign.write_text("email,layout\n" * 100)
    with pytest.raises(StoreError, match="not a SQLite database") as caught:
        run(dynamo.settings, "migrate", "--to", "dynamodb", "--from-sqlite", str(foreign))
    assert caught.value.exit_code == 1


def test_only_dynamodb_and_sqlite_are_destinations(dynamo, capsys):
    with pytest.raises(SystemExit) as caught:
        run(dynamo.settings, "migrate", "--to", "postgres")
    assert caught.value.code == 2
    assert "invalid choice: 'postgres'" in capsys.readouterr().err
    with pytest.raises(UsageError, match="go with --to dynamodb"):
        run(dynamo.settings, "migrate", "--to", "sqlite", "--create-tables")
