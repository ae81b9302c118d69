"""An outbox on a full or read-only filesystem: a resumable stop, never a list marked failed.

The outbox is a real tmpfs (the tests run as root, so ``chmod`` would deny nothing): 256 KB
hold two or three messages, then ENOSPC; read-only, EROFS. ``send`` must stop with exit 4,
leave no temp file and no failed ledger row, and a re-run with room sends the rest once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.commands import newsletter_main
from support.project import ROOT, SAMPLE_WEEK, make_project

from subscribers.store.sqlite import SqliteStore

SUBSCRIBERS = ROOT / "examples" / "subscribers.csv"
COUNT = len(SUBSCRIBERS.read_text().strip().splitlines()) - 1


def mount(target: Path, options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                   check=True, capture_output=True)


def remount(target: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(target)], check=True,
                   capture_output=True)


@pytest.fixture
def outbox(tmp_path: Path) -> Iterator[Path]:
    """A project with its issue built and its outbox folder an (unmounted) mount point."""
    make_project(tmp_path)
    for args in (("subscribers", "import", str(SUBSCRIBERS), "--confirmed"),
                 ("build", "--week", SAMPLE_WEEK)):
        assert newsletter_main(list(args), tmp_path).returncode == 0
    folder = tmp_path / "build" / "issues" / SAMPLE_WEEK / "outbox"
    folder.mkdir()
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def ledger(project: Path) -> dict[str, int]:
    with SqliteStore.open(project / "data" / "subscribers.sqlite3") as store:
        return store.ledger_counts(SAMPLE_WEEK)


def sent_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.eml"))


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]


def check_stopped(result: subprocess.CompletedProcess[str], why: str) -> None:
    assert result.returncode == 4, result.stdout + result.stderr
    *notes, error = result.stderr.strip().splitlines()
    # The error is one line, the last; only logged notes (the development key's) come before.
    assert all(" note: " in note for note in notes), result.stderr
    assert error.startswith("newsletter: error: ") and "Traceback" not in result.stderr
    assert why in error and "run the same command again" in error, error


@pytest.mark.subprocess
def test_a_full_outbox_stops_resumably_and_a_rerun_sends_the_rest(outbox: Path) -> None:
    mount(outbox, "size=256k")
    project = outbox.parents[3]

    first = newsletter_main(["send", "--week", SAMPLE_WEEK], project)

    check_stopped(first, "No space left on device (ENOSPC)")
    written = sent_files(outbox)
    assert written, "the first messages fit before the disk filled"
    assert len(written) < COUNT, "the disk filled before the list ended"
    assert leftovers(outbox) == []  # no zero-byte or partial temp file is left behind
    counts = ledger(project)
    # Nobody is marked failed; the claims not handed over were released.
    assert counts == {"sent": len(written), "failed": 0, "unconfirmed": 0, "sending": 0}

    remount(outbox, "size=4m")  # the operator frees space
    again = newsletter_main(["send", "--week", SAMPLE_WEEK], project)

    assert again.returncode == 0, again.stdout + again.stderr
    assert f"sent {COUNT - len(written)}, skipped {len(written)}, failed 0" in again.stdout
    assert len(sent_files(outbox)) == COUNT and leftovers(outbox) == []
    assert ledger(project)["sent"] == COUNT


def read_only(outbox: Path) -> Callable[[], None]:
    mount(outbox, "size=4m,ro")
    return lambda: remount(outbox, "rw")


def a_file(outbox: Path) -> Callable[[], None]:
    """Root ignores permission bits: a file in the outbox's place is the third local failure."""
    outbox.rmdir()
    outbox.write_text("not a folder\n")
    return outbox.unlink


@pytest.mark.subprocess
@pytest.mark.parametrize(("block", "why"), [(read_only, "Read-only file system (EROFS)"),
                                            (a_file, "File exists (EEXIST)")],
                         ids=["read-only", "a-file"])
def test_an_outbox_that_takes_nothing_stops_before_sending_and_fails_nobody(
        outbox: Path, block: Callable[[Path], Callable[[], None]], why: str) -> None:
    project = outbox.parents[3]
    unblock = block(outbox)

    first = newsletter_main(["send", "--week", SAMPLE_WEEK], project)

    check_stopped(first, why)
    assert f"outbox {outbox}: " in first.stderr and "nothing was published or sent" in first.stderr
    assert sent_files(outbox) == []
    assert ledger(project) == {"sent": 0, "failed": 0, "unconfirmed": 0, "sending": 0}

    unblock()
    again = newsletter_main(["send", "--week", SAMPLE_WEEK], project)

    assert again.returncode == 0, again.stdout + again.stderr
    assert f"sent {COUNT}, skipped 0, failed 0" in again.stdout
    assert len(sent_files(outbox)) == COUNT


@pytest.mark.subprocess
def test_a_full_archive_folder_fails_the_write_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """The archive's whole-file write too: an ArchiveError naming the key, no ``.tmp-*`` left."""
    from pipeline.archive.local import LocalArchive
    from pipeline.errors import ArchiveError
    from pipeline.model import SiteObject

    root = tmp_path / "site"
    root.mkdir()
    mount(root, "size=64k")
    try:
        archive = LocalArchive(root)
        assert archive.write(SiteObject("small.html", b"<p>fits</p>", "text/html", "no-cache"))
        with pytest.raises(ArchiveError, match=r"cannot write index\.html: No space left"):
            archive.write(SiteObject("index.html", b"x" * 200_000, "text/html", "no-cache"))
        assert leftovers(root) == []
        assert not (root / "index.html").exists()
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False, capture_output=True)
