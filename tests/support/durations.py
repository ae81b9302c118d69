"""Keeps the suite's cost in sight: a test over :data:`SLOW_S` seconds without
``@pytest.mark.slow`` (and its reason) is named at the end of the run. A warning, not a
failure: a test's time depends on the machine and on what else runs.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

#: Seconds over which a test must say why it is slow.
SLOW_S = 5.0


def unmarked_slow_tests(spent: dict[str, float], marked: set[str],
                        limit: float = SLOW_S) -> list[tuple[str, float]]:
    """The tests over ``limit`` seconds without the slow mark, slowest first."""
    return sorted(((nodeid, seconds) for nodeid, seconds in spent.items()
                   if seconds > limit and nodeid not in marked), key=lambda kv: -kv[1])


class SlowWithoutReason:
    """Adds up each test's phases and names the unmarked slow ones in the summary."""

    def __init__(self) -> None:
        self.spent: defaultdict[str, float] = defaultdict(float)
        self.marked: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Under xdist the controller sees every worker's reports, marks in their keywords.
        self.spent[report.nodeid] += report.duration
        if "slow" in report.keywords:
            self.marked.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        late = unmarked_slow_tests(self.spent, self.marked, SLOW_S)
        if not late:
            return
        terminalreporter.section(f"over {SLOW_S:g} s without @pytest.mark.slow and its reason",
                                 yellow=True)
        for nodeid, seconds in late:
            terminalreporter.write_line(f"{seconds:6.2f}s {nodeid}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SlowWithoutReason(), "slow-without-reason")
