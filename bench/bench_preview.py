"""Benchmark of ``newsletter preview``: what the editor waits for, with and without screenshots.

The bundled sample (``examples/sample-feed.atom``, 2026-W48: eight reviews, four layouts, twelve
screenshots) is previewed in a temp project with ``pipeline.stages.preview.preview_issue``, in
process (build → proof → the preview folder; what the command does minus Python's start-up and
its printing). Nothing is written in the work tree. Rows:

* **old way** (the baseline, measured in the same run): the preview without screenshots, then
  the twelve shots as the preview took them before issue 17 (kept below as
  ``old_take_screenshots``): one ``chromium --headless --screenshot`` process per shot, two
  at a time, after one ``--dump-dom`` run measuring every email's height.
* **cold**: no previous preview, so no shot to reuse: one Chromium started through Playwright.
* **warm**: the same issue again, nothing changed: every shot reused, no browser started.
* **one item changed**: the editor's file gives one PR a note (alternating between two notes,
  so every run is a change); that item is in every layout, so all twelve shots are retaken,
  by a Chromium started for the run (``preview`` run again) or by one already up (``--watch``
  keeps its browser).
* **watch page**: the same change under ``--watch``: the time until the new page is written
  (screenshots of the changed pages follow; the watch polls every 0.2 s on top of this).

Each figure is the median of ``--runs`` runs (default 3) after one warm-up run; ``vs old`` is
the old way's time over the row's. Run: ``make bench`` or ``.venv/bin/python
bench/bench_preview.py [--runs N]``. Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_build import table

from pipeline.config import Settings, load
from pipeline.stages.preview import PREVIEW_DIR, Screenshotter, preview_issue
from pipeline.stages.screenshots import SCREENSHOT_DIR, Shot, planned_shots

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
WEEK_ID = "2026-W48"
CHANGED_PR = 54934  # a PR of the sample


# -- the old way, as pipeline/stages/preview.py took its shots before issue 17 ----------------

#: Chromium started by hand, as the old way did (Playwright adds most of these itself).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--force-device-scale-factor=1")
MIN_WINDOW_WIDTH = 500
MAX_SHOT_HEIGHT = 16_000
FALLBACK_HEIGHT = 4_000
CHROMIUM_TIMEOUT_S = 90


def old_take_screenshots(chromium: str, folder: Path, shots: Sequence[Shot],
                         *, workers: int = 2) -> list[str]:
    """PNGs of ``folder``'s email copies by Chromium's CLI, one process per shot."""
    out = folder / SCREENSHOT_DIR
    out.mkdir(exist_ok=True)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="newsletter-shots-") as tmp:
        work = Path(tmp)
        heights, _ = _measure(chromium, folder, shots, work)

        def one(numbered: tuple[int, Shot]) -> str | None:
            n, shot = numbered
            height = min(heights.get(shot, FALLBACK_HEIGHT), MAX_SHOT_HEIGHT)
            frame = work / f"frame-{n}.html"
            frame.write_text(_frame_page(folder / shot.source, shot.width, height),
                             encoding="utf-8")
            target = out / shot.name
            window = f"{max(shot.width, MIN_WINDOW_WIDTH)},{height}"
            failure = _chromium(chromium, work / f"profile-{n}",
                                [f"--window-size={window}", f"--screenshot={target}",
                                 frame.as_uri()])
            if failure:
                notes.append(f"{shot.name}: {failure}")
                return None
            return shot.name

        with ThreadPoolExecutor(max_workers=workers) as pool:
            made = [name for name in pool.map(one, enumerate(shots)) if name]
    if notes:
        raise SystemExit(f"the old way failed: {notes[0]}")
    return made


def _measure(chromium: str, folder: Path, shots: Sequence[Shot], work: Path
             ) -> tuple[dict[Shot, int], str | None]:
    keys = {f"s{n}": shot for n, shot in enumerate(shots)}
    frames = "".join(
        f'<iframe data-key="{key}" src="{(folder / shot.source).as_uri()}" '
        f'width="{shot.width}" height="100" scrolling="no"></iframe>'
        for key, shot in keys.items())
    page = work / "measure.html"
    page.write_text(
        '<!doctype html><html><head><meta charset="utf-8"></head><body>' + frames +
        "<script>addEventListener('load', function () {"
        " document.querySelectorAll('iframe').forEach(function (f) {"
        " f.setAttribute('data-height', String(f.contentDocument.documentElement"
        ".scrollHeight)); }); });</script></body></html>", encoding="utf-8")
    result: dict[str, Any] = {}
    failure = _chromium(chromium, work / "profile-measure",
                        ["--allow-file-access-from-files", "--window-size=1400,900",
                         "--dump-dom", page.as_uri()], result)
    if failure:
        return {}, failure
    found = dict(re.findall(r'data-key="(s\d+)"[^>]*?data-height="(\d+)"',
                            result.get("stdout", "")))
    heights = {keys[key]: int(value) for key, value in found.items() if int(value) > 0}
    return heights, None


def _frame_page(source: Path, width: int, height: int) -> str:
    return ('<!doctype html><html><head><meta charset="utf-8"><style>html,body{margin:0;'
            'background:#8c959f}iframe{display:block;border:0;margin:0 auto}</style></head>'
            f'<body><iframe src="{source.as_uri()}" width="{width}" height="{height}" '
            'scrolling="no" title="email"></iframe></body></html>')


def _chromium(chromium: str, profile: Path, args: Sequence[str],
              result: dict[str, Any] | None = None) -> str | None:
    command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True, errors="replace",
                               start_new_session=True)
    try:
        stdout, _ = process.communicate(timeout=CHROMIUM_TIMEOUT_S)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if result is not None:
        result["stdout"] = stdout
    return None if process.returncode == 0 else f"Chromium exited {process.returncode}"


# -- the rows -------------------------------------------------------------------------------


class Project:
    """The sample in a temp project; ``change()`` gives one item another editor's note."""

    def __init__(self, folder: Path) -> None:
        config = folder / "newsletter.toml"
        config.write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
        self.settings: Settings = load(config, {})
        self.editorial = folder / "editorial" / f"{WEEK_ID}.toml"
        self.editorial.parent.mkdir()
        self.turn = 0

    @property
    def preview(self) -> Path:
        return self.settings.resolve(self.settings.paths.build_dir) / "issues" / WEEK_ID / \
            PREVIEW_DIR

    def change(self) -> None:
        self.turn += 1
        self.editorial.write_text(f'[{CHANGED_PR}]\nnote = "Read it: take {self.turn}"\n',
                                  encoding="utf-8")

    def run(self, **shots: Any) -> int:
        """One preview; the number of screenshots it holds."""
        _, _, preview = preview_issue(self.settings, WEEK_ID, approve_command="approve",
                                      **shots)
        return len(preview.screenshots.files)


