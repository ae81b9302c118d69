"""Benchmark of ``newsletter send`` at list scale: N sharded worker processes, one SQLite file.

What it measures: the sample issue (``examples/sample-feed.atom`` built for 2026-W48 into a
temp folder by ``bench_send.prepare``; nothing is written in the work tree) sent to every
active subscriber of generated lists (defaults 10,000 and 100,000; ``--full`` adds
1,000,000) through the real send path (``Sender.run``: the ledger claim, the re-read of the
subscriber, ``Messages.build``, ``mark_sent``) to a ``NullTransport`` (returns an id, keeps
nothing), concurrency 4 (the default), no rate limit, by N = 1 and 2 worker processes. Each
worker is a fresh ``spawn``-ed process that opens its own ``SqliteStore`` on the same file and
runs ``SendOptions(shard=Shard(i, N))``; a barrier starts the N runs together. Every run
sends to a fresh copy of the generated store (empty ledger), so every run sends to everyone.

* ``msg/s per worker``: a worker's messages / the wall seconds of its ``Sender.run``, the
  mean over the run's workers; ``total msg/s`` their sum. ``vs 1 worker`` = total msg/s over
  the 1-worker total at the same size, measured in the same run (the baseline).
  ``CPU µs/msg``: the workers' CPU time (all their threads) per message sent; ``cores busy``:
  the workers' CPU seconds over the run's wall seconds (below N: they wait, on fsync or on
  each other, since every claim and ``mark_sent`` is a write to the one SQLite file).
* memory: ``peak RSS`` is ``getrusage(RUSAGE_SELF).ru_maxrss`` of the worker after the run
  (the largest of the N workers); ``growth`` is that peak minus the worker's RSS right after
  its store was opened (``/proc/self/status`` ``VmRSS``), i.e. what the run itself added.
  RSS, not tracemalloc: tracemalloc slows the run about 3x, and RSS includes SQLite's page
  cache (C memory). ``vs <smallest>``: peak RSS over the same N's peak at the smallest size;
  a send that streams the list stays at about 1.00x whatever the size.
* memory baseline, in the same run: the same kind of worker (same imports, same issue loaded,
  same store opened) that only reads the whole active list into a Python list
  (``list(store.iter_subscribers("active"))``), i.e. what a send loop that did not stream
  would hold; its growth is proportional to the list.

Each figure is the median of ``--runs`` runs (3), except sizes of 100,000 and more, which run
``--big-runs`` times (1): one run of 100,000 takes minutes here, and a run at such a size is
long enough to be steady. The ``runs`` column says which. The 1- and 2-worker runs alternate,
so a drift of the machine touches both.

Lists are generated with ``bench_send.fill_store`` (one ``executemany`` on a second
connection; ``SqliteStore.add`` fsyncs each address): about 3.5 s per 100,000 and 35 s for
1,000,000 (a 350 MB file); the time is printed and is not part of any figure. The store
files live in the system temp folder; its file system is printed, since the ledger writes
are fsynced (``synchronous = FULL``), and so is the load average: other work on the machine
shows in the figures, the 2-worker ones most.

Durations on the 2-core machine this was written on (Python 3.11, ext4 temp folder, shared
with other work; 500-820 msg/s whatever N): the default (10,000 ×3 + 100,000 ×1) 5.5 to 8
minutes, most of it the two 100,000 runs (2 to 3.5 minutes each). ``--full`` adds
1,000,000 ×1: measured once (``--sizes 1000000``, 40 minutes in all): generated in 36 s;
1 worker 1,203 s (831 msg/s), 2 workers 1,139 s (878 msg/s, 1.06x); peak RSS 44.8 MiB
per worker either way (44.3 MiB at 10,000), against 738 MiB for the whole list in memory.
``--full --workers 2`` leaves out the 1-worker runs (no ``vs 1 worker`` then): 25 to 40
minutes. ``--sizes 2000,5000 --runs 2``: under a minute.

Run: ``make bench`` or ``.venv/bin/python bench/bench_scale.py [--full] [--sizes 10000,100000]
[--runs N] [--big-runs N] [--workers 1,2]``.
Nothing here asserts on time: it is a measurement, not a test. It does stop when a run
delivers a different number of messages than the list holds, or any subscriber gets a
ledger row other than ``sent``, since its figures would be wrong.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

from bench_build import table
from bench_send import BENCH_KEY, WEEK_ID, NullTransport, Setup, fill_store, numbers, prepare

from pipeline.config import load
from pipeline.core.email.message import Messages
from pipeline.stages.built import load_built
from pipeline.stages.send import Sender, SendOptions
from subscribers.shards import Shard
from subscribers.store.sqlite import SqliteStore
from subscribers.tokens import Keys

SIZES = (10_000, 100_000)
FULL_SIZES = (10_000, 100_000, 1_000_000)
WORKERS = (1, 2)
RUNS = 3
BIG_RUNS = 1
#: Sizes from here up run ``--big-runs`` times.
BIG = 100_000
#: Seconds a worker waits at the start barrier for the others (imports, opening the store).
START_TIMEOUT = 300.0
SIDECARS = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Job:
    """What one worker process does: ``send`` its shard, or ``list`` the whole list."""

    kind: str
    store: str
    config: str
    issue: str
    index: int = 1
    count: int = 1


@dataclass(frozen=True)
class WorkerResult:
    sent: int
    #: skipped + failed + unconfirmed: must be 0 on a fresh ledger.
    other: int
    seconds: float
    cpu_seconds: float
    open_kib: int
    peak_kib: int

    @property
    def rate(self) -> float:
        return self.sent / self.seconds

    @property
    def growth_kib(self) -> int:
        return self.peak_kib - self.open_kib


@dataclass(frozen=True)
class Row:
    """One (size, N) line of the table: medians over the runs."""

    size: int
    workers: int
    runs: int
    seconds: float
    rate_per_worker: float
    total_rate: float
    cpu_us: float
    #: The workers' CPU seconds over the slowest one's wall seconds: cores kept busy.
    cores: float
    peak_kib: float
    growth_kib: float


@dataclass(frozen=True)
class ListRow:
    size: int
    peak_kib: float
    growth_kib: float


# -- the worker process ----------------------------------------------------------------------


def peak_rss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KiB on Linux


def current_rss_kib() -> int:
    """VmRSS now (Linux); elsewhere the peak so far, which is at least as large."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return peak_rss_kib()


