"""The ``outbox`` transport's own checks: the probe ``send`` and ``run`` make before anything
is published, its one-line description, and ``with`` support. Writing messages (and a full or
read-only disk mid-send) is covered by test_deliverability.py and test_outbox_full.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import SendingStopped, StoppedError
from pipeline.stages.preflight import probe
from pipeline.transport.outbox import OutboxTransport


def test_the_probe_makes_the_folder_and_leaves_nothing_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "issues" / "2026-W48" / "outbox"
    OutboxTransport(folder).probe()
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_folder_taken_by_a_file_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    folder = tmp_path / "outbox"
    folder.write_text("not a folder\n")
    with pytest.raises(SendingStopped, match=r"File exists \(EEXIST\)") as raised:
        OutboxTransport(folder).probe()
    assert raised.value.exit_code == 4 and str(folder) in str(raised.value)
    # Preflight says nothing went out, and to run again.
    with pytest.raises(StoppedError, match="nothing was published or sent: run the same "
                       "command again") as stopped:
        probe(OutboxTransport(folder))
    assert stopped.value.exit_code == 4


def test_it_describes_itself_by_its_folder_and_writes_no_mailbox(tmp_path: Path) -> None:
    transport = OutboxTransport(tmp_path / "outbox")
    assert transport.describe() == f"outbox {tmp_path / 'outbox'}"
    assert transport.reaches_mailboxes is False


def test_with_returns_the_transport_itself(tmp_path: Path) -> None:
    transport = OutboxTransport(tmp_path / "outbox")
    with transport as opened:
        assert opened is transport
