"""Shared fixtures (settings in a temp folder, the sample week built once, a feed writer) and
the hooks that keep the test layers honest: marks from fixtures, a guard on process starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK, sample_settings

from pipeline.config import Settings

pytest_plugins = ["support.servers", "support.http_server", "support.chromium",
                  "support.scheduling", "support.durations", "pytester"]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The built-in defaults, rooted in the temp folder, reading the sample feed."""
    return sample_settings(tmp_path)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory):
    """The sample week built once per session (per worker) with the built-in defaults, for the
    tests that only read it: the session's end checks that no test wrote into it."""
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    root = tmp_path_factory.mktemp("sample-built")
    issue = load_built(build(sample_settings(root), week_id=SAMPLE_WEEK,
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


# -- the layers ---------------------------------------------------------------------------------
# `make test-fast` deselects the markers registered in pyproject.toml. browser and aws follow
# from the fixtures a test uses, so a new test cannot forget them; subprocess is marked by hand,
# and the guard below fails a test that starts a process without it.

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
    """Watch every process start (``run``, ``check_output`` and asyncio's all go through
    ``Popen``) for the guard."""
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
    """Fail the test whose process start went unseen (made from a thread, which the failure
    raised there only ended)."""
    report = yield
    started = item.stash.get(_PROCESSES, [])
    if report.failed:
        started.clear()  # said already
    elif call.when == "teardown" and started:
        report.outcome = "failed"
        report.longrepr = _unmarked(item, started[0])
    return report
