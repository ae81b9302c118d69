"""Benchmark of the subscription app's Lambda package: its size, and its handler's cold import.

A cold start of the function imports ``pipeline.web.lambda_app``, which wires the app (the
settings, the DynamoDB and SES clients, the sign-up queue) before the first request is
answered; every visitor who arrives at a cold function waits for it. Lambda's code folder is
read-only, so a module shipped without its bytecode is compiled again at every cold start:
``deploy/build-function.sh`` ships the bytecode.

* ``size``: the package that ``deploy/build-function.sh`` writes (into a temp folder), every
  file's bytes summed (what Lambda counts against its 250 MB), and its five largest parts;
* ``cold import``: ``python -I -S`` with the package alone on ``sys.path`` (as Lambda's
  runtime sees it), the production settings (DynamoDB store, SES, the sign-up queue; no
  request is made at import), the time ``import pipeline.web.lambda_app`` takes, median of
  ``--runs`` fresh processes. Baseline, in the same run: the same package without its
  bytecode, with ``-B`` so nothing is written (a read-only folder): what every cold start
  paid before.

Targets (issue 38): ≤ 40 MB unpacked; cold import ≤ 0.8 s on the project's 2-core machine.

Run: ``make bench`` or ``.venv/bin/python bench/bench_lambda.py [--runs N] [--package DIR]``.
Nothing here asserts: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_build import table

ROOT = Path(__file__).resolve().parent.parent
RUNS = 7

_IMPORT = """
import sys, time
sys.path.insert(0, sys.argv[1])
start = time.perf_counter()
import pipeline.web.lambda_app
print(time.perf_counter() - start)
"""

#: What deploy/template.yaml gives the function, pointed at an address where nothing
#: listens (the import makes no request).
PRODUCTION = {
    "NEWSLETTER_STORE_BACKEND": "dynamodb", "NEWSLETTER_DELIVERY_TRANSPORT": "ses",
    "NEWSLETTER_DELIVERY_FROM": "vLLM PR Weekly <weekly@example.org>",
    "NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
    "NEWSLETTER_SITE_BASE_URL": "https://example.org",
    "NEWSLETTER_SITE_APP_URL": "https://example.org/api",
    "NEWSLETTER_SECRET": "bench-signing-key-0123456789abcdef",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def size_of(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def cold_import(package: Path, scratch: Path, *, compiled: bool) -> float:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
           "NEWSLETTER_PATHS_BUILD_DIR": str(scratch / "build"),
           "NEWSLETTER_PATHS_DATA_DIR": str(scratch / "data"), **PRODUCTION}
    flags = ["-I", "-S"] if compiled else ["-I", "-S", "-B"]
    result = subprocess.run([sys.executable, *flags, "-c", _IMPORT, str(package)], cwd=scratch,
                            env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the handler did not import: {result.stderr.strip()[-600:]}")
    return float(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--package", type=Path,
                        help="measure this built package instead of building one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lambda-") as temp:
        scratch = Path(temp)
        package = args.package
        if package is None:
            package = scratch / "function"
            subprocess.run(["bash", str(ROOT / "deploy" / "build-function.sh"), str(package)],
                           check=True, env={**os.environ, "PYTHON": sys.executable},
                           stdout=subprocess.DEVNULL)
        bare = scratch / "without-bytecode"
        shutil.copytree(package, bare, ignore=shutil.ignore_patterns("__pycache__"))

        total = size_of(package)
        parts = sorted(((size_of(p), p.name) for p in package.iterdir() if p.is_dir()
                        and not p.name.endswith((".dist-info", "__pycache__"))), reverse=True)
        print(f"Lambda package ({package}): {len(list(package.rglob('*')))} files\n")
        print(table(["what", "size", "target"],
                    [["unpacked, every file", f"{total / 1e6:.1f} MB", "40 MB"],
                     *([f"  {name}/", f"{size / 1e6:.1f} MB", ""] for size, name in parts[:5])]))

        timings = {compiled: statistics.median(cold_import(package if compiled else bare,
                                                           scratch, compiled=compiled)
                                               for _ in range(args.runs))
                   for compiled in (True, False)}
        print(f"\nThe handler's cold import (python -I -S, production settings), "
              f"median of {args.runs}; load {os.getloadavg()[0]:.1f}\n")
        print(table(["package", "cold import", "× baseline", "target"],
                    [["with its bytecode (as shipped)", f"{timings[True]:.2f} s",
                      f"{timings[True] / timings[False]:.2f}x", "0.8 s"],
                     ["without (baseline: compiled at every start)", f"{timings[False]:.2f} s",
                      "1.00x", ""]]))


if __name__ == "__main__":
    main()
