"""Shared fixtures: the sample feed, settings rooted in a temp folder, the sample week built once
per session, a small feed writer."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest

from pipeline.config import Settings, load

#: Loopback servers (SMTP, moto, TLS) shared by the delivery tests; one Chromium per worker;
#: how `make test` spreads the tests over its workers.
pytest_plugins = ["support.servers", "support.chromium", "support.scheduling", "support.durations",
                  "pytester"]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
#: A real sample of the review text the pipeline consumes (verdicts, backticked names, both
#: languages), kept with the tests so the suite runs from any clone.
SEED = Path(__file__).resolve().parent / "data" / "reviews-sample.zh.txt"
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_WEEK = "2026-W48"
#: The PRs of the seed reviews, in the seed's order.
SEED_PRS = (53721, 55309, 55823, 54934, 51794, 56671, 56366, 56317)


@dataclass
class Entry:
    """One feed entry to write; only what a test sets is written."""

    pr: int | None = 1
    title: str = "标题"
    body: str = "值得精读，测试。"
    published: str | None = "2026-11-24T10:00:00+08:00"
    updated: str | None = None
    lang: str | None = None
    id: str | None = None
    link: str | None = None
    content_type: str = "text"
    categories: list[str] = field(default_factory=list)
    repo: str = "vllm-project/vllm"


def atom(entries: list[Entry], feed_lang: str | None = "zh-CN") -> bytes:
    """A well-formed Atom 1.0 document holding ``entries``."""
    lang = f" xml:lang={quoteattr(feed_lang)}" if feed_lang else ""
    parts = [f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"'
             f'{lang}><title>t</title><id>tag:test,2026:feed</id>'
             f'<updated>2026-11-29T00:00:00Z</updated>']
    for n, e in enumerate(entries):
        link = e.link if e.link is not None else (
            f"https://github.com/{e.repo}/pull/{e.pr}" if e.pr else "")
        entry_lang = f" xml:lang={quoteattr(e.lang)}" if e.lang else ""
        parts.append(f"<entry{entry_lang}>")
        parts.append(f"<id>{escape(e.id or f'tag:test,2026:{e.pr}/{n}')}</id>")
        parts.append(f"<title>{escape(e.title)}</title>")
        if link:
            parts.append(f'<link rel="alternate" href={quoteattr(link)}/>')
        if e.published:
            parts.append(f"<published>{e.published}</published>")
        if e.updated:
            parts.append(f"<updated>{e.updated}</updated>")
        for term in e.categories:
            parts.append(f"<category term={quoteattr(term)}/>")
        parts.append(f'<content type="{e.content_type}">{escape(e.body)}</content>')
        parts.append("</entry>")
    parts.append("</feed>")
    return "".join(parts).encode("utf-8")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The built-in defaults, rooted in a temp folder, reading the sample feed."""
    config = tmp_path / "newsletter.toml"
    config.write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
    return load(config, {})


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory):
    """The sample week built once per session (per worker) with the built-in defaults, for
    the many tests that only read a built issue. Read it, never write into its folder: the
    session's end checks that every file is as the build left it. A test that changes the
    issue, sends it (a send writes its report beside it) or needs other settings builds its
    own."""
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    root = tmp_path_factory.mktemp("sample-built")
    (root / "newsletter.toml").write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n',
                                          encoding="utf-8")
    issue = load_built(build(load(root / "newsletter.toml", {}), week_id=SAMPLE_WEEK,
                             out=root / "issue").out_dir)
    before = _files(issue.folder)
    yield issue
    assert _files(issue.folder) == before, "a test wrote into the shared built issue"


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def write_feed(tmp_path: Path):
    """Write a feed document into the temp folder and return its path."""
    counter = iter(range(1000))

    def write(data: bytes | list[Entry], name: str | None = None, **kw) -> Path:
        path = tmp_path / (name or f"feed-{next(counter)}.xml")
        path.write_bytes(data if isinstance(data, bytes) else atom(data, **kw))
        return path

    return write


def newsletter_cmd() -> list[str]:
    """The installed command, run as a real process (its exit code and stderr are tested)."""
    exe = Path(sys.executable).with_name("newsletter")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeline"]


