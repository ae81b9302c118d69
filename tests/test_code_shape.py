"""No function in the package code is longer than 80 lines: a function that long does
several things, and its parts deserve names. (Its complexity is bounded by ruff's C901,
max-complexity 15 in pyproject.toml, which `make lint` runs.)"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest
from support.project import ROOT

MAX_LINES = 80
PACKAGES = ("pipeline", "subscribers")


def long_functions(source: str, filename: str, limit: int = MAX_LINES) -> Iterator[str]:
    """``file:line name (N lines)`` for every function, nested ones included, over ``limit``."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                yield f"{filename}:{node.lineno} {node.name} ({length} lines)"


@pytest.mark.slow  # parses every module of the project
def test_no_function_is_longer_than_80_lines() -> None:
    files = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    assert files
    offenders = [found for path in files
                 for found in long_functions(path.read_text(encoding="utf-8"),
                                             str(path.relative_to(ROOT)))]
    assert offenders == [], f"functions over {MAX_LINES} lines: {offenders}"


def test_a_long_function_is_named_with_its_place_and_length() -> None:
    body = "".join(f"        x = {n}\n" for n in range(MAX_LINES))
    source = f"def short():\n    pass\n\n\nclass C:\n    async def long(self):\n{body}"
    assert list(long_functions(source, "m.py")) == [f"m.py:6 long ({MAX_LINES + 1} lines)"]
    assert list(long_functions(source, "m.py", limit=MAX_LINES + 1)) == []
