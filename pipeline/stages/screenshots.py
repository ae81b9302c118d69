"""The preview's screenshots: one Chromium for all of them, tabs in parallel, each page opened
once for all its widths, and only what changed re-shot.

Each shot is keyed by a hash of what decides its pixels: the email copy's bytes, the width,
the colour scheme, the height cap, how shots are taken (``RECIPE``) and which Chromium takes
them (its path, size and mtime: an upgraded browser re-shoots). ``screenshots/shots.json``
records each PNG's key and the SHA-256 of its bytes. The next preview copies a PNG from the
previous folder only when its key matches and its bytes still hash to what was recorded; a
missing, unreadable, stale or corrupt entry (or manifest) is shot again, never shown wrong.
The emails load nothing from outside (no images, no fonts by URL), so their HTML decides
their rendering.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pipeline.model import LAYOUTS
from pipeline.stages.built import PREVIEW_DIR
from pipeline.stages.headless import CALL_TIMEOUT_S, BrowserError, Chromium, Tab

SCREENSHOT_DIR = "screenshots"
MANIFEST = "shots.json"
#: The widths every layout is shown at: a phone and the email's desktop column.
WIDTHS = (375, 600)
#: The dark rendering's width (dark mode is mostly read on phones).
DARK_WIDTH = 375
#: Longer shots are cut here (and the page says so).
MAX_SHOT_HEIGHT = 16_000
#: How shots are taken; change it when that changes, and every cached shot is retaken.
RECIPE = "devtools-viewport-1"
#: Tabs shooting at once (the machines have two cores; a third tab hides the waits).
WORKERS = 3
_PNG = b"\x89PNG\r\n\x1a\n"


def shots_of(issue_folder: Path) -> Path:
    """Where an issue's last preview keeps its screenshots (and their manifest)."""
    return issue_folder / PREVIEW_DIR / SCREENSHOT_DIR


def copy_name(layout: str, *, dark: bool = False) -> str:
    return f"email-{layout}{'-dark' if dark else ''}.html"


@dataclass(frozen=True)
class Shot:
    """One screenshot: a layout's copy rendered ``width`` px wide."""

    layout: str
    width: int
    dark: bool = False

    @property
    def name(self) -> str:
        return f"{self.layout}{'-dark' if self.dark else ''}-{self.width}.png"

    @property
    def source(self) -> str:
        return copy_name(self.layout, dark=self.dark)


def planned_shots(layouts: Sequence[str] = LAYOUTS) -> list[Shot]:
    shots = [Shot(layout, width) for layout in layouts for width in WIDTHS]
    return shots + [Shot(layout, DARK_WIDTH, dark=True) for layout in layouts]


@dataclass(frozen=True)
class Screenshots:
    """What the screenshot step produced: file names under ``screenshots/`` and notes."""

    files: tuple[str, ...] = ()
    #: Why screenshots were skipped, or what went wrong with some (shown on the page).
    notes: tuple[str, ...] = ()
    #: How many of ``files`` were copied from the previous preview rather than shot.
    reused: int = 0


def shot_key(html: bytes, shot: Shot, browser: str) -> str:
    """What decides a shot's pixels, hashed (``browser``: ``browser_identity``)."""
    digest = hashlib.sha256()
    for part in (RECIPE, browser, str(shot.width), "dark" if shot.dark else "light",
                 str(MAX_SHOT_HEIGHT)):
        digest.update(part.encode() + b"\0")
    digest.update(html)
    return digest.hexdigest()


def browser_identity(executable: str) -> str:
    """The browser as far as the cache cares: its path, and its size and mtime (an upgrade)."""
    try:
        stat = os.stat(os.path.realpath(executable))
    except OSError:
        return executable
    return f"{executable}:{stat.st_size}:{stat.st_mtime_ns}"