def work(job: Job, barrier: Barrier, pipe: Connection) -> None:
    """The child process: do ``job``, answer a WorkerResult, or the traceback as text."""
    try:
        pipe.send(do_job(job, barrier))
    except BaseException:
        barrier.abort()  # the others stop waiting for this one
        pipe.send(traceback.format_exc())
    finally:
        pipe.close()


def do_job(job: Job, barrier: Barrier) -> WorkerResult:
    settings = load(Path(job.config), {})
    built = load_built(Path(job.issue))
    keys = Keys.from_environ({"NEWSLETTER_SECRET": BENCH_KEY})
    messages = Messages(built, settings.site, settings.delivery, keys)
    store = SqliteStore.open(Path(job.store))
    try:
        open_kib = current_rss_kib()
        barrier.wait(START_TIMEOUT)
        wall, cpu = time.perf_counter(), time.process_time()
        if job.kind == "list":
            everyone = list(store.iter_subscribers("active"))
            sent, other = len(everyone), 0
        else:
            sender = Sender(built, store, NullTransport(), messages, rate=None,
                            concurrency=settings.delivery.concurrency)
            report = sender.run(SendOptions(shard=Shard(job.index, job.count)))
            sent, other = report.sent, report.skipped + report.failed + report.unconfirmed
        seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
        return WorkerResult(sent, other, seconds, cpu_seconds, open_kib, peak_rss_kib())
    finally:
        store.close()


# -- the parent ------------------------------------------------------------------------------


