"""stages/deliver.py: the send report is kept after every real send; a failed write is an
error, except after a stop, where the stop is what the operator must hear."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pipeline.core.issue.built_issue import BuiltIssue
from pipeline.errors import OutputError
from pipeline.stages.deliver import keep_report
from pipeline.stages.send_report import REPORT_FILE, SendReport


def issue_in(folder: Path) -> BuiltIssue:
    """What keep_report reads of a built issue: the folder its report goes beside."""
    return cast(BuiltIssue, SimpleNamespace(folder=folder))


def report(**fields: Any) -> SendReport:
    return SendReport("2026-W48", "outbox", "0" * 64, **fields)


def test_the_report_is_kept_beside_the_issue_after_a_send_not_a_dry_run(tmp_path: Path) -> None:
    keep_report(issue_in(tmp_path), report(dry_run=True))
    assert list(tmp_path.iterdir()) == []
    keep_report(issue_in(tmp_path), report(sent=3))
    assert json.loads((tmp_path / REPORT_FILE).read_text())["sent"] == 3


def test_a_report_that_cannot_be_written_is_an_error_but_after_a_stop_only_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(OutputError, match="cannot write"):
        keep_report(issue_in(tmp_path / "gone"), report(sent=3))
    with caplog.at_level(logging.WARNING, logger="newsletter.send"):
        keep_report(issue_in(tmp_path / "gone"),
                    report(sent=1, stopped="No space left on device (ENOSPC)"))
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "cannot write" in caplog.text