def read_manifest(folder: Path) -> dict[str, dict[str, str]]:
    """``folder/shots.json``: name → {key, sha256}; empty when missing or not understood."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {name: entry for name, entry in data.items()
            if isinstance(entry, dict) and isinstance(entry.get("key"), str)
            and isinstance(entry.get("sha256"), str)}


def _reuse(previous: Path, entry: dict[str, str] | None, key: str, target: Path) -> bool:
    """Copy the previous PNG to ``target`` when it is this shot, whole; else False."""
    if entry is None or entry["key"] != key:
        return False
    try:
        data = (previous / target.name).read_bytes()
    except OSError:
        return False
    if not data.startswith(_PNG) or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return False
    target.write_bytes(data)
    return True


class Screenshotter:
    """Takes a preview's shots. Chromium starts at the first shot the cache cannot give and
    stays up until ``close()``, so ``preview --watch`` pays its start-up once."""

    def __init__(self, executable: str, *, workers: int = WORKERS) -> None:
        self.executable = executable
        self.workers = workers
        self.identity = browser_identity(executable)
        self._browser: Chromium | None = None
        self._tabs: queue.Queue[Tab] = queue.Queue()
        #: Tabs opened in this browser (free ones wait in ``_tabs``).
        self._opened = 0
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None

    def __enter__(self) -> Screenshotter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        # A browser still starting is waited for, then ended: none outlives the command.
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        if self._browser is not None:
            self._browser.close()
            self._browser = None
            self._tabs = queue.Queue()
            self._opened = 0

    def take(self, folder: Path, shots: Sequence[Shot], previous: Path | None = None, *,
             cached_only: bool = False) -> Screenshots:
        """PNGs of ``folder``'s email copies into ``folder/screenshots/``, reusing those of
        ``previous`` (a former ``screenshots/`` folder) whose key still matches; with
        ``cached_only`` nothing is shot (a note says how many are left to take)."""
        out = folder / SCREENSHOT_DIR
        out.mkdir(exist_ok=True)
        old = read_manifest(previous) if previous else {}
        manifest: dict[str, dict[str, str]] = {}
        notes: list[str] = []
        sources = {shot.source: (folder / shot.source).read_bytes() for shot in shots}
        keys = {shot: shot_key(sources[shot.source], shot, self.identity) for shot in shots}
        kept = {shot for shot in shots if previous and _reuse(
            previous, old.get(shot.name), keys[shot], out / shot.name)}
        # The longest work first (a page's pixels, whatever its width, follow its bytes, and
        # each width is one more shot of it): a long page started last would keep one tab
        # busy while the others idle.
        todo = [shot for shot in shots if shot not in kept]
        widths = Counter(shot.source for shot in todo)
        todo.sort(key=lambda shot: -len(sources[shot.source]) * widths[shot.source])
        if todo and cached_only:
            notes.append(f"{len(todo)} screenshot(s) of changed pages are being taken: "
                         "reload in a moment")
        elif todo:
            # A page byte for byte another's, at the same width and scheme (the same key),
            # is shot once and its PNG copied.
            first: dict[str, Shot] = {}
            for shot in todo:
                first.setdefault(keys[shot], shot)
            notes += self._shoot(folder, list(first.values()))
            for shot in todo:
                taken = out / first[keys[shot]].name
                if first[keys[shot]] is not shot and taken.is_file():
                    try:
                        shutil.copyfile(taken, out / shot.name)
                    except OSError as exc:
                        notes.append(f"{shot.name}: {exc.strerror or exc}")
        files = []
        for shot in shots:
            target = out / shot.name
            if shot in kept:  # its bytes were just checked against this hash
                digest = old[shot.name]["sha256"]
            elif target.is_file():
                digest = hashlib.sha256(target.read_bytes()).hexdigest()
            else:
                continue
            files.append(shot.name)
            manifest[shot.name] = {"key": keys[shot], "sha256": digest}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True),
                                    encoding="utf-8")
        reused = len(kept)
        if not files and not notes:
            notes.append("no screenshot was planned")
        return Screenshots(tuple(files), tuple(notes), reused)

    def _shoot(self, folder: Path, shots: Sequence[Shot]) -> list[str]:
        """Shoot ``shots`` on the browser's tabs, each page opened once for all its widths,
        pages in the order of their first shot; the notes of what went wrong. Each tab is
        opened by the first page that needs it, so the first shot starts as soon as one tab
        is up rather than after all of them."""
        try:
            self._start()
        except BrowserError as exc:
            self.close()
            return [str(exc)]
        notes: list[str] = []
        pages: dict[str, list[Shot]] = {}
        for shot in shots:
            pages.setdefault(shot.source, []).append(shot)
        tabs = min(self.workers, len(pages))

        def one(page: list[Shot]) -> None:
            try:
                tab = self._tab(tabs)
            except BrowserError as exc:
                notes.extend(f"{shot.name}: {exc}" for shot in page)
                return
            left = {shot.width: shot for shot in page}
            try:
                for width, png, height in tab.screenshots(
                        (folder / page[0].source).as_uri(), list(left),
                        max_height=MAX_SHOT_HEIGHT):
                    shot = left[width]
                    if not png.startswith(_PNG):
                        raise BrowserError("no PNG came back")
                    (folder / SCREENSHOT_DIR / shot.name).write_bytes(png)
                    del left[width]
                    if height > MAX_SHOT_HEIGHT:
                        notes.append(f"{shot.name}: cut at {MAX_SHOT_HEIGHT} px of {height}")
            except (BrowserError, OSError, KeyError, ValueError) as exc:
                for shot in left.values():  # this one and those after it on the page
                    with contextlib.suppress(OSError):
                        (folder / SCREENSHOT_DIR / shot.name).unlink()
                    notes.append(f"{shot.name}: {exc}")
            finally:
                self._tabs.put(tab)

        with ThreadPoolExecutor(max_workers=tabs, thread_name_prefix="screenshot") as pool:
            list(pool.map(one, pages.values()))
        if self._browser is not None and not self._browser.alive:
            self.close()  # the next preview starts a fresh one
        return notes

    def warm_up(self) -> None:
        """Start the browser and open its tabs now, in the background, while the caller
        builds the pages to shoot: a cold preview then waits for Chromium's start-up only
        where the build is quicker. What goes wrong here is met again, and said, by the
        first shot."""
        def start() -> None:
            try:
                self._start()
                while (tab := self._open(self.workers)) is not None:
                    self._tabs.put(tab)
            except BrowserError:
                pass

        self._warming = threading.Thread(target=start, name="screenshot-warm-up", daemon=True)
        self._warming.start()

    def _start(self) -> None:
        """The browser up (its tabs are opened by :meth:`_tab`)."""
        with self._lock:
            if self._browser is None:
                self._browser = Chromium(self.executable)

    def _tab(self, most: int) -> Tab:
        """A free tab; a new one while fewer than ``most`` are open, else the next one a
        shot gives back."""
        try:
            return self._tabs.get_nowait()
        except queue.Empty:
            pass
        tab = self._open(most)
        if tab is not None:
            return tab
        try:
            return self._tabs.get(timeout=CALL_TIMEOUT_S)
        except queue.Empty:
            raise BrowserError("no tab came free") from None

    def _open(self, most: int) -> Tab | None:
        """A new tab, or None when ``most`` are open already."""
        with self._lock:
            browser = self._browser
            if browser is None:
                raise BrowserError("Chromium is not running")
            if self._opened >= most:
                return None
            self._opened += 1
        try:
            return Tab(browser)
        except BrowserError:
            with self._lock:
                self._opened -= 1
            raise