def run_workers(jobs: Sequence[Job]) -> list[WorkerResult]:
    """Start one spawned process per job, released together by a barrier; their results."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(jobs))
    pipes, processes = [], []
    try:
        for job in jobs:
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=work, args=(job, barrier, send), daemon=True)
            process.start()
            send.close()  # ours: so recv() sees EOF if the child dies without answering
            pipes.append(receive)
            processes.append(process)
        answers: list[WorkerResult | str] = []
        for receive in pipes:
            try:
                answers.append(receive.recv())
            except EOFError:
                answers.append("the worker exited without answering")
    finally:
        for process in processes:
            process.join(60)
            if process.is_alive():
                process.terminate()
                process.join()
    errors = [a for a in answers if isinstance(a, str)]
    if errors:
        raise SystemExit(f"a {jobs[0].kind} worker failed:\n{errors[0]}")
    return [a for a in answers if isinstance(a, WorkerResult)]


def copy_store(source: Path, target: Path) -> None:
    remove_store(target)
    for suffix in ("", *SIDECARS[:1]):  # a WAL left behind holds committed rows
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


def remove_store(path: Path) -> None:
    for suffix in ("", *SIDECARS):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def check(size: int, workers: int, results: Sequence[WorkerResult], store: Path) -> None:
    """Everyone exactly once: the sends add up to the list, the ledger says sent for all."""
    sent, other = sum(r.sent for r in results), sum(r.other for r in results)
    with SqliteStore.open(store) as opened:
        ledger = opened.ledger_counts(WEEK_ID)
    if sent != size or other or ledger.get("sent") != size or sum(ledger.values()) != size:
        raise SystemExit(f"{size:,} subscribers, {workers} worker(s): sent {sent:,}, "
                         f"skipped/failed/unconfirmed {other:,}, ledger {ledger}")


@dataclass(frozen=True)
class Bench:
    setup: Setup
    config: Path
    issue: Path
    folder: Path

    def jobs(self, kind: str, store: Path, count: int) -> list[Job]:
        return [Job(kind, str(store), str(self.config), str(self.issue), index, count)
                for index in range(1, count + 1)]

    def send_run(self, base: Path, size: int, workers: int) -> list[WorkerResult]:
        store = self.folder / "run.sqlite3"
        copy_store(base, store)
        try:
            results = run_workers(self.jobs("send", store, workers))
            check(size, workers, results, store)
        finally:
            remove_store(store)
        return results

    def list_run(self, base: Path, size: int) -> WorkerResult:
        store = self.folder / "list.sqlite3"
        copy_store(base, store)
        try:
            (result,) = run_workers(self.jobs("list", store, 1))
        finally:
            remove_store(store)
        if result.sent != size:
            raise SystemExit(f"{size:,} subscribers: the list read {result.sent:,}")
        return result


def generate(bench: Bench, size: int) -> tuple[Path, float]:
    """The store every run of this size copies; how long making it took."""
    path = bench.folder / f"list-{size}.sqlite3"
    start = time.perf_counter()
    fill_store(path, size, bench.setup.now).close()
    return path, time.perf_counter() - start


def summarise(size: int, workers: int, runs: Sequence[Sequence[WorkerResult]]) -> Row:
    median = statistics.median
    return Row(
        size, workers, len(runs),
        seconds=median([max(r.seconds for r in run) for run in runs]),
        rate_per_worker=median([statistics.fmean(r.rate for r in run) for run in runs]),
        total_rate=median([sum(r.rate for r in run) for run in runs]),
        cpu_us=median([sum(r.cpu_seconds for r in run) / sum(r.sent for r in run) * 1e6
                       for run in runs]),
        cores=median([sum(r.cpu_seconds for r in run) / max(r.seconds for r in run)
                      for run in runs]),
        peak_kib=median([max(r.peak_kib for r in run) for run in runs]),
        growth_kib=median([max(r.growth_kib for r in run) for run in runs]),
    )


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def bench_size(bench: Bench, size: int, runs: int, workers: Sequence[int]
               ) -> tuple[list[Row], ListRow, float]:
    base, generated = generate(bench, size)
    progress(f"{size:,} subscribers: generated in {generated:.1f} s "
             f"({base.stat().st_size / 1e6:,.0f} MB)")
    try:
        sends: dict[int, list[list[WorkerResult]]] = {n: [] for n in workers}
        lists = []
        for run in range(1, runs + 1):
            for n in workers:
                results = bench.send_run(base, size, n)
                sends[n].append(results)
                progress(f"  run {run}/{runs}, {n} worker(s): "
                         f"{max(r.seconds for r in results):.1f} s, "
                         f"{sum(r.rate for r in results):,.0f} msg/s")
            lists.append(bench.list_run(base, size))
    finally:
        remove_store(base)
    rows = [summarise(size, n, sends[n]) for n in workers]
    list_row = ListRow(size, statistics.median(r.peak_kib for r in lists),
                       statistics.median(r.growth_kib for r in lists))
    return rows, list_row, generated


# -- reporting -------------------------------------------------------------------------------


def mib(kib: float) -> str:
    return f"{kib / 1024:,.1f}"


def send_rows(rows: Sequence[Row]) -> list[list[str]]:
    one = {r.size: r.total_rate for r in rows if r.workers == 1}
    smallest = {r.workers: r.peak_kib for r in reversed(rows)}  # rows are by size, ascending
    return [[f"{r.size:,}", str(r.workers), str(r.runs), f"{r.seconds:,.1f}",
             f"{r.rate_per_worker:,.0f}", f"{r.total_rate:,.0f}",
             f"{r.total_rate / one[r.size]:.2f}x" if r.size in one else "-",
             f"{r.cpu_us:,.0f}", f"{r.cores:.2f}", mib(r.peak_kib), mib(r.growth_kib),
             f"{r.peak_kib / smallest[r.workers]:.2f}x"] for r in rows]


def list_rows(rows: Sequence[ListRow], sends: Sequence[Row]) -> list[list[str]]:
    first = rows[0].peak_kib
    one = {r.size: r.growth_kib for r in sends if r.workers == min(s.workers for s in sends)}
    return [[f"{r.size:,}", mib(r.peak_kib), mib(r.growth_kib), f"{r.peak_kib / first:.2f}x",
             mib(one[r.size])] for r in rows]


def file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (Linux), else "unknown"."""
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and str(path).startswith(fields[1]) and \
                        len(fields[1]) >= len(best):
                    best, kind = fields[1], fields[2]
    except OSError:
        pass
    return kind


