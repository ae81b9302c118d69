"""``newsletter subscribers …`` run in-process through its own argparse parser, on a real
store in the temp folder."""

from __future__ import annotations

import argparse
import csv
import functools
import io
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.project import ROOT

from pipeline import week
from pipeline.cli.subscribers import add_parser
from pipeline.errors import NewsletterError
from pipeline.wiring import open_store

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(week, "now", lambda: NOW)


def run_in(settings, capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``subscribers …`` on ``settings``: (exit code, stdout, stderr), errors mapped like
    pipeline/cli/__init__.py maps them."""
    top = argparse.ArgumentParser(prog="newsletter")
    add_parser(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["subscribers", *argv])
    try:
        code = args.handler(args, settings)
    except NewsletterError as exc:
        print(f"newsletter: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cli(settings, capsys):
    return functools.partial(run_in, settings, capsys)


def write(tmp_path: Path, text: str, name: str = "list.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_add_list_export_remove(cli, settings):
    code, out, _ = cli("add", "Li.Wei@Example.org", "--layout", "zh")
    assert code == 0 and "added Li.Wei@example.org (pending, zh)" in out
    assert cli("add", "maria@example.com", "--confirmed")[0] == 0
    code, out, _ = cli("add", "li.wei@example.org", "--confirmed")
    assert code == 0 and "pending → active" in out
    code, out, _ = cli("add", "LI.WEI@example.org", "--layout", "en")
    assert code == 0 and "already present (active, zh)" in out

    code, out, _ = cli("list")
    assert code == 0
    assert sorted(out.splitlines()) == ["Li.Wei@example.org active zh",
                                        "maria@example.com active zh-en"]
    with open_store(settings) as store:
        store.add("new@example.org", source="web", now=NOW)
    assert cli("list", "--status", "pending")[1] == "new@example.org pending zh-en\n"

    code, out, _ = cli("export")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and out.startswith(
        "email,layout,status,created_at,confirmed_at,consent_source,consent_at,consent_ip,"
        "areas\n")
    by_email = {row["email"]: row for row in rows}
    assert by_email["Li.Wei@example.org"] == {
        "email": "Li.Wei@example.org", "layout": "zh", "status": "active",
        "created_at": "2026-11-30T01:00:00Z", "confirmed_at": "2026-11-30T01:00:00Z",
        "consent_source": "cli", "consent_at": "2026-11-30T01:00:00Z", "consent_ip": "",
        "areas": ""}
    assert by_email["new@example.org"]["confirmed_at"] == ""

    code, out, _ = cli("remove", "li.wei@EXAMPLE.org")
    assert code == 0 and "removed li.wei@example.org" in out
    assert "li.wei" not in cli("list")[1].lower()
    assert "li.wei" not in cli("export")[1].lower()
    code, out, _ = cli("remove", "li.wei@example.org")
    assert code == 0 and "already removed" in out
    code, _, err = cli("add", "Li.Wei@example.org", "--confirmed")
    assert code == 2 and "suppressed" in err and len(err.splitlines()) == 1


def test_add_and_remove_errors_are_one_line_and_exit_2(cli, settings):
    code, _, err = cli("add", "not-an-address")
    assert code == 2 and err.startswith("newsletter: error: invalid address 'not-an-address'")
    code, _, err = cli("remove", "nobody@example.org")
    assert code == 2 and err == "newsletter: error: no subscriber nobody@example.org\n"
    with open_store(settings) as store:
        sid = store.add("left@example.org", status="active", source="cli", now=NOW)
        assert sid.subscriber is not None
        store.set_status(sid.subscriber.id, "unsubscribed", NOW)
    code, _, err = cli("add", "left@example.org", "--confirmed")
    assert code == 2 and "left@example.org: is unsubscribed" in err
    assert cli("list")[1] == "left@example.org unsubscribed zh-en\n"


def test_import_without_confirmed_adds_pending_readers(cli, tmp_path, settings):
    """The header's case and spaces do not matter; other columns are ignored."""
    path = write(tmp_path, "Email, Layout ,note\nok1@example.org,zh,first\n")
    code, out, err = cli("import", str(path))
    assert (code, err) == (0, "")
    assert out == ("imported 1 new, 0 already present, 0 refused "
                   "(unsubscribed/bounced/complained/suppressed), 0 errors\n")
    assert cli("list")[1] == "ok1@example.org pending zh\n"
    with open_store(settings) as store:
        ok1 = store.find("ok1@example.org")
        assert ok1 is not None and ok1.consent_source == "import:list.csv"


def test_import_refuses_unreadable_files_with_exit_2(cli, tmp_path, settings):
    code, _, err = cli("import", str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv: no such file" in err
    code, _, err = cli("import", str(write(tmp_path, "address,layout\na@example.org,zh\n")))
    assert code == 2 and "no 'email' column" in err and len(err.splitlines()) == 1
    code, _, err = cli("import", str(write(tmp_path, "", "empty.csv")))
    assert code == 2 and "empty file" in err
    latin = tmp_path / "latin.csv"
    latin.write_bytes("email,layout\na@example.org,zh\nb@example.org,zh\nJosé,en\n"
                      .encode("latin-1"))
    code, _, err = cli("import", str(latin))
    assert code == 2 and f"{latin}:4: not UTF-8" in err
    assert cli("list")[1] == ""  # nothing half-imported


def test_the_bundled_sample_imports_every_layout_and_areas_the_sample_issue_has(cli):
    code, out, err = cli("import", str(ROOT / "examples" / "subscribers.csv"), "--confirmed")
    assert code == 0 and err == ""
    assert out.startswith("imported 6 new, 0 already present, 0 refused")
    lines = cli("list", "--status", "active")[1].splitlines()
    assert len(lines) == 6
    assert {line.split()[2] for line in lines} == {"zh-en", "en-zh", "zh", "en"}
    assert all(line.split("@")[1].split()[0] in ("example.org", "example.com")
               for line in lines)
    following = [set(line.split()[3].split(",")) for line in lines if len(line.split()) == 4]
    sample = (ROOT / "examples" / "sample-feed.atom").read_text(encoding="utf-8")
    in_sample = {name for names in following for name in names
                 if f'<category term="{name}"' in sample}
    assert len([names for names in following if names & in_sample]) >= 2
    # One reader follows an area this issue lacks: they get the plain layout.
    assert set().union(*following) - in_sample


def test_import_help_says_bad_rows_are_reported(capsys):
    top = argparse.ArgumentParser(prog="newsletter")
    add_parser(top.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        top.parse_args(["subscribers", "import", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Each bad row is reported on stderr as FILE:LINE: reason" in text


# -- areas -----------------------------------------------------------------------------------

def test_add_with_areas_lists_and_exports_them(cli, settings):
    code, out, _ = cli("add", "fan@example.org", "--confirmed", "--areas", "ROCm, kv connector,")
    assert code == 0
    assert "added fan@example.org (active, zh-en, following kv-connector, rocm)" in out
    assert cli("list")[1] == "fan@example.org active zh-en kv-connector,rocm\n"
    rows = list(csv.DictReader(io.StringIO(cli("export")[1])))
    assert rows[0]["areas"] == "kv-connector;rocm"
    code, _, err = cli("add", "bad@example.org", "--areas", "ok," + "x" * 61)
    assert code == 2 and err.count("\n") == 1 and "--areas:" in err and "not an area" in err
    with open_store(settings) as store:
        assert store.find("bad@example.org") is None


def test_import_reads_the_areas_column_and_never_overwrites_a_readers_choice(cli, tmp_path,
                                                                              settings):
    many = ";".join(f"a{n}" for n in range(51))
    path = write(tmp_path, "email,areas,layout\n"
                 "one@example.org,rocm;KV Connector; ;rocm,en\n"
                 "two@example.org,,zh\n"
                 f"three@example.org,{many},\n"
                 "four@example.org,ok;bad\x07name,\n"
                 '"five@example.org","<script>x</script>;../x",\n')
    code, out, err = cli("import", str(path), "--confirmed")
    assert code == 0
    assert out.startswith("imported 3 new, 0 already present, 0 refused")
    assert f"{path}:4: areas: 51 areas; a subscriber follows at most 50" in err
    assert f"{path}:5: areas: " in err and "not an area name" in err
    assert err.count("\n") == 2
    with open_store(settings) as store:
        one = store.find("one@example.org")
        two = store.find("two@example.org")
        five = store.find("five@example.org")
        assert one is not None and two is not None and five is not None
        assert one.areas == ("kv-connector", "rocm")
        assert two.areas == ()
        assert five.areas == ("../x", "<script>x</script>")
        store.set_layout(one.id, "en", NOW, areas=["multimodal"])
    # Importing again (or an export of an older list) leaves the reader's own choice alone.
    assert cli("import", str(path), "--confirmed")[1].startswith("imported 0 new, 3 already")
    with open_store(settings) as store:
        again = store.find("one@example.org")
        assert again is not None and again.areas == ("multimodal",)


def test_an_export_imports_again_with_its_areas(cli, tmp_path, settings, capsys):
    cli("add", "x@example.org", "--confirmed", "--areas", "rocm,cpu", "--layout", "en")
    exported = write(tmp_path, cli("export")[1], "export.csv")
    with open_store(settings) as store:
        store.remove("x@example.org", NOW)
    other = replace(settings, paths=replace(settings.paths, data_dir=tmp_path / "other"))
    code, out, err = run_in(other, capsys, "import", str(exported), "--confirmed")
    assert code == 0 and err == "" and out.startswith("imported 1 new")
    with open_store(other) as store:
        moved = store.find("x@example.org")
        assert moved is not None
        assert (moved.layout, moved.areas) == ("en", ("cpu", "rocm"))


# -- batches ---------------------------------------------------------------------------------

MIXED = (
    "email,layout,areas\n"                      # 1
    "new1@example.org,en,rocm;KV Connector\n"   # 2  new, areas folded
    "pending@example.org,zh,\n"                 # 3  pending → active
    "not-an-address,en,\n"                      # 4  invalid
    "GONE@example.org,zh,\n"                    # 5  unsubscribed: refused
    "removed@example.org,,\n"                   # 6  suppressed: refused
    "NEW1@example.org,zh,\n"                    # 7  the same address again
    "kept@example.org,en,cpu\n"                 # 8  present: keeps layout and areas
    "\n"                                        # 9  blank
    "用户@例子.中国,en-zh,\n"                   # 10 Unicode
    "new2@example.org,klingon,\n"               # 11 bad layout
    "new3@example.org,,ok;bad\x07name\n"        # 12 bad area
    "Ünï@example.org,,\n"                       # 13 new
    "üNÏ@EXAMPLE.org,en,\n"                     # 14 the same, other case
    ",zh,\n"                                    # 15 no address
    "pending@example.org,en,\n"                 # 16 present (active since line 3)
    '"new4@example.org",EN,\n'                  # 17 new, quoted
    "bounced@example.org,zh,\n")                # 18 bounced: refused


def seed(settings) -> None:
    with open_store(settings) as store:
        store.add("pending@example.org", source="web", now=NOW)
        store.add("kept@example.org", "zh", status="active", source="web", now=NOW,
                  areas=["multimodal"])
        gone = store.add("gone@example.org", status="active", source="web", now=NOW)
        assert gone.subscriber is not None
        store.set_status(gone.subscriber.id, "unsubscribed", NOW)
        bounced = store.add("bounced@example.org", status="active", source="web", now=NOW)
        assert bounced.subscriber is not None
        store.set_status(bounced.subscriber.id, "bounced", NOW)
        store.add("removed@example.org", source="web", now=NOW)
        store.remove("removed@example.org", NOW)


def stored(settings) -> list[tuple[str, str, str, tuple[str, ...], str, datetime | None]]:
    with open_store(settings) as store:
        return sorted((s.email, s.status, s.layout, s.areas, s.consent_source, s.consent_at)
                      for s in store.iter_subscribers())


@pytest.mark.parametrize("batch", [1, 2, 3, 4, 5, 6, 1000])
def test_a_mixed_file_imports_the_same_whatever_the_batch_size(cli, tmp_path, settings,
                                                               monkeypatch, batch):
    """Batches of 5 and 6 split duplicate pairs (lines 2/7, 13/14) that 1000 keeps together."""
    monkeypatch.setattr("pipeline.cli.subscribers.IMPORT_BATCH", batch)
    seed(settings)
    path = write(tmp_path, MIXED)
    code, out, err = cli("import", str(path), "--confirmed")
    assert code == 0
    assert out.splitlines() == [
        "imported 4 new, 5 already present, 3 refused "
        "(unsubscribed/bounced/complained/suppressed), 4 errors",
        "confirmed 1 pending subscriber(s) (--confirmed)"]
    assert [line.split(": ")[0] for line in err.splitlines()] == [
        f"{path}:{n}" for n in (4, 5, 6, 11, 12, 15, 18)]
    assert f"{path}:5: refused: GONE@example.org is unsubscribed" in err
    assert f"{path}:6: refused: removed@example.org was removed earlier" in err
    assert f"{path}:18: refused: bounced@example.org is bounced" in err
    assert f"{path}:4: invalid address 'not-an-address'" in err
    assert f"{path}:11: unknown layout 'klingon' (expected zh-en, en-zh, zh, en)\n" in err
    assert f"{path}:15: no email address\n" in err
    stamp = NOW  # the clock of the import (fixed here), for consent and creation alike
    assert stored(settings) == [
        ("bounced@example.org", "bounced", "zh-en", (), "web", NOW),
        ("gone@example.org", "unsubscribed", "zh-en", (), "web", NOW),
        ("kept@example.org", "active", "zh", ("multimodal",), "web", NOW),
        ("new1@example.org", "active", "en", ("kv-connector", "rocm"), "import:list.csv",
         stamp),
        ("new4@example.org", "active", "en", (), "import:list.csv", stamp),
        ("pending@example.org", "active", "zh-en", (), "import:list.csv", stamp),
        ("Ünï@example.org", "active", "zh-en", (), "import:list.csv", stamp),
        ("用户@例子.中国", "active", "en-zh", (), "import:list.csv", stamp)]
    code, out, again = cli("import", str(path), "--confirmed")
    assert out.startswith("imported 0 new, 9 already present, 3 refused")
    assert again == err  # every bad row reported again


def test_an_interrupted_import_keeps_whole_batches_and_says_where_it_stopped(
        cli, tmp_path, settings, monkeypatch, capsys):
    """Ctrl-C mid-batch rolls that batch back whole; importing again finishes the file."""
    monkeypatch.setattr("pipeline.cli.subscribers.IMPORT_BATCH", 4)
    path = write(tmp_path, "email,areas\n" + "".join(
        f"r{i}@example.org,a{i}\n" for i in range(10)))
    import subscribers.store.sqlite.directory as sqlite_store
    from subscribers.store import rules

    encode = rules.encode_areas  # the function sqlite_store imports (and uses) by this name
    calls = 0

    def interrupted(names):
        nonlocal calls
        calls += 1
        if calls == 6:  # the second batch's second row
            raise KeyboardInterrupt
        return encode(names)

    monkeypatch.setattr(sqlite_store, "encode_areas", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli("import", str(path))
    out, err = capsys.readouterr()
    assert err == ""
    assert out == ("imported 4 new, 0 already present, 0 refused (unsubscribed/bounced/"
                   "complained/suppressed), 0 errors; stopped after line 5: the rows up to "
                   "it are imported as counted, none after it (importing the file again is "
                   "safe)\n")
    assert [row[0] for row in stored(settings)] == [f"r{i}@example.org" for i in range(4)]
    monkeypatch.setattr(sqlite_store, "encode_areas", encode)
    assert cli("import", str(path))[1].startswith("imported 6 new, 4 already present")


def test_a_full_disk_stops_the_import_with_one_line_and_whole_batches(
        cli, tmp_path, settings, monkeypatch):
    """``max_page_count`` caps the file as a full disk would: exit 1, earlier batches kept."""
    monkeypatch.setattr("pipeline.cli.subscribers.IMPORT_BATCH", 100)
    from subscribers.store.sqlite import SqliteStore

    opened = SqliteStore.open

    def small_disk(path, **kwargs):
        store = opened(path, **kwargs)
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages + 12}")
        return store

    monkeypatch.setattr(SqliteStore, "open", staticmethod(small_disk))
    path = write(tmp_path, "email,areas\n" + "".join(
        f"reader-{i:05}@example.org,{'x' * 40}\n" for i in range(2000)))
    code, out, err = cli("import", str(path))
    assert code == 1
    assert err.count("\n") == 1 and "full" in err
    done = int(out.split("imported ")[1].split(" new")[0])
    line = int(out.split("stopped after line ")[1].split(":")[0])
    assert done % 100 == 0 and 0 < done < 2000 and line == done + 1
    monkeypatch.setattr(SqliteStore, "open", staticmethod(opened))
    assert len(stored(settings)) == done