def timed(prepare: Callable[[], object], fn: Callable[[], object], runs: int) -> float:
    """Median seconds of ``fn`` over ``runs`` runs after a warm-up, ``prepare`` before each."""
    samples = []
    for n in range(runs + 1):
        prepare()
        start = time.perf_counter()
        fn()
        if n:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def expect(count: int, made: int) -> None:
    if made != count:
        raise SystemExit(f"expected {count} screenshots, the preview holds {made}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("bench_preview: no chromium on the PATH (Debian's chromium)")
    shots = len(planned_shots())
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-preview-") as tmp:
        project = Project(Path(tmp))

        def fresh() -> None:
            shutil.rmtree(project.preview, ignore_errors=True)

        def old() -> None:
            project.run()
            expect(shots, len(old_take_screenshots(chromium, project.preview,
                                                   planned_shots())))

        def new() -> None:
            expect(shots, project.run(chromium=chromium))

        old_s = timed(fresh, old, args.runs)
        rows.append(("old way (CLI per shot)", f"{shots} shot", old_s))
        rows.append(("cold (no previous preview)", f"{shots} shot", timed(fresh, new, args.runs)))
        rows.append(("warm (nothing changed)", f"{shots} reused",
                     timed(lambda: None, new, args.runs)))
        rows.append(("one item changed, Chromium started", f"{shots} shot",
                     timed(project.change, new, args.runs)))
        with Screenshotter(chromium) as kept:
            project.run(shooter=kept)  # the browser up, as --watch has it after its first run
            rows.append(("one item changed, Chromium up (watch)", f"{shots} shot",
                         timed(project.change, lambda: project.run(shooter=kept), args.runs)))
            page = timed(project.change, lambda: project.run(shooter=kept, cached_only=True),
                         args.runs)
            rows.append(("watch: page written, before its shots", "0 shot", page))
        rows.append(("--no-screenshots", "0 shot", timed(project.change, project.run,
                                                         args.runs)))
    print(f"preview of the sample ({WEEK_ID}, 4 layouts), median of {args.runs} runs; "
          f"Python {platform.python_version()}, {os.cpu_count()} cores")
    print(table(["what", "screenshots", "seconds", "vs old"],
                [[what, note, f"{s:.2f}", f"{old_s / s:.1f}x"] for what, note, s in rows]))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
