"""Preview: a built issue + its proof report → ``<issue folder>/preview/``, for the editor.

``index.html`` (no JavaScript) shows every layout and variant in frames at 375 and 600 px
and dark, the inbox rows, the proof report, the ranking and the ``approve`` command for the
proofed ``content_hash``. Each framed copy has its personal links made harmless. The dark
copy forces the email's own dark rules on, since an iframe's ``color-scheme`` does not reach
the media query inside it in Chromium. Screenshots come where Playwright and Chromium are
installed; otherwise the page says why.

The folder is written into a temporary sibling, then renamed into place: an interrupted
preview leaves the previous one whole.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import jinja2

from pipeline.config import Settings
from pipeline.core.assemble import Choice
from pipeline.core.email.message import parse_address
from pipeline.core.email.render import (
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Budget,
    environment,
    strings,
    tier_label,
)
from pipeline.core.issue.editorial import editorial_path
from pipeline.core.proof import LayoutSize, ProofReport, VariantProof, proof
from pipeline.core.shipped import templates_dir
from pipeline.core.site.site import IssueView
from pipeline.errors import BlockedError, OutputError, RenderError, SentWeekError
from pipeline.model import LANG_TAGS, LAYOUTS
from pipeline.output import staged_folder
from pipeline.sources import PullSource
from pipeline.stages.approve import read_approval
from pipeline.stages.build import build
from pipeline.stages.built import PREVIEW_DIR, BuiltIssue, load_built
from pipeline.stages.invocation import command
from pipeline.stages.machine_translation import Translate
from pipeline.stages.screenshots import (
    DARK_WIDTH,
    SCREENSHOT_DIR,
    WIDTHS,
    Screenshots,
    Screenshotter,
    copy_name,
    planned_shots,
)

if TYPE_CHECKING:
    from subscribers.model import SentIssue

__all__ = ["PREVIEW_DIR", "PageFacts", "Preview", "Screenshots",
           "Screenshotter", "Watcher", "next_step", "preview_issue", "serve",
           "watch", "write_preview"]

PAGE = "index.html"
TEMPLATE = "preview/index.html.j2"
#: Height of each frame on the page (the frame scrolls inside).
FRAME_HEIGHT = 760
_DARK_QUERY = re.compile(r"@media\s*\(\s*prefers-color-scheme\s*:\s*dark\s*\)", re.I)
_SCHEME_META = re.compile(
    r'(<meta\s+name="(?:color-scheme|supported-color-schemes)"\s+content=")[^"]*(")', re.I)
_HEAD = re.compile(r"<head(\s[^>]*)?>", re.I)


def proof_copy(html: str) -> str:
    """A layout as the preview frames it: no personal-link placeholder, links open outside."""
    html = (html.replace(UNSUBSCRIBE_PLACEHOLDER, "#unsubscribe")
            .replace(PREFERENCES_PLACEHOLDER, "#preferences"))
    return _HEAD.sub(lambda m: m[0] + '<base target="_blank">', html, count=1)


def dark_copy(html: str) -> tuple[str, bool]:
    """``proof_copy`` with the email's dark-mode rules forced on; and whether it has any."""
    html = proof_copy(html)
    forced, n = _DARK_QUERY.subn("@media all", html)
    forced = _SCHEME_META.sub(r"\1dark\2", forced)
    if not _SCHEME_META.search(html):
        forced = _HEAD.sub(lambda m: m[0] + '<meta name="color-scheme" content="dark">',
                           forced, count=1)
    return forced, n > 0


@dataclass(frozen=True)
class PageFacts:
    """What the page says beyond the issue and its proof report."""

    #: The command that approves this issue (``newsletter approve --week W``).
    approve_command: str
    #: The editor's file for the week, as the editor would type it, and whether it exists.
    editorial: str
    editorial_exists: bool
    #: The sender's display name, for the inbox rows.
    sender: str = "vLLM PR Weekly"
    #: The hash already approved, when there is an approval.
    approved_hash: str | None = None
    #: What the week went out as, when it did (the store's note).
    sent: SentIssue | None = None

    def step(self, built: BuiltIssue) -> str:
        """Where ``built`` stands for the editor: ``sent``, ``approved``, ``correction`` (to
        approve) or ``approve``."""
        if self.sent is not None and built.content_hash == self.sent.content_hash:
            return "sent"
        if self.approved_hash == built.content_hash:
            return "approved"
        return "correction" if built.issue.correction is not None else "approve"


