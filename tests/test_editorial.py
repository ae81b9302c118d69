"""The editor's file: reorder, hide, note and texts, validated strictly."""

from __future__ import annotations

import re
import tomllib

import pytest
from support.commands import newsletter_main
from support.project import ROOT, SAMPLE_WEEK

from pipeline.core.issue.rank import TIER_NAMES
from pipeline.core.site.site import Site
from pipeline.model import LANGS, LAYOUTS
from pipeline.sources.editorial import load_editorial
from pipeline.stages.build import build
from pipeline.stages.built import load_built


def write_editorial(settings, text: str) -> None:
    folder = settings.resolve(settings.paths.editorial_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SAMPLE_WEEK}.toml").write_text(text, encoding="utf-8")


def editor_entry(settings, text: str, pr: int = 53721):
    """The loaded editor's entry for ``pr`` once ``text`` is this week's file."""
    write_editorial(settings, text)
    entry = load_editorial(settings.resolve(settings.paths.editorial_dir), SAMPLE_WEEK,
                           TIER_NAMES).get(pr)
    assert entry is not None
    return entry


def test_the_editor_reorders_hides_notes_and_rewrites(settings, tmp_path):
    write_editorial(settings, """
[54934]
priority = "must-read"
note = "先读这一篇，再看其余的。"

[54934.en]
note = "Read this one first."

[56317]
hide = true

[56366]
priority = "skim"

[56366.en]
note = "Only if you work on the Rust frontend."

[99999]
priority = "skim"

[53721.en]
title = "A better English headline"
body = "Must read, the editor's own words with `SupportsHMA`.\\n\\nSecond paragraph."
""")
    data = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o").data
    order = [(item["pr"], item["tier"]) for item in data["items"]]
    assert (56317, "must-read") not in order and len(order) == 7
    assert order[-1] == (56366, "skim")
    # Editor's priority: 54934 joins the must-reads, a full read placed by its length.
    assert [tier for _, tier in order] == ["must-read"] * 6 + ["skim"]
    assert (54934, "must-read") in order
    item = next(i for i in data["items"] if i["pr"] == 54934)
    assert item["note"] == {"zh": "先读这一篇，再看其余的。", "en": "Read this one first."}
    assert "editor" in item["why"]["en"]
    rust = next(i for i in data["items"] if i["pr"] == 56366)
    assert rust["note"] is not None
    assert rust["note"]["en"] == "Only if you work on the Rust frontend."
    codes = {(p["code"], p.get("pr")) for p in data["problems"]}
    assert ("editor-unknown-pr", 99999) in codes
    # Hiding is the editor's deliberate act: recorded, never a warning to fix.
    assert data["hidden"] == [56317] and "hidden" not in {code for code, _ in codes}
    html = (tmp_path / "o" / "email-en.html").read_text()
    assert "Editor&#39;s note" in html and "Only if you work on the Rust frontend." in html
    # The editor's text wins over the feed's.
    en = next(i for i in data["items"] if i["pr"] == 53721)["en"]
    assert en is not None
    assert en["source"] == "editor" and en["title"] == "A better English headline"
    assert en["body_html"] == ("<p>Must read, the editor's own words with "
                               "<code>SupportsHMA</code>.</p><p>Second paragraph.</p>")


@pytest.mark.parametrize(("text", "message"), [
    ("[53721]\nprioritty = 'skim'\n", "unknown key"),
    ("[53721]\npriority = 'urgent'\n", "priority must be one of"),
    ("[53721]\nhide = 'yes'\n", "true or false"),
    ("[abc]\nhide = true\n", "PR number"),
    ("[53721\n", "not valid TOML"),
    ("[53721.fr]\ntitle = 'x'\n", "unknown key"),
    *((f'["{key}"]\nhide = true\n', "PR number")
      for key in ["\u0663", "53721" + "0" * 5000, "1234567890", "0"]),
])
def test_a_bad_editor_file_is_one_clear_error_exit_2_and_no_build(settings, tmp_path, text,
                                                                  message):
    write_editorial(settings, text)
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and f"{SAMPLE_WEEK}.toml" in result.stderr
    assert not (tmp_path / "build").exists()


def test_build_says_what_the_editors_file_hid_apart_from_the_problems(tmp_path):
    from support.project import make_project

    make_project(tmp_path)
    (tmp_path / "editorial").mkdir()
    (tmp_path / "editorial" / f"{SAMPLE_WEEK}.toml").write_text("[56317]\nhide = true\n")
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"built {SAMPLE_WEEK}: ") and " blocking problem(s), " in lines[0]
    assert "  hidden by the editor's file: #56317" in lines
    assert "warning: hidden" not in result.stdout


