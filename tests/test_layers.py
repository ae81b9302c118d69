"""The test layers keep their promise: `make test-fast` deselects browser, aws, subprocess and
slow, so a test must not do those things unmarked. The marks follow from fixtures where they
can (conftest.py), and a process started by an unmarked test fails it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest
from conftest import _PROCESSES
from support.project import ROOT


def test_a_test_using_moto_is_marked_aws(request: pytest.FixtureRequest, moto_server) -> None:
    assert request.node.get_closest_marker("aws") is not None


def test_an_unmarked_test_cannot_start_a_process(request: pytest.FixtureRequest) -> None:
    with pytest.raises(pytest.fail.Exception, match="without a process mark"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert request.node.stash[_PROCESSES] == [sys.executable]
    request.node.stash[_PROCESSES].clear()  # seen and stopped: not a failure of this test


@pytest.mark.subprocess
def test_a_marked_test_may_start_a_process() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0


@pytest.mark.subprocess
def test_test_ids_hold_no_clock() -> None:
    """xdist refuses workers collecting different ids: no id may come from the time of import."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/test_sns.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert ids and not [i for i in ids if today in i]