def load_average() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def header(ns: argparse.Namespace, folder: Path, generated: Sequence[tuple[int, float]],
           loads: tuple[str, str]) -> str:
    sizes = ", ".join(f"{s:,}" for s in ns.sizes)
    runs = f"median of {ns.runs} run(s)"
    if any(s >= BIG for s in ns.sizes):
        runs += f"; {ns.big_runs} run(s) at {BIG:,} and more"
    return "\n".join([
        "vLLM PR Weekly: send at scale (sharded workers, NullTransport)",
        f"machine: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; "
        f"SQLite {sqlite3.sqlite_version}; stores in {folder.parent} "
        f"({file_system(folder)}); load average (1/5/15 min) {loads[0]} at the start, "
        f"{loads[1]} at the end",
        f"issue: sample feed, week {WEEK_ID}; lists of {sizes} active subscribers; "
        f"{', '.join(map(str, ns.workers))} worker process(es) (spawn), concurrency 4 each, "
        f"no rate limit; {runs}",
        "generated (not measured): " + ", ".join(f"{s:,} in {t:.1f} s" for s, t in generated),
    ])


def report(ns: argparse.Namespace, folder: Path, rows: Sequence[Row],
           lists: Sequence[ListRow], generated: Sequence[tuple[int, float]],
           loads: tuple[str, str]) -> str:
    smallest = f"{ns.sizes[0]:,}"
    return "\n\n".join([
        header(ns, folder, generated, loads),
        table(["subscribers", "workers", "runs", "wall s", "msg/s per worker", "total msg/s",
               "vs 1 worker", "CPU µs/msg", "cores busy", "peak RSS MiB", "growth MiB",
               f"peak vs {smallest}"], send_rows(rows)),
        "wall s = the slowest worker's Sender.run; cores busy = the workers' CPU seconds / "
        "wall s; peak RSS = the\nlargest worker's ru_maxrss; growth = that peak minus its RSS "
        "once the store was open. Every run checked:\neach subscriber sent exactly once.",
        table(["subscribers", "whole list: peak RSS MiB", "growth MiB", f"vs {smallest}",
               f"send growth MiB ({min(ns.workers)} worker)"], list_rows(lists, rows)),
        "whole list = a worker that only does list(store.iter_subscribers('active')): what a "
        "send loop that did\nnot stream would hold.",
    ])


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help=f"sizes {','.join(map(str, FULL_SIZES))} (45-75 minutes)")
    parser.add_argument("--sizes", type=numbers, default=None,
                        help=f"comma-separated list sizes ({','.join(map(str, SIZES))})")
    parser.add_argument("--runs", type=int, default=RUNS,
                        help=f"runs per size below {BIG:,} ({RUNS})")
    parser.add_argument("--big-runs", type=int, default=BIG_RUNS,
                        help=f"runs per size of {BIG:,} and more ({BIG_RUNS})")
    parser.add_argument("--workers", type=numbers, default=WORKERS,
                        help="comma-separated worker counts (1,2)")
    ns = parser.parse_args(argv)
    if ns.sizes is None:
        ns.sizes = FULL_SIZES if ns.full else SIZES
    ns.sizes = tuple(sorted(set(ns.sizes)))
    ns.workers = tuple(sorted(set(ns.workers)))
    counts = (ns.runs, ns.big_runs, *ns.sizes, *ns.workers)
    if not ns.sizes or not ns.workers or min(counts) < 1:
        parser.error("every count, size and worker count must be at least 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    started, load_start = time.perf_counter(), load_average()
    rows: list[Row] = []
    lists: list[ListRow] = []
    generated: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folder = Path(tmp)
        setup = prepare(folder)
        bench = Bench(setup, folder / "newsletter.toml", setup.built.folder, folder)
        for size in ns.sizes:
            size_rows, list_row, seconds = bench_size(
                bench, size, ns.big_runs if size >= BIG else ns.runs, ns.workers)
            rows += size_rows
            lists.append(list_row)
            generated.append((size, seconds))
        print(report(ns, folder, rows, lists, generated, (load_start, load_average())))
    print(f"\n(took {time.perf_counter() - started:,.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
