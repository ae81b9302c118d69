"""Compiled templates kept between commands (pipeline/template_cache.py, and the bytecode
cache of pipeline/core/email/render.py that reads it): a second process renders without compiling,
a changed template is compiled again, and a cache that is torn, foreign or unwritable never
fails a command."""

from __future__ import annotations

import stat
from pathlib import Path

import jinja2
import pytest

from pipeline.core.email import render
from pipeline.template_cache import FOLDER, DiskCodeStore

KEY = "0123456789abcdef0123456789abcdef01234567"


def test_the_users_cache_folder_is_made_private(tmp_path):
    store = DiskCodeStore.for_user({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert store is not None and store.folder == tmp_path / "xdg" / FOLDER
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    home = DiskCodeStore.for_user({"HOME": str(tmp_path / "home")})
    assert home is not None and home.folder == tmp_path / "home" / ".cache" / FOLDER


def test_no_cache_where_others_could_write_code_or_there_is_no_place(tmp_path):
    shared = tmp_path / "shared" / FOLDER
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # loading a compiled template runs it: never from such a folder
    assert DiskCodeStore.for_user({"XDG_CACHE_HOME": str(tmp_path / "shared")}) is None
    assert DiskCodeStore.for_user({}) is None
    assert DiskCodeStore.for_user({"XDG_CACHE_HOME": "relative/cache"}) is None
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert DiskCodeStore.for_user({"XDG_CACHE_HOME": str(blocked)}) is None


def test_save_and_load_and_nothing_that_is_not_a_key(tmp_path):
    store = DiskCodeStore(tmp_path)
    store.save(KEY, b"code")
    assert store.load(KEY) == b"code"
    assert store.load("f" * 40) is None
    store.save("../escape", b"x")
    assert store.load("../escape") is None and not (tmp_path.parent / "escape").exists()
    assert [p.name for p in tmp_path.iterdir()] == [KEY]  # no temporary file left


def test_a_save_that_cannot_write_says_nothing_and_leaves_nothing(tmp_path):
    store = DiskCodeStore(tmp_path / "gone")  # the folder went away (or the disk is full)
    store.save(KEY, b"code")
    assert store.load(KEY) is None


def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates Jinja compiles from now on."""
    names: list[str] = []
    real = jinja2.Environment.compile

    def counted(self, source, name=None, filename=None, raw=False, defer_init=False):
        names.append(name)
        return real(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


def _fresh_process(monkeypatch: pytest.MonkeyPatch, store: DiskCodeStore | None,
                   fingerprint: str | None = None) -> None:
    """What a new command starts with: no compiled template in memory, ``store`` on disk
    (``fingerprint``: as if Jinja, Python or the environment's options were others)."""
    fresh = render._CompiledTemplates()
    fresh.keep_in(store)
    if fingerprint is not None:
        fresh._fingerprint = fingerprint
    monkeypatch.setattr(render, "_COMPILED", fresh)


def test_a_second_process_renders_without_compiling(tmp_path, monkeypatch):
    store = DiskCodeStore(tmp_path)
    compiled = _compiles(monkeypatch)
    _fresh_process(monkeypatch, store)
    render.environment().get_template("email/issue.mjml.j2")  # the build's costliest
    assert "email/issue.mjml.j2" in compiled and any(tmp_path.iterdir())
    compiled.clear()
    _fresh_process(monkeypatch, store)
    render.environment().get_template("email/issue.mjml.j2")
    assert compiled == []


def _operator_template(tmp_path, name: str, source: str) -> tuple[Path, DiskCodeStore]:
    """An operator's template folder holding ``name``, and an empty store beside it."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / name).write_text(source, encoding="utf-8")
    store = DiskCodeStore(tmp_path / "cache")
    store.folder.mkdir()
    return folder, store


def test_an_edited_template_or_a_torn_file_is_compiled_again(tmp_path, monkeypatch):
    folder, store = _operator_template(tmp_path, "t.txt.j2", "one {{ x }}\n")
    compiled = _compiles(monkeypatch)
    for _ in range(2):  # compiled once, then read back from the store and run
        _fresh_process(monkeypatch, store)
        assert render.environment([folder]).get_template("t.txt.j2").render(x=1) == "one 1\n"
    assert compiled.count("t.txt.j2") == 1
    (folder / "t.txt.j2").write_text("two {{ x }}\n", encoding="utf-8")
    _fresh_process(monkeypatch, store)
    assert render.environment([folder]).get_template("t.txt.j2").render(x=1) == "two 1\n"
    assert compiled.count("t.txt.j2") == 2
    for cached in store.folder.iterdir():
        cached.write_bytes(cached.read_bytes()[:-7])  # torn: a crash mid-write elsewhere
    _fresh_process(monkeypatch, store)
    assert render.environment([folder]).get_template("t.txt.j2").render(x=2) == "two 2\n"
    assert compiled.count("t.txt.j2") == 3


def test_code_compiled_under_other_options_or_versions_is_never_run(tmp_path, monkeypatch):
    folder, store = _operator_template(tmp_path, "t.html.j2", "hi {{ x }}\n")
    compiled = _compiles(monkeypatch)
    _fresh_process(monkeypatch, store, fingerprint="jinja 3.0, autoescape off")
    render.environment([folder]).get_template("t.html.j2")
    _fresh_process(monkeypatch, store)  # this Jinja, this Python, these options
    out = render.environment([folder]).get_template("t.html.j2").render(x="<script>")
    assert out == "hi &lt;script&gt;\n" and compiled.count("t.html.j2") == 2


@pytest.mark.parametrize("after_magic", ["not a pickle", "not code"])
def test_a_cache_file_of_any_garbage_is_compiled_again(tmp_path, monkeypatch, after_magic):
    """Jinja's header (its magic, then the source's checksum as a pickle), then what a torn
    or foreign writer left: unpickling fails, or marshal hands back an int, not code."""
    import hashlib
    import marshal
    import pickle

    from jinja2.bccache import bc_magic

    source = "ok {{ x }}\n"
    folder, store = _operator_template(tmp_path, "t.txt.j2", source)
    _fresh_process(monkeypatch, store)
    render.environment([folder]).get_template("t.txt.j2")
    (cached,) = store.folder.iterdir()
    checksum = pickle.dumps(hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest(), 2)
    cached.write_bytes(bc_magic + (b"\xffgarbage" if after_magic == "not a pickle"
                                   else checksum + marshal.dumps(42)))
    _fresh_process(monkeypatch, store)
    assert render.environment([folder]).get_template("t.txt.j2").render(x=1) == "ok 1\n"
    assert cached.read_bytes() != bc_magic + checksum + marshal.dumps(42)  # written afresh
