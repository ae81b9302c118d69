"""Renderings shared among the cores (pipeline/parallel.py): the same answer as the plain
loop, in the jobs' order, whatever a child does. Each test forks real children."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK

from pipeline import parallel
from pipeline.core.assemble import assemble, group, rank_week
from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.editorial import EditorEntry, Editorial
from pipeline.core.issue.rank import rank
from pipeline.parallel import fork_map, serial
from pipeline.stages.build import SPREAD_FROM, spread_for, terms
from pipeline.week import parse_week

pytestmark = pytest.mark.subprocess

PARENT = os.getpid()


def square_where(job: int) -> tuple[int, int]:
    return job * job, os.getpid()


def test_the_answer_is_the_plain_loops_in_order_and_children_did_their_share():
    jobs = list(range(7))
    answer = parallel._shared(square_where, jobs, 2)
    assert [value for value, _ in answer] == [job * job for job in jobs]
    where = {job: pid for job, (_, pid) in zip(jobs, answer, strict=True)}
    assert {where[job] for job in jobs[0::2]} == {PARENT}  # share 0 stays here
    children = {where[job] for job in jobs[1::2]}
    assert len(children) == 1 and PARENT not in children


def test_an_error_in_a_childs_share_is_raised_here_as_the_loop_raises_it():
    def fails_on_three(job: int) -> int:
        if job == 3:
            raise ValueError(f"job {job} is bad")
        return job

    with pytest.raises(ValueError, match="job 3 is bad"):
        parallel._shared(fails_on_three, list(range(6)), 2)


def test_a_child_that_dies_or_sends_what_cannot_be_pickled_loses_nothing():
    def dies_in_a_child(job: int) -> int:
        if os.getpid() != PARENT:
            os._exit(9)  # killed, as the kernel's OOM killer would
        return job + 1

    assert parallel._shared(dies_in_a_child, list(range(5)), 2) == [1, 2, 3, 4, 5]

    def unpicklable(job: int) -> tuple[int, Callable[[], int]]:
        return (job, lambda: job)  # a lambda cannot cross a pipe

    answer = parallel._shared(unpicklable, list(range(4)), 2)
    assert [job for job, _ in answer] == [0, 1, 2, 3]  # the children's share done here


def test_with_another_thread_alive_nothing_forks():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.can_fork()
        assert {pid for _, pid in fork_map(square_where, list(range(6)))} == {PARENT}
    finally:
        stop.set()
        other.join()


def test_one_job_or_one_core_is_the_plain_loop(monkeypatch):
    assert fork_map(square_where, [5]) == [(25, PARENT)]
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert {pid for _, pid in fork_map(square_where, list(range(4)))} == {PARENT}


def test_a_big_week_is_rendered_on_every_core_a_small_one_here():
    assert spread_for(SPREAD_FROM) is fork_map
    assert spread_for(SPREAD_FROM - 1) is serial


def test_a_week_rendered_on_two_cores_is_the_same_bytes(settings):
    """Forty reviews over the budget, the four layouts and two interest variants (six jobs,
    shared unevenly): byte for byte the issue the plain loop assembles."""
    week = parse_week(SAMPLE_WEEK, settings.issue.timezone)
    entries = [Entry(pr=100 + n, title=f"评审 {n}",
                     body=("值得精读，" if n % 3 else "值得一读，") + "调度器的改动。" * (150 + n),
                     categories=["rocm"] if n % 2 else ["kv-connector"])
               for n in range(40)]
    result = parse_feed(atom(entries), "feed", settings.feed.repo)
    ranked = rank_week(week, group(settings.feed, week, [result]), Editorial())
    choices = [("zh-en", ("rocm",)), ("en", ("kv-connector",))]
    shared = assemble(terms(settings), week, ranked, choices=choices,
                      spread=lambda fn, jobs: parallel._shared(fn, jobs, 2))
    alone = assemble(terms(settings), week, ranked, choices=choices)
    assert shared.artifacts == alone.artifacts and shared.data == alone.data
    assert len(shared.rendered) == 6
    assert [p for p in shared.issue.problems if p.code == "items-shrunk"]


def test_prs_ranked_on_two_cores_come_out_in_the_same_order_with_the_same_problems(settings):
    """Hidden PRs, a PR the week lacks and unrated ones: the problems interleave as the
    plain loop gives them."""
    week = parse_week(SAMPLE_WEEK, settings.issue.timezone)
    entries = [Entry(pr=200 + n, body=("值得精读，" if n % 4 else "") + "改动。" * n)
               for n in range(1, 30)]
    result = parse_feed(atom(entries), "feed", settings.feed.repo)
    groups = group(settings.feed, week, [result]).groups
    editorial = Editorial(entries={203: EditorEntry(hide=True), 210: EditorEntry(hide=True),
                                   999: EditorEntry(priority="skim")})
    shared = rank(groups, editorial,
                  lambda fn, jobs: parallel._shared(fn, jobs, 2))
    assert shared == rank(groups, editorial)
    assert {"editor-unknown-pr", "unrated"} <= {p.code for p in shared[1]}
    assert {203, 210}.isdisjoint(item.pr for item in shared[0])
