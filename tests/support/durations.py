"""Keeps the suite's cost in sight: a test that takes over :data:`SLOW_S` seconds (setup, call
and teardown together) and does not carry ``@pytest.mark.slow`` is named at the end of the run.

A warning, not a failure: how long a test takes depends on the machine and on what else runs,
and a timed assertion would fail for the wrong reason. What the warning asks is the mark and a
one-line comment beside it saying why the test costs what it does (the convention of
``make test``'s layers; ``make test-fast`` leaves slow tests out). ``--durations`` (``.ci/run``
passes 25) names the slowest whatever their marks.
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
        # Under xdist the controller sees every worker's reports; the marks travel in
        # ``report.keywords``.
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
