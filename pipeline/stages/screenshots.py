"""The preview's screenshots: Playwright drives Debian's Chromium, one page for every shot.

Without either the preview is written all the same and says why it has no screenshots. The
browser starts at the first shot needed and stays up until ``close()``, so ``preview
--watch`` starts it once. A shot is copied from the last preview when its page is the same
byte for byte: the emails load nothing from outside, so their HTML decides their pixels.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.model import LAYOUTS
from pipeline.resource import Resource

if TYPE_CHECKING:
    from playwright.sync_api import Browser, CDPSession, Page, Playwright

SCREENSHOT_DIR = "screenshots"
#: The widths every layout is shown at: a phone and the email's desktop column.
WIDTHS = (375, 600)
#: The dark rendering's width (dark mode is mostly read on phones).
DARK_WIDTH = 375
#: Longer shots are cut here (and the page says so).
MAX_SHOT_HEIGHT = 16_000
#: Flags for these machines (closed network, no GPU), beside Playwright's own (headless, no
#: sandbox, no sync, scrollbars hidden); the browser tests start Chromium with them too.
CHROMIUM_FLAGS = ("--disable-gpu", "--disable-quic")
#: What the preview says when the ``preview`` extra is not installed.
NO_PLAYWRIGHT = ("Playwright is not installed (the preview extra: "
                 "pip install 'vllm-pr-weekly[preview]')")


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
    #: How many are still to take (``cached_only``: the page is shown first).
    pending: int = 0


class Screenshotter(Resource):
    """Takes a preview's shots with one Chromium, started when first needed; ``close()`` (or
    ``with``) ends it."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._page: Page | None = None
        self._cdp: CDPSession | None = None

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
        if self._playwright is not None:
            self._playwright.stop()
        self._playwright = self._browser = self._page = self._cdp = None

    def take(self, folder: Path, shots: Sequence[Shot], previous: Path | None = None, *,
             cached_only: bool = False) -> Screenshots:
        """PNGs of ``folder``'s email copies into ``folder/screenshots/``, copied from
        ``previous`` where the page is the same; with ``cached_only`` nothing is shot."""
        (folder / SCREENSHOT_DIR).mkdir(exist_ok=True)
        todo = [shot for shot in shots if not _reuse(shot, folder, previous)]
        notes = self._shoot(folder, todo) if todo and not cached_only else []
        files = tuple(shot.name for shot in shots
                      if (folder / SCREENSHOT_DIR / shot.name).is_file())
        pending = len(todo) if cached_only else 0
        if not files and not notes and not pending:
            notes.append("no screenshot was planned")
        return Screenshots(files, tuple(notes), len(shots) - len(todo), pending)

    def _shoot(self, folder: Path, shots: Sequence[Shot]) -> list[str]:
        """Shoot ``shots``, in order (a page's widths one after the other: it is opened
        once); the notes of what went wrong, one line each."""
        try:
            from playwright.sync_api import Error
        except ImportError:
            return [NO_PLAYWRIGHT]
        try:
            page, cdp = self._open()
        except Error as exc:
            self.close()
            return [f"Chromium did not start: {_one_line(exc)}"]
        notes = []
        for shot in shots:
            try:
                height = _shoot_one(page, cdp, folder, shot)
            except Error:
                try:  # once more: on a busy machine Chromium now and then misses one
                    height = _shoot_one(page, cdp, folder, shot)
                except Error as exc:
                    notes.append(f"{shot.name}: {_one_line(exc)}")
                    continue
            if height > MAX_SHOT_HEIGHT:
                notes.append(f"{shot.name}: cut at {MAX_SHOT_HEIGHT} px of {height}")
        if self._browser is not None and not self._browser.is_connected():
            self.close()  # the next preview starts a fresh one
        return notes

    def _open(self) -> tuple[Page, CDPSession]:
        """The page every shot is taken in, with the browser started if it is not."""
        if self._page is None or self._cdp is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=self.executable, args=CHROMIUM_FLAGS)
            self._page = self._browser.new_page(device_scale_factor=1, color_scheme="light")
            self._cdp = self._page.context.new_cdp_session(self._page)
        return self._page, self._cdp


def _shoot_one(page: Page, cdp: CDPSession, folder: Path, shot: Shot) -> int:
    """``shot`` into ``folder/screenshots/``, as wide as its rendering and as tall as its
    page (cut at MAX_SHOT_HEIGHT); the page's full height."""
    url = (folder / shot.source).as_uri()
    # Laid out and measured in a short window: the page's height, not the window's.
    page.set_viewport_size({"width": shot.width, "height": 900})
    if page.url != url:
        page.goto(url)
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    # Chromium's fast PNG encoding, which page.screenshot() does not offer: the same
    # pixels in a larger file, for much less of the browser's work.
    data = cdp.send("Page.captureScreenshot", {
        "format": "png", "optimizeForSpeed": True, "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": shot.width, "scale": 1,
                 "height": max(1, min(height, MAX_SHOT_HEIGHT))}})
    (folder / SCREENSHOT_DIR / shot.name).write_bytes(base64.b64decode(data["data"]))
    return height


def _reuse(shot: Shot, folder: Path, previous: Path | None) -> bool:
    """Copy the last preview's PNG of ``shot`` when its page there is this one, byte for byte."""
    if previous is None:
        return False
    try:
        if (previous / shot.source).read_bytes() != (folder / shot.source).read_bytes():
            return False
        shutil.copyfile(previous / SCREENSHOT_DIR / shot.name, folder / SCREENSHOT_DIR / shot.name)
    except OSError:
        return False
    return True


def _one_line(exc: BaseException) -> str:
    """Playwright's message without its call log, with the browser's last word on stderr."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    said = [line.split("[err] ", 1)[1].strip() for line in lines if "[err] " in line]
    return (f"{lines[0]} ({said[-1]})" if said else lines[0])[:300]
