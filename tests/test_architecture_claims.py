"""What docs/architecture.md claims of the code that the import graph cannot show, checked
on the syntax tree (so a comment or a docstring never counts): the core reads only what ships
with it and never waits, two HTTP clients, and the doc's tables name every module that exists.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.project import ROOT

CORE = ROOT / "pipeline" / "core"
#: Calls that read or change the world when their receiver is a path or the clock.
_IO_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "mkdir",
               "unlink", "rename", "replace", "iterdir", "glob", "rglob", "touch", "stat"}
#: What a core module may read: the product's own templates and strings.
_SHIPPED = "templates_dir()"


def _sources(root: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path, _parsed(path)


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _calls(tree: ast.Module) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _io_calls(path: Path, tree: ast.Module) -> list[str]:
    """``path``'s calls that touch files, the clock or a wait, except reads of what ships."""
    found = []
    for call in _calls(tree):
        func = call.func
        if isinstance(func, ast.Name) and func.id in ("open", "input", "print"):
            found.append(f"{path.name}:{call.lineno} {func.id}()")
        elif isinstance(func, ast.Attribute):
            receiver = ast.unparse(func.value)
            if _touches_world(func.attr, receiver):
                found.append(f"{path.name}:{call.lineno} {receiver}.{func.attr}()")
    return found


def _touches_world(method: str, receiver: str) -> bool:
    if method == "sleep" or (method == "now" and "datetime" in receiver):
        return True
    if method in ("read_text", "read_bytes"):
        return _SHIPPED not in receiver
    return method in _IO_METHODS and "Path" in receiver


def test_the_core_reads_only_what_ships_with_it_and_never_waits() -> None:
    found = [call for path, tree in _sources(CORE) for call in _io_calls(path, tree)]
    assert found == []


def test_the_check_sees_a_read_a_wait_and_the_clock(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import time\nfrom datetime import datetime\nfrom pathlib import Path\n"
                      "def f(p):\n    time.sleep(1)\n    datetime.now()\n"
                      "    return p.read_text(), templates_dir().read_text(), open(p)\n",
                      encoding="utf-8")
    tree = ast.parse(module.read_text(encoding="utf-8"))
    assert [line.split(" ", 1)[1] for line in _io_calls(module, tree)] == [
        "time.sleep()", "datetime.now()", "p.read_text()", "open()"]


def _importers_of(name: str) -> set[str]:
    """The modules of pipeline/ and subscribers/ that import ``name`` (or a name in it)."""
    found = set()
    for root in ("pipeline", "subscribers"):
        for path, tree in _sources(ROOT / root):
            for node in ast.walk(tree):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == name or n.startswith(name + ".") for n in names):
                    found.add(str(path.relative_to(ROOT)))
    return found


def test_two_http_clients_and_no_third() -> None:
    """The weekly job's and the SNS verifier's (which follows no redirect)."""
    assert _importers_of("urllib.request") == {"pipeline/http.py", "pipeline/web/sns.py"}


@pytest.mark.parametrize("package", sorted(p.parent.name for p in CORE.glob("*/__init__.py")))
def test_each_core_package_says_what_lives_there(package: str) -> None:
    tree = ast.parse((CORE / package / "__init__.py").read_text(encoding="utf-8"))
    said = ast.get_docstring(tree) or ""
    modules = sorted(p.stem for p in (CORE / package).glob("*.py") if p.stem != "__init__")
    assert modules and [m for m in modules if f"``{m}``" not in said] == []


def test_the_core_is_handed_the_sections_it_reads_not_the_whole_settings() -> None:
    """So no core function depends on a secret, path or backend its signature does not name."""
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for path, tree in _sources(CORE)
             for node in ast.walk(tree)
             if isinstance(node, ast.Name | ast.alias)
             and (node.id if isinstance(node, ast.Name) else node.name) == "Settings"]
    assert found == []


_DOC = ROOT / "docs" / "architecture.md"
_NAMED = re.compile(r"`([\w/.]+(?:\.py|/))`")


def _table_rows() -> list[str]:
    return [line for line in _DOC.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]


def _exists(name: str) -> bool:
    """Whether a name in the doc's tables exists, from the repository root or a package."""
    return any((ROOT / base / name).exists() for base in ("", "pipeline", "subscribers"))


def test_the_module_tables_name_what_exists_and_every_module() -> None:
    """A module is named in a row of its own, or by its file name in its package's row."""
    rows = _table_rows()
    named = {name for row in rows for name in _NAMED.findall(row)}
    assert {"core/email/render.py", "store/sqlite/"} <= named  # the tables were read
    missing = []
    for row in rows:
        names = _NAMED.findall(row)
        packages = [""] + [name for name in names if name.endswith("/")]
        missing += [name for name in names
                    if not any(_exists(package + name) for package in packages)]
    assert missing == []
    unnamed = []
    for root in ("pipeline", "subscribers"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if path.name == "__init__.py" or "templates" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            tails = {rel, rel.split("/", 1)[1]}
            package = path.parent.relative_to(ROOT / root).as_posix() + "/"
            if tails & named:
                continue
            if any(f"`{package}`" in row and f"`{path.name}`" in row for row in rows):
                continue
            unnamed.append(rel)
    assert unnamed == []