def unfolded(html: str) -> str:
    """An HTML part as a reader's mail app lays it out: the line breaks an 8bit part's
    folding put in place of spaces (pipeline/core/email/eightbit.py) read as those spaces."""
    return html.replace("\r\n", "\n").replace("\n", " ")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(extra)
    return env


def run_newsletter(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``newsletter ARGS`` in ``cwd`` as a real process, with a clean environment plus ``env``."""
    return subprocess.run([*newsletter_cmd(), *args], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=120, check=False)


def newsletter_main(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``newsletter ARGS`` in ``cwd`` called in this process (``pipeline.cli.main``), with a
    clean environment plus ``env``: what :func:`run_newsletter` returns, without the second
    of interpreter start and imports a process costs.

    For the tests whose point is what a command does, says and exits with. Signals, crashes,
    locks held by another process and the installed entry point keep :func:`run_newsletter`.
    stdout and stderr are fresh UTF-8 streams that are not terminals, as a pipe is; the
    working folder and ``os.environ`` are restored afterwards whatever happens.
    """
    from pipeline.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)
                for _ in range(2))
    saved_env, saved_cwd = os.environ.copy(), os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update({k: v for k, v in saved_env.items() if not k.startswith("NEWSLETTER_")})
    os.environ.update(env)
    try:
        os.chdir(cwd)
        sys.stdout, sys.stderr = out, err
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)

    def text(stream: io.TextIOWrapper) -> str:
        stream.flush()
        buffer = stream.buffer
        assert isinstance(buffer, io.BytesIO)  # made above
        return buffer.getvalue().decode("utf-8")

    return subprocess.CompletedProcess(["newsletter", *args], code, text(out), text(err))


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``result``, asserted to have exited 0 (its output shown when it did not)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def nesting(fragment: str) -> int:
    """How deep the elements of an HTML fragment nest (``<br>`` opens nothing)."""
    depth = deepest = 0
    for closing, name in re.findall(r"<(/?)([a-z]+)[^>]*>", fragment):
        if name != "br":
            depth += -1 if closing else 1
            deepest = max(deepest, depth)
    return deepest


# -- the layers ---------------------------------------------------------------------------------
# `make test-fast` deselects the markers registered in pyproject.toml. browser and aws follow
# from the fixtures a test uses (the fixture closure includes fixtures of fixtures), so a new
# test cannot forget them; subprocess is marked by hand, and the guard below fails a test that
# starts a process without it, so it cannot be forgotten either.

#: Fixture → the marker every test using it gets.
FIXTURE_MARKS = {"browser": "browser", "moto_server": "aws", "_moto_session": "aws"}
#: The marks under which a test may start another program.
PROCESS_MARKS = ("subprocess", "browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, mark in FIXTURE_MARKS.items():
            if fixture in used:
                item.add_marker(mark)


_PROCESSES = pytest.StashKey[list[str]]()
#: The test running now (its setup, call and teardown, module fixtures included).
_running: list[pytest.Item] = []


def pytest_configure(config: pytest.Config) -> None:
    """Watch every process start (subprocess.Popen: ``run``, ``check_output`` and asyncio's
    subprocesses all go through it) for the guard below; and keep the compiled templates a
    command keeps (pipeline/template_cache.py) in a folder of this run, not the user's."""
    cache = tempfile.mkdtemp(prefix="newsletter-tests-cache-")
    os.environ["XDG_CACHE_HOME"] = cache
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    real = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self, args, *rest, **kw):
        item = _running[-1] if _running else None
        if item is not None and not any(item.get_closest_marker(m) for m in PROCESS_MARKS):
            program = str(args if isinstance(args, str) else args[0])
            item.stash.setdefault(_PROCESSES, []).append(program)
            pytest.fail(_unmarked(item, program), pytrace=False)
        return real(self, args, *rest, **kw)

    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]


def _unmarked(item: pytest.Item, program: str) -> str:
    return (f"{item.nodeid} starts a process ({program}) without a process mark: add "
            "@pytest.mark.subprocess (the fast layer runs in-process only)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Fail the test whose process start went unseen (it was made from a thread, which
    the failure raised there only ended)."""
    report = yield
    started = item.stash.get(_PROCESSES, [])
    if report.failed:
        started.clear()  # said already
    elif call.when == "teardown" and started:
        report.outcome = "failed"
        report.longrepr = _unmarked(item, started[0])
    return report