def next_step(built: BuiltIssue, facts: PageFacts) -> str:
    """What the preview's last line tells the editor to do (the page says the same)."""
    short = built.content_hash[:12]
    step = facts.step(built)
    if step == "sent":
        return f"{built.id} went out as {short}: it is sent, there is nothing to approve"
    if step == "approved":
        return f"{built.id} is approved as {short}: there is nothing left to approve"
    what = "the correction of " if step == "correction" else ""
    return f"to approve {what}{built.id} as {short}: {facts.approve_command}"


@dataclass(frozen=True)
class _Framed:
    """One rendering on the page (a layout or a variant, by its key): where its copies are."""

    key: str

    @property
    def copy(self) -> str:
        return copy_name(self.key)

    @property
    def dark(self) -> str:
        return copy_name(self.key, dark=True)

    @property
    def text_part(self) -> str:
        return f"../email-{self.key}.txt"


@dataclass(frozen=True)
class LayoutView(_Framed):
    subject: str
    preheader: str
    size: LayoutSize
    has_dark_css: bool
    shots: dict[str, str] = field(default_factory=dict)

    @property
    def layout(self) -> str:
        return self.key


@dataclass(frozen=True)
class VariantView(_Framed):
    proof: VariantProof


def render_page(built: BuiltIssue, report: ProofReport, facts: PageFacts,
                screenshots: Screenshots, dark_css: dict[str, bool]) -> str:
    """The preview page (pure)."""
    sizes = {size.layout: size for size in report.sizes}
    made = set(screenshots.files)
    views = []
    for layout in LAYOUTS:
        shots = {f"{'dark ' if shot.dark else ''}{shot.width} px": f"{SCREENSHOT_DIR}/{shot.name}"
                 for shot in planned_shots((layout,)) if shot.name in made}
        views.append(LayoutView(layout, built.issue.subject[layout],
                                built.issue.preheader[layout], sizes[layout],
                                dark_css[layout], shots))
    try:
        return environment().get_template(TEMPLATE).render(
            issue=IssueView(built.issue, ""), built=built, report=report, facts=facts,
            layouts=views, variants=[VariantView(v.key, v) for v in report.variants],
            screenshots=screenshots, widths=WIDTHS, dark_width=DARK_WIDTH,
            frame_height=FRAME_HEIGHT, s=strings(), lang_tag=LANG_TAGS,
            tier_label=tier_label,
        )
    except jinja2.TemplateError as exc:
        raise RenderError(TEMPLATE, str(exc)) from None


@dataclass(frozen=True)
class Preview:
    """A written preview folder (and the facts its page said, to write it again)."""

    folder: Path
    screenshots: Screenshots
    facts: PageFacts

    @property
    def index(self) -> Path:
        return self.folder / PAGE


def write_preview(built: BuiltIssue, report: ProofReport, facts: PageFacts, *,
                  chromium: str | None = None, shooter: Screenshotter | None = None,
                  skip_reason: str | None = None, cached_only: bool = False) -> Preview:
    """Write ``<issue folder>/preview/`` all at once; screenshots when ``shooter`` (or a
    ``chromium`` to start one) is given, reusing the last preview's where the page is unchanged."""
    if shooter is None and chromium:
        with Screenshotter(chromium) as own:
            return write_preview(built, report, facts, shooter=own, skip_reason=skip_reason,
                                 cached_only=cached_only)
    target = built.folder / PREVIEW_DIR
    with staged_folder(target) as staging:
        dark_css = {}
        for key in built.keys:
            html = built.html(key)
            dark, dark_css[key] = dark_copy(html)
            (staging / copy_name(key)).write_text(proof_copy(html), encoding="utf-8")
            (staging / copy_name(key, dark=True)).write_text(dark, encoding="utf-8")
        if shooter is not None:
            screenshots = shooter.take(staging, planned_shots(), target,
                                       cached_only=cached_only)
        else:
            screenshots = Screenshots(notes=(skip_reason or "no chromium on the PATH",))
        page = render_page(built, report, facts, screenshots, dark_css)
        (staging / PAGE).write_text(page, encoding="utf-8")
    return Preview(target, screenshots, facts)


