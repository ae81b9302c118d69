"""Headless Chromium for the browser tests: Debian's ``chromium``, never a downloaded one,
with the preview's own flags. One per session (per xdist worker); each test opens a context of
its own, so no cookie, storage or viewport passes from one test to the next.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from pipeline.stages.screenshots import CHROMIUM_FLAGS
from support.project import ROOT


def artifacts_dir(kind: str) -> Path:
    """Where a browser test keeps screenshots for a person: ``$TEST_ARTIFACTS/<kind>``, else
    ``build/test-artifacts/<kind>``."""
    folder = Path(os.environ.get("TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts") / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium_executable() -> str:
    """Debian's Chromium, or a failure saying so: these tests fail, never skip, without it."""
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).is_file():
        pytest.fail(f"no Chromium at {found}: install Debian's chromium (.ci/run does); "
                    "these tests never download a browser")
    return found


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = chromium_executable()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=list(CHROMIUM_FLAGS))
        try:
            yield launched
        finally:
            launched.close()
