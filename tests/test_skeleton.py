"""`newsletter translations`: skeletons for what is missing, never clobbering the editor."""

from __future__ import annotations

import errno
import tomllib

from support.commands import newsletter_main as run
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK, make_project

from pipeline.stages import skeleton


def test_skeleton_for_missing_languages_without_clobbering(tmp_path):
    feed = tmp_path / "feed.atom"
    feed.write_bytes(atom([
        Entry(pr=1, title="中文标题", body="值得精读，修复 `foo_bar`。"),
        Entry(pr=2, title="English only", body="Skim, a small fix.", lang="en"),
        Entry(pr=3, title="两种语言", body="值得一读。", lang="zh-CN"),
        Entry(pr=3, title="Both languages", body="Skim.", lang="en", id="en-3"),
    ]))
    editorial = make_project(tmp_path, feed=feed) / "editorial" / f"{SAMPLE_WEEK}.toml"
    editorial.parent.mkdir()
    mine = ('# my notes, kept as written\n[2]\npriority = "must-read"\n\n'
            '[2.zh]\ntitle = "我的标题"\n')
    editorial.write_text(mine, encoding="utf-8")

    first = run(["translations", "--week", SAMPLE_WEEK], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "added 1 skeleton(s): #1 en" in first.stdout
    text = editorial.read_text(encoding="utf-8")
    assert text.startswith(mine)  # the editor's bytes are untouched
    data = tomllib.loads(text)
    assert data["1"]["en"] == {"title": "", "body": ""}
    assert "2" in data and "en" not in data["2"] and "3" not in data
    assert "#   值得精读，修复 `foo_bar`。" in text  # what to translate from, as comments

    second = run(["translations", "--week", SAMPLE_WEEK], tmp_path)
    assert second.returncode == 0 and "nothing to add" in second.stdout
    assert editorial.read_text(encoding="utf-8") == text

    # The empty skeleton changes nothing in a build: PR 1 still lacks English.
    built = run(["build", "--week", SAMPLE_WEEK], tmp_path)
    assert built.returncode == 0 and "missing-language: PR #1 has no English" in built.stdout


def test_an_invalid_editor_file_is_refused_not_appended_to(tmp_path):
    feed = tmp_path / "feed.atom"
    feed.write_bytes(atom([Entry(pr=1, body="值得精读。")]))
    editorial = make_project(tmp_path, feed=feed) / "editorial" / f"{SAMPLE_WEEK}.toml"
    editorial.parent.mkdir()
    editorial.write_text("[1\n", encoding="utf-8")
    result = run(["translations", "--week", SAMPLE_WEEK], tmp_path)
    assert result.returncode == 2 and "not valid TOML" in result.stderr
    assert editorial.read_text(encoding="utf-8") == "[1\n"


def test_an_editor_file_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    feed = tmp_path / "feed.atom"
    feed.write_bytes(atom([Entry(pr=1, body="值得精读。")]))
    editorial = make_project(tmp_path, feed=feed) / "editorial" / f"{SAMPLE_WEEK}.toml"

    def full_disk(path, data, **_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(skeleton, "write_file", full_disk)
    result = run(["translations", "--week", SAMPLE_WEEK], tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"newsletter: error: cannot write {editorial}: "
                             "No space left on device\n")