def editorial_file(settings: Settings, week_id: str) -> Path:
    return editorial_path(settings.resolve(settings.paths.editorial_dir), week_id)


def preview_issue(settings: Settings, week_id: str, feeds: Sequence[str] = (), *,
                  approve_command: str, chromium: str | None = None,
                  shooter: Screenshotter | None = None, cached_only: bool = False,
                  skip_reason: str | None = None,
                  shown: Callable[[Path], str] = str, translate: Translate | None = None,
                  github: PullSource | None = None, choices: Iterable[Choice] = (),
                  sent: SentIssue | None = None, correct: str | None = None,
                  archive_weeks: Sequence[str] | None = None
                  ) -> tuple[BuiltIssue, ProofReport, Preview]:
    """Build the week (``build`` semantics: an approved issue is not replaced, a sent week is
    previewed only as it went out or as a correction), proof it with every variant and write
    its preview folder."""
    strings.cache_clear()  # under --watch, templates/strings.toml may have changed
    try:
        result = build(settings, week_id=week_id, feeds=feeds, translate=translate,
                       github=github, choices=choices, sent=sent, correct=correct,
                       archive_weeks=archive_weeks)
    except SentWeekError:
        raise
    except BlockedError as exc:
        again = command("build", "--week", week_id, "--force")
        raise BlockedError(f"not previewed: {exc} ({again}; then preview again)") from None
    built = load_built(result.out_dir)  # what every later stage reads, hash checked
    report = proof(built, budget=Budget.configured(settings.issue, settings.delivery),
                   repo=settings.feed.repo)
    editorial = editorial_file(settings, week_id)
    approval = read_approval(built.folder)
    sender = parse_address(settings.delivery.from_, "[delivery] from").display_name
    facts = PageFacts(approve_command=approve_command, editorial=shown(editorial),
                      editorial_exists=editorial.is_file(), sender=sender or "vLLM PR Weekly",
                      approved_hash=approval.content_hash if approval else None, sent=sent)
    preview = write_preview(built, report, facts, chromium=chromium, shooter=shooter,
                            skip_reason=skip_reason, cached_only=cached_only)
    return built, report, preview


def watched_paths(settings: Settings, week_id: str, feeds: Sequence[str] = ()) -> list[Path]:
    """What a rebuild reads: the local feed files, the templates, the editor's file."""
    locations = [settings.feed_location(f) for f in (tuple(feeds) or settings.feed.urls)]
    files = [Path(loc) for loc in locations if "://" not in loc]
    return [*files, templates_dir(), editorial_file(settings, week_id)]


class Watcher:
    """Polls files (and every file under folders) for changes: stdlib only, no threads."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.paths = tuple(paths)
        self.state = self._snapshot()

    def _snapshot(self) -> dict[Path, tuple[int, int] | None]:
        state: dict[Path, tuple[int, int] | None] = {}
        for path in self.paths:
            if path.is_dir():
                for child in sorted(path.rglob("*")):
                    if child.is_file() and "__pycache__" not in child.parts:
                        state[child] = _stamp(child)
            else:
                state[path] = _stamp(path)
        return state

    def changed(self) -> list[Path]:
        """The files added, removed or modified since the last call."""
        now = self._snapshot()
        changed = sorted(p for p in now.keys() | self.state.keys()
                         if now.get(p) != self.state.get(p))
        self.state = now
        return changed


def watch(watcher: Watcher, on_change: Callable[[list[Path]], object], *,
          interval: float = 1.0, sleep: Callable[[float], object] = time.sleep) -> NoReturn:
    """Hand each batch of changed files to ``on_change``; never returns (Ctrl-C ends it)."""
    while True:
        sleep(interval)
        changed = watcher.changed()
        if changed:
            on_change(changed)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(folder: Path, port: int = 0) -> ThreadingHTTPServer:
    """Serve ``folder`` on 127.0.0.1 in a daemon thread; stop with ``shutdown()``."""
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port),
                                     partial(_QuietHandler, directory=str(folder)))
    except OSError as exc:
        raise OutputError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    threading.Thread(target=server.serve_forever, name="preview-server", daemon=True).start()
    return server
