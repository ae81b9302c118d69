"""Benchmark of whole commands: what an editor or a scheduler waits for, start-up included.

The other benchmarks time the work inside one Python process; a user runs ``newsletter``, so
they also wait for the interpreter to start, every module the command imports, the templates
compiled and the files written. Here each command runs as its own process (``.venv/bin/
newsletter``) in a temp project whose ``newsletter.toml`` reads the bundled sample feed, and
the wall time from its start to its exit is measured:

* ``--help``: the parser of every command, nothing else;
* ``build`` of the sample week (8 PRs) and of a synthetic 200-PR week (bench_build.py's
  ``synthetic_feed``: the sample's reviews with new numbers, both languages);
* ``preview`` as ``make preview`` runs it, cold (a fresh project): until the page is served
  (the wait of the editor, who reads the page while its twelve screenshots are taken);
* ``preview --no-serve``: ``cold`` in a fresh project (no earlier build, no screenshot
  kept), ``warm`` the same issue again (nothing changed); with Chromium installed it takes
  the twelve screenshots before it exits, without it the row says so;
* ``subscribers import --confirmed`` of 100,000 generated rows (bench_import.py's
  ``write_csv``) into a fresh SQLite store.

Each row is the median of ``--runs`` runs (5; 3 for preview and import) after one warm-up run
that lets Python write its bytecode (``PYTHONDONTWRITEBYTECODE`` is unset for the commands,
and ``PYTHONPYCACHEPREFIX`` keeps the files out of the work tree). Compiled templates are
never kept between commands (issue 39): every command compiles the ones it renders.
Baseline, measured in the same run: the venv's Python starting and exiting
(``python -c pass``), the floor of any command; ``× python`` is the row over it. ``target``
is the whole-process time issue 42 asks for on a quiet 2-core machine; the machine's load
average is printed, since other work on it shows in every figure.

Run: ``make bench`` or ``.venv/bin/python bench/bench_process.py [--runs N] [--rows 100000]``.
Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench_build import SAMPLE_FEED, WEEK_ID, read_sample, synthetic_feed, table
from bench_import import write_csv

from pipeline.config import load
from pipeline.week import parse_week

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RUNS = 5
SLOW_RUNS = 3


def command_env(cache: Path) -> dict[str, str]:
    """The environment a user's shell gives a command: bytecode written (where the sandbox
    forbids it, it would be compiled on every start), into ``cache``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "NEWSLETTER_SECRET")
           and not k.startswith("NEWSLETTER_")}
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    return env


def timed(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                            check=False, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result.returncode}: "
                         f"{(result.stderr or result.stdout).strip()[-400:]}")
    return seconds


def until_served(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from the start of a serving ``preview`` to its "serving at" line; then Ctrl-C."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("serving at "):
            break
    seconds = time.perf_counter() - start
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    if not lines or not lines[-1].startswith("serving at "):
        raise SystemExit(f"{' '.join(argv)} served nothing: {''.join(lines)[-400:]}")
    return seconds


def median(run: Callable[[], float], runs: int) -> float:
    run()  # warm-up: bytecode written
    return statistics.median(run() for _ in range(runs))


def project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "newsletter.toml").write_text(
        f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--rows", type=int, default=100_000)
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    slow = min(ns.runs, SLOW_RUNS)
    newsletter = str(BIN / "newsletter")
    with tempfile.TemporaryDirectory(prefix="bench-process-") as tmp:
        base = Path(tmp)
        env = command_env(base / "cache")
        work = project(base / "project")
        settings = load(work / "newsletter.toml", {})
        week = parse_week(WEEK_ID, settings.issue.timezone)
        big = base / "200.atom"
        big.write_bytes(synthetic_feed(read_sample(), 200, week))
        rows_csv = base / "rows.csv"
        write_csv(rows_csv, ns.rows)

        def run(*args: str, cwd: Path = work) -> Callable[[], float]:
            return lambda: timed([newsletter, *args], cwd, env)

        python = median(lambda: timed([sys.executable, "-c", "pass"], work, env), ns.runs)
        figures: list[tuple[str, str, float, str]] = [
            ("python -c pass", "-", python, "-"),
            ("newsletter --help", "-", median(run("--help"), ns.runs), "-"),
        ]
        build8 = median(run("build", "--week", WEEK_ID, "--out", str(base / "b8")), ns.runs)
        build200 = median(run("build", "--week", WEEK_ID, "--feed", str(big), "--out",
                              str(base / "b200")), ns.runs)
        figures += [("build", "8 PRs", build8, "1.0"), ("build", "200 PRs", build200, "2.0")]
        shots = "12 shots" if shutil.which("chromium") else "no Chromium: no shots"
        counter = iter(range(1000))

        def cold() -> float:
            fresh = project(base / f"preview-{next(counter)}")
            return timed([newsletter, "preview", "--week", WEEK_ID, "--no-serve"], fresh, env)

        def served() -> float:
            fresh = project(base / f"preview-{next(counter)}")
            return until_served([newsletter, "preview", "--week", WEEK_ID], fresh, env)

        warm_project = project(base / "preview-warm")
        figures += [
            ("preview, cold, until served", shots, median(served, slow), "3.5"),
            ("preview --no-serve, cold", shots, median(cold, slow), "-"),
            ("preview --no-serve, warm", shots,
             median(lambda: timed([newsletter, "preview", "--week", WEEK_ID, "--no-serve"],
                                  warm_project, env), slow), "-"),
        ]

        def imported() -> float:
            fresh = project(base / f"import-{next(counter)}")
            return timed([newsletter, "subscribers", "import", str(rows_csv), "--confirmed"],
                         fresh, env)

        figures.append(("subscribers import", f"{ns.rows:,} rows", median(imported, slow),
                        "5.0" if ns.rows == 100_000 else "-"))
    load_avg = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(f"## Whole commands (wall time from start to exit; load average {load_avg})\n")
    print(table(["command", "size", "median s", "target s", "× python"],
                [[name, size, f"{seconds:.2f}", target, f"{seconds / python:.1f}x"]
                 for name, size, seconds, target in figures]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
