"""The operator's view: states, exit codes, merged shard reports, rates against the lines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.stages.status import IssueRates, WeekStatus, as_json, missing_shards, render

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def week(**fields) -> WeekStatus:
    base = {"week": "2026-W48", "built": True, "items": 8, "content_hash": "ab" * 32,
            "folder": "build/issues/2026-W48", "approved": True, "approval_required": True,
            "published": True, "archive_url": "https://example.org/issues/2026-W48/index.html",
            "ledger": {"sent": 10, "failed": 0, "unconfirmed": 0, "sending": 0},
            "reports": [{"file": "send-report.json", "sent": 10, "stopped": None}]}
    return WeekStatus(**{**base, **fields})


STOPPED = {"file": "send-report.json", "stopped": "Daily quota", "stop_exit": 4}
#: A stop no rerun cures: the relay refused the login, the sender, the certificate.
MISCONFIGURED = {"file": "send-report.json", "stop_exit": 2,
                 "stopped": "smtp: 535 5.7.8 Authentication credentials invalid"}


@pytest.mark.parametrize("fields, state, code", [
    ({}, "sent", 0),
    ({"built": False}, "not built", 6),
    ({"approved": False}, "waiting for approval", 3),
    ({"approved": False, "approval_required": False}, "sent", 0),
    ({"blocking": 1}, "blocked", 3),
    ({"reports": []}, "not fully sent", 4),
    ({"ledger": {"sent": 9, "sending": 1}}, "not fully sent", 4),
    ({"ledger": {"sent": 9, "failed": 1}}, "not fully sent", 4),  # temporary: to retry
    # Bounced, or refused for good: a result of the send, counted, not a failure of it.
    ({"ledger": {"sent": 8, "failed": 2}, "permanent_failures": 2}, "sent", 0),
    ({"ledger": {"sent": 9, "unconfirmed": 1}}, "not fully sent", 4),
    ({"reports": [STOPPED]}, "stopped (resumable)", 4),
    ({"reports": [STOPPED], "ledger": {"sent": 9, "unconfirmed": 1}},
     "stopped (resumable)", 4),
    ({"missing_shards": ["2/2"]}, "not fully sent", 4),
    ({"reports": [MISCONFIGURED]}, "failed", 1),
    ({"reports": [{**MISCONFIGURED, "file": "send-report.shard-1-of-2.json", "shard": "1/2"},
                  {**STOPPED, "file": "send-report.shard-2-of-2.json", "shard": "2/2"}]},
     "failed", 1),
])
def test_state_and_exit_code(fields, state, code):
    status = week(**fields)
    assert (status.state, status.exit_code) == (state, code)


def test_missing_shards_are_found_from_the_parts():
    parts = [{"file": "send-report.shard-1-of-3.json", "shard": "1/3"},
             {"file": "send-report.shard-3-of-3.json", "shard": "3/3"}]
    assert missing_shards(parts) == ["2/3"]
    assert missing_shards([*parts, {"file": "send-report.json", "shard": None}]) == []
    assert missing_shards([]) == []


def test_rates_are_flagged_over_the_lines():
    history = [IssueRates("2026-W48", 1000, 2, 4), IssueRates("2026-W47", 1000, 60, 1),
               IssueRates("2026-W46", 1000, 1, 1)]
    text = render(week(rates=history[0]), history, {("active", "zh-en"): 7,
                                                     ("active", "en"): 3, ("bounced", "zh"): 1})
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  2026")}
    assert "complaints 4 (0.400%)" in lines["2026-W48"] and "over the line" in lines["2026-W48"]
    assert "bounces 60 (6.00%)" in lines["2026-W47"] and "over the line" in lines["2026-W47"]
    assert "over the line" not in lines["2026-W46"]
    assert "active 10 (zh-en 7, en 3)" in text and "bounced 1" in text


def test_only_the_latest_way_of_sending_counts():
    from pipeline.stages.status import current_reports

    whole = {"file": "send-report.json", "shard": None, "stopped": "Daily quota",
             "finished_at": "2026-11-30T01:00:00Z"}
    parts = [{"file": f"send-report.shard-{i}-of-2.json", "shard": f"{i}/2", "stopped": None,
              "finished_at": f"2026-11-30T0{i + 1}:00:00Z"} for i in (1, 2)]
    assert current_reports([whole, *parts]) == parts
    later_whole = {**whole, "stopped": None, "finished_at": "2026-11-30T09:00:00Z"}
    assert current_reports([later_whole, *parts]) == [later_whole]
    assert current_reports(parts) == parts


def test_every_unconfirmed_recipient_is_named_with_the_remedy():
    status = week(ledger={"sent": 8, "unconfirmed": 2},
                  unconfirmed={"a" * 24: "in flight when an earlier run stopped",
                               "b" * 24: "smtp: no answer after the message was sent"})
    text = render(status, [], {})
    assert (status.state, status.exit_code) == ("not fully sent", 4)
    assert "--week 2026-W48 --resend-unconfirmed" in text
    for sid, reason in status.unconfirmed.items():
        assert f"{sid}  {reason}" in text


def test_readers_given_the_plain_layout_are_counted_over_every_run():
    shards = [{"file": "send-report.shard-1-of-2.json", "shard": "1/2", "plain_fallback": 2},
              {"file": "send-report.shard-2-of-2.json", "shard": "2/2", "plain_fallback": 1}]
    status = week(reports=shards)
    assert status.plain_fallback == 3
    assert "plain      3 reader(s) got the plain layout" in render(status, [], {})
    assert "plain  " not in render(week(), [], {})  # said only when it happened
    assert as_json(status, [], {})["delivery"]["plain_fallback"] == 3
    assert as_json(week(), [], {})["delivery"]["plain_fallback"] == 0


def test_status_json_says_what_the_text_says(tmp_path):
    """``--json`` says what the text says (a reader got the plain layout), with the same exit."""
    import json

    from support.commands import newsletter_main, ok
    from support.project import SAMPLE_WEEK, make_project

    from subscribers.store.sqlite import SqliteStore

    store_path = make_project(tmp_path) / "data" / "subscribers.sqlite3"
    with SqliteStore.open(store_path) as store:
        for n, areas in enumerate((("rocm",), ("rocm",), ())):
            store.add(f"r{n}@example.org", "zh-en", status="active", source="test",
                      now=NOW, areas=areas)
    ok(newsletter_main(["build", "--week", SAMPLE_WEEK], tmp_path))
    with SqliteStore.open(store_path) as store:
        changed = store.find("r1@example.org")
        assert changed is not None
        store.set_layout(changed.id, "zh-en", NOW, areas=("cpu",))
    ok(newsletter_main(["send", "--week", SAMPLE_WEEK], tmp_path))

    text = newsletter_main(["status", "--week", SAMPLE_WEEK], tmp_path)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "plain      1 reader(s) got the plain layout" in text.stdout
    as_json_ = newsletter_main(["status", "--week", SAMPLE_WEEK, "--json"], tmp_path)
    assert as_json_.returncode == text.returncode
    data = json.loads(as_json_.stdout)
    assert (data["week"], data["state"], data["exit_code"]) == (SAMPLE_WEEK, "sent", 0)
    assert data["delivery"]["plain_fallback"] == 1 and data["delivery"]["sent"] == 3
    assert data["list"]["active"]["zh-en"] == 3
    assert "@" not in as_json_.stdout  # ids, never addresses
