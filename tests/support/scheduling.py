"""How ``make test`` spreads the suite over its workers (``--dist loadgroup``): each test on
its own, except that the tests of a module with one expensive module fixture go to a single
worker, which builds it once.

``@pytest.mark.xdist_group`` would say this, but pytest-xdist 3.8 groups by renaming
``item._nodeid``, which pytest 9 no longer reads; this scheduler keeps the behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Test modules whose tests share an expensive module-scoped fixture.
SHARED_FIXTURE_MODULES = frozenset({
    "tests/test_preview.py",  # `newsletter preview` of the sample, with 12 screenshots
    "tests/test_browser.py",  # the published archive of two weeks
    "tests/test_search_browser.py",  # the same, searched with Pagefind
    "tests/test_site_validity.py",  # the same, through the Nu HTML checker
    "tests/test_site_reader_browser.py",  # an archive of two weeks served on another port
    "tests/test_email_browser.py",  # every layout rendered and opened in Chromium
    "tests/test_deliverability.py",  # one SpamAssassin run over every layout
    "tests/test_shipped.py",  # the wheel installed in a fresh venv, the Lambda package built
})


def scope_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: its module if listed above, else itself."""
    module = nodeid.split("::", 1)[0]
    return module if module in SHARED_FIXTURE_MODULES else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None  # another --dist: xdist's own
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedFixtureScheduling(config, log)
