"""Benchmark of ``newsletter subscribers import``: how close the checked import comes to a
raw insert of the same rows.

What it measures: a generated CSV file (``email,layout,areas``; defaults 10,000 and 100,000
rows, every address distinct and valid; 2,000 domains, the first few much commoner than the
rest, as a real list's are; every fourth row with an area or two) imported with
``--confirmed`` into a fresh SQLite file, through the command itself
(``pipeline.cli.main``, in this process, its output discarded): reading and checking the
CSV, email-validator's normal form of each address, the suppression and presence look-ups,
consent recorded, one transaction per batch of ``IMPORT_BATCH`` rows (1,000), each
committed with ``synchronous = FULL`` as the store always does. The clock runs from the
call to its return; a fresh file per run.

Baseline, measured in the same run: the rows that import stored (read back from its file,
every column) inserted into another fresh file of the same schema (``SqliteStore.open``
makes it) with one ``executemany`` in one transaction: the floor, with no check, no look-up
and one commit. ``vs raw`` is the import's median over the baseline's median; the CPU
columns (``time.process_time``) say the same without the waits (fsync, other work on the
machine), which dominate the wall time on a busy machine.

Each figure is the median of ``--runs`` runs (5; 3 at 100,000 and above). The machine's
load average is printed: other work on it shows in the figures (fsync waits most).

Run: ``make bench`` or ``.venv/bin/python bench/bench_import.py [--sizes 10000,100000]
[--runs N]``. Nothing here asserts on time: it is a measurement, not a test. It stops if an
import does not store every row, since its figures would be wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_build import table

from pipeline.cli import main as newsletter
from pipeline.cli.subscribers import IMPORT_BATCH
from subscribers.model import LAYOUTS
from subscribers.store.sqlite import FILE_NAME, SqliteStore

SIZES = (10_000, 100_000)
RUNS = 5
BIG_RUNS = 3
BIG = 100_000
DOMAINS = 2_000
AREAS = ("rocm", "kv-connector", "multimodal", "cpu", "speculative-decoding")
COLUMNS = ("id", "email", "email_key", "status", "layout", "consent_at", "consent_source",
           "created_at", "confirmed_at", "updated_at", "consent_ip", "transient_bounces",
           "mail_event_at", "areas")


@dataclass(frozen=True)
class Result:
    size: int
    runs: int
    import_s: float
    import_cpu: float
    raw_s: float
    raw_cpu: float


def write_csv(path: Path, size: int, seed: int = 17) -> list[str]:
    """The file to import; its addresses."""
    pick = random.Random(seed)
    domains = [f"mail{n}.example{n % 7}.org" for n in range(DOMAINS)]
    weights = [1.0 / (rank + 1) for rank in range(DOMAINS)]  # a few big providers
    chosen = pick.choices(domains, weights, k=size)
    addresses = [f"Reader.{n}@{domain.upper() if n % 5 == 0 else domain}"
                 for n, domain in enumerate(chosen)]
    lines = ["email,layout,areas"]
    for n, address in enumerate(addresses):
        areas = ";".join(pick.sample(AREAS, pick.randint(1, 2))) if n % 4 == 0 else ""
        lines.append(f"{address},{LAYOUTS[n % len(LAYOUTS)]},{areas}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return addresses


def import_once(folder: Path, csv_file: Path, size: int) -> tuple[float, float, Path]:
    """Seconds (wall, CPU) for ``subscribers import --confirmed`` into a fresh store in
    ``folder``."""
    config = folder / "newsletter.toml"
    config.write_text(f'[paths]\ndata_dir = "{folder / "data"}"\n', encoding="utf-8")
    sink = io.StringIO()
    started, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = newsletter(["--config", str(config), "subscribers", "import", str(csv_file),
                           "--confirmed"])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if code != 0 or not sink.getvalue().startswith(f"imported {size} new,"):
        raise SystemExit(f"the import did not store every row: {sink.getvalue()[:300]}")
    return seconds, cpu, folder / "data" / FILE_NAME


def raw_once(folder: Path, rows: list[tuple[object, ...]]) -> tuple[float, float]:
    """Seconds (wall, CPU) for one executemany of ``rows`` in one transaction into a fresh
    file."""
    SqliteStore.open(folder / FILE_NAME).close()  # the same schema, migrated
    conn = sqlite3.connect(folder / FILE_NAME, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = FULL")
        marks = ",".join("?" * len(COLUMNS))
        insert = f"INSERT INTO subscribers ({','.join(COLUMNS)}) VALUES ({marks})"  # noqa: S608
        started, cpu = time.perf_counter(), time.process_time()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        conn.close()


def stored_rows(store_file: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(store_file)
    try:
        return conn.execute(f"SELECT {','.join(COLUMNS)} FROM subscribers").fetchall()  # noqa: S608
    finally:
        conn.close()


def measure(size: int, runs: int, work: Path) -> Result:
    csv_file = work / f"list-{size}.csv"
    write_csv(csv_file, size)
    imports: list[tuple[float, float]] = []
    raws: list[tuple[float, float]] = []
    for run in range(runs):
        folder = work / f"import-{size}-{run}"
        folder.mkdir()
        seconds, cpu, store_file = import_once(folder, csv_file, size)
        imports.append((seconds, cpu))
        rows = stored_rows(store_file)
        if len(rows) != size:
            raise SystemExit(f"{len(rows)} rows stored of {size}")
        raw_folder = work / f"raw-{size}-{run}"
        raw_folder.mkdir()
        raws.append(raw_once(raw_folder, rows))
    return Result(size, runs, statistics.median(s for s, _ in imports),
                  statistics.median(c for _, c in imports), statistics.median(s for s, _ in raws),
                  statistics.median(c for _, c in raws))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="rows per file, comma-separated (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=None,
                        help=f"runs per size (default: {RUNS}; {BIG_RUNS} from {BIG:,} rows)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    sizes = [int(size) for size in ns.sizes.split(",")]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        for size in sizes:
            runs = ns.runs or (BIG_RUNS if size >= BIG else RUNS)
            results.append(measure(size, runs, Path(tmp)))
    print(f"subscribers import --confirmed, fresh SQLite file, batches of {IMPORT_BATCH:,} "
          f"(Python {platform.python_version()}, load average "
          f"{' '.join(f'{n:.1f}' for n in os.getloadavg())})")
    print(table(["rows", "runs", "import s", "rows/s", "raw executemany s", "vs raw",
                 "import CPU s", "raw CPU s", "CPU vs raw"],
                [[str(r.size), str(r.runs), f"{r.import_s:.2f}", f"{r.size / r.import_s:,.0f}",
                  f"{r.raw_s:.2f}", f"{r.import_s / r.raw_s:.2f}x", f"{r.import_cpu:.2f}",
                  f"{r.raw_cpu:.2f}", f"{r.import_cpu / r.raw_cpu:.2f}x"] for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
