"""The editor's file: reorder, hide, note and texts, validated strictly."""

from __future__ import annotations

import pytest
from support.commands import clean_env
from support.project import SAMPLE_WEEK

from pipeline.core.issue.rank import TIER_NAMES
from pipeline.errors import ConfigError
from pipeline.sources.editorial import load_editorial
from pipeline.stages.build import build


def write_editorial(settings, text: str) -> None:
    folder = settings.resolve(settings.paths.editorial_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SAMPLE_WEEK}.toml").write_text(text, encoding="utf-8")


def test_the_editor_reorders_hides_and_notes(settings, tmp_path):
    write_editorial(settings, """
[54934]
priority = "must-read"
note = "先读这一篇 · Read this first"

[56317]
hide = true

[56366]
priority = "skim"

[56366.en]
note = "Only if you work on the Rust frontend."

[99999]
priority = "skim"
""")
    data = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o").data
    order = [(item["pr"], item["tier"]) for item in data["items"]]
    assert (56317, "must-read") not in order and len(order) == 7
    assert order[-1] == (56366, "skim")
    # Editor's priority: 54934 joins the must-reads, a full read placed by its length.
    assert [tier for _, tier in order] == ["must-read"] * 6 + ["skim"]
    assert (54934, "must-read") in order
    item = next(i for i in data["items"] if i["pr"] == 54934)
    note = "先读这一篇 · Read this first"
    assert item["note"] == {"zh": note, "en": note}
    assert "editor" in item["why"]["en"]
    rust = next(i for i in data["items"] if i["pr"] == 56366)
    assert rust["note"] is not None
    assert rust["note"]["en"] == "Only if you work on the Rust frontend."
    codes = {(p["code"], p.get("pr")) for p in data["problems"]}
    assert ("hidden", 56317) in codes and ("editor-unknown-pr", 99999) in codes
    html = (tmp_path / "o" / "email-en.html").read_text()
    assert "Editor&#39;s note" in html and "Only if you work on the Rust frontend." in html


def test_editor_text_wins_over_the_feed(settings, tmp_path):
    write_editorial(settings, """
[53721.en]
title = "A better English headline"
body = "Must read, the editor's own words with `SupportsHMA`.\\n\\nSecond paragraph."
""")
    data = build(settings, week_id=SAMPLE_WEEK, out=tmp_path / "o").data
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
])
def test_a_bad_editor_file_is_one_clear_error(settings, text, message):
    write_editorial(settings, text)
    with pytest.raises(ConfigError) as info:
        load_editorial(settings.resolve(settings.paths.editorial_dir), SAMPLE_WEEK, TIER_NAMES)
    assert message in str(info.value) and f"{SAMPLE_WEEK}.toml" in str(info.value)


def test_no_file_changes_nothing(settings, tmp_path):
    editorial = load_editorial(tmp_path / "none", SAMPLE_WEEK, TIER_NAMES)
    assert editorial.entries == {} and editorial.path is None


@pytest.mark.subprocess
def test_a_bad_editor_file_exits_2_from_the_command_line(tmp_path):
    import subprocess

    from support.commands import newsletter_cmd
    from support.project import SAMPLE_FEED

    (tmp_path / "newsletter.toml").write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n')
    (tmp_path / "editorial").mkdir()
    (tmp_path / "editorial" / f"{SAMPLE_WEEK}.toml").write_text("[1]\nwhat = 1\n")
    result = subprocess.run([*newsletter_cmd(), "build", "--week", SAMPLE_WEEK], cwd=tmp_path,
                            env=clean_env(), capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "unknown key" in result.stderr
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("key", ["\u0663", "53721" + "0" * 5000, "1234567890", "0"])
def test_a_table_name_that_is_no_pr_number_is_one_clear_error(settings, key):
    write_editorial(settings, f'["{key}"]\nhide = true\n')
    with pytest.raises(ConfigError, match="PR number"):
        load_editorial(settings.resolve(settings.paths.editorial_dir), SAMPLE_WEEK, TIER_NAMES)


def test_the_editors_texts_carry_no_bidi_or_invisible_character(settings):
    write_editorial(settings, '[53721]\nnote = "Read\\u202e this\\u200b first"\n'
                              '[53721.en]\ntitle = "Fix \\u202eSECURITY ALERT\\u2069"\n'
                              'body = "Must read.\\u2066\\n\\nSecond\\ufeff."\n')
    entry = load_editorial(settings.resolve(settings.paths.editorial_dir), SAMPLE_WEEK,
                           TIER_NAMES).get(53721)
    assert entry is not None
    assert entry.texts["en"].title == "Fix SECURITY ALERT"
    assert entry.texts["en"].body == "Must read.\n\nSecond."
    assert entry.note.en == "Read this first"
