"""The warning that keeps the suite's cost in sight (tests/support/durations.py)."""

from __future__ import annotations

from support import durations


def test_only_the_unmarked_tests_over_the_limit_are_named_slowest_first():
    spent = {"a": 5.5, "b": 12.0, "c": 4.9, "d": 30.0, "e": 5.0}
    assert durations.unmarked_slow_tests(spent, {"d"}, 5.0) == [("b", 12.0), ("a", 5.5)]


def test_a_run_names_its_unmarked_slow_test_in_the_summary(pytester, monkeypatch):
    # Every test is "slow" past a limit of 0 s: the run below needs no real wait.
    monkeypatch.setattr(durations, "SLOW_S", 0.0)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_inner="""
        import pytest

        @pytest.mark.slow  # the reason
        def test_marked():
            pass

        def test_unmarked():
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "support.durations", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "over 0 s without @pytest.mark.slow and its reason" in out
    assert "test_inner.py::test_unmarked" in out
    assert "test_inner.py::test_marked" not in out
