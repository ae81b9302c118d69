"""The ``outbox`` transport's own checks: the probe ``send`` and ``run`` make before anything
is published, its one-line description, and ``with`` support. Writing messages (and a full or
read-only disk, or a file in the folder's place) is covered by test_deliverability.py and
test_outbox_full.py."""

from __future__ import annotations

from pathlib import Path

from pipeline.transport.outbox import OutboxTransport


def test_the_probe_makes_the_folder_and_leaves_nothing_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "issues" / "2026-W48" / "outbox"
    OutboxTransport(folder).probe()
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_it_describes_itself_by_its_folder_writes_no_mailbox_and_opens_as_itself(
        tmp_path: Path) -> None:
    transport = OutboxTransport(tmp_path / "outbox")
    assert transport.describe() == f"outbox {tmp_path / 'outbox'}"
    assert transport.reaches_mailboxes is False
    with transport as opened:
        assert opened is transport