def test_the_editors_texts_carry_no_bidi_or_invisible_character(settings):
    entry = editor_entry(settings, '[53721]\nnote = "Read\\u202e this\\u200b first"\n'
                                   '[53721.en]\ntitle = "Fix \\u202eSECURITY ALERT\\u2069"\n'
                                   'body = "Must read.\\u2066\\n\\nSecond\\ufeff."\n')
    assert entry.texts["en"].title == "Fix SECURITY ALERT"
    assert entry.texts["en"].body == "Must read.\n\nSecond."
    assert entry.note.en == "Read this first"


@pytest.mark.parametrize(("note", "lang"), [
    ("Only if you work on the Rust frontend.", "en"),
    ("仅供维护 Rust 前端的同学参考。", "zh"),
    ("先读 `scheduler.py` 的改动。", "zh"),  # Chinese with an English identifier
    ("Start with `调度器` tests in test_scheduler.py and the KV connector.", "en"),
])
def test_a_note_at_the_prs_level_is_its_own_languages(settings, note, lang):
    """A note belongs to the language it is written in, not to every layout."""
    entry = editor_entry(settings, f'[53721]\nnote = "{note}"\n')
    assert entry.note.get(lang) == note
    assert entry.note.get("en" if lang == "zh" else "zh") is None


def test_a_languages_own_note_wins_over_the_prs_note(settings):
    entry = editor_entry(settings, '[53721]\nnote = "Old English note."\n'
                                   '[53721.en]\nnote = "The English note."\n'
                                   '[53721.zh]\nnote = "中文的编者按。"\n')
    assert (entry.note.zh, entry.note.en) == ("中文的编者按。", "The English note.")


def test_each_note_shows_under_its_own_languages_label_only(settings, tmp_path):
    """Every layout, both parts and every archive page show a note under its own language only."""
    write_editorial(settings, '[55823]\nnote = "Start with the tests."\n'
                              '[53721.zh]\nnote = "先看连接器的改动。"\n')
    build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o")
    notes = {"en": ("Editor&#39;s note", "Start with the tests."),
             "zh": ("编者按", "先看连接器的改动。")}
    for layout in LAYOUTS:
        html = (tmp_path / "o" / f"email-{layout}.html").read_text()
        text = (tmp_path / "o" / f"email-{layout}.txt").read_text()
        for lang, (label, note) in notes.items():
            shown = lang in layout.split("-")
            assert (f"<strong>{label}</strong>: {note}" in html) == shown, (layout, lang)
            assert (note in text) == shown, (layout, lang)
            other = notes["zh" if lang == "en" else "en"][0]
            assert f"<strong>{other}</strong>: {note}" not in html
    built = load_built(tmp_path / "o")
    pages = {obj.key.rsplit("/", 1)[-1]: obj.data.decode()
             for obj in Site(settings.site).issue_objects(built)}
    assert "<strong>编者按</strong>: 先看连接器的改动。" in pages["zh.html"]
    assert "Start with the tests." not in pages["zh.html"]
    assert "<strong>Editor&#39;s note</strong>: Start with the tests." in pages["en.html"]
    assert "先看连接器的改动。" not in pages["en.html"]
    both = pages["index.html"]
    assert "<strong>编者按</strong>: Start with the tests." not in both
    assert "<strong>Editor&#39;s note</strong>: 先看连接器的改动。" not in both


def test_the_documented_example_does_what_the_docs_say(settings, tmp_path):
    doc = (ROOT / "docs" / "editorial.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```toml\n(# editorial/2026-W48\.toml\n.*?)```", doc, re.S)
    assert SAMPLE_WEEK == "2026-W48"
    write_editorial(settings, example)
    asked = tomllib.loads(example)
    data = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o").data
    items = {item["pr"]: item for item in data["items"]}
    hidden = sorted(int(pr) for pr, table in asked.items() if table.get("hide"))
    assert hidden and data["hidden"] == hidden and not set(hidden) & set(items)
    assert "hidden" not in {p["code"] for p in data["problems"]}
    priorities = {int(pr): t["priority"] for pr, t in asked.items() if "priority" in t}
    assert len(priorities) >= 2
    assert all(items[pr]["tier"] == tier for pr, tier in priorities.items())
    notes = [(int(pr), table.get("note"), *(table.get(lang, {}).get("note") for lang in LANGS))
             for pr, table in asked.items()]
    noted = [row for row in notes if any(row[1:])]
    assert noted, "the example shows a note"
    for pr, anywhere, *by_lang in noted:
        shown = items[pr]["note"]
        assert shown is not None
        for lang, own in zip(LANGS, by_lang, strict=True):
            if own:  # a language's own note is that language's
                assert shown[lang] == own
        # Each note reaches one language's readers only, in that language's email.
        for text in filter(None, (anywhere, *by_lang)):
            langs = [lang for lang in LANGS if shown[lang] == text]
            assert len(langs) == 1, (pr, text, shown)
            for lang in LANGS:
                html = (tmp_path / "o" / f"email-{lang}.html").read_text()
                assert (text in html) == (lang == langs[0]), (pr, text, lang)
