"""The typed seams of pipeline/model.py: a language or a layout read from outside becomes a
``Lang`` only through a check, and an item's text is replaced per language."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.model import LAYOUTS, Item, Pair, Text, is_lang, layout_langs


def item() -> Item:
    return Item(pr=1, url="https://github.com/vllm-project/vllm/pull/1", tier="must-read",
                scope_note=None, why=Pair("", ""), reviewed_at=datetime(2026, 11, 24, tzinfo=UTC),
                areas=(), reading_minutes=Pair(1, 1),
                zh=Text("标题", "<p>正文</p>", "正文", "feed"), en=None)


def test_every_layout_names_its_languages_in_order():
    assert [layout_langs(layout) for layout in LAYOUTS] == [
        ("zh", "en"), ("en", "zh"), ("zh",), ("en",)]


@pytest.mark.parametrize("layout", ["fr", "zh-fr", "", "ZH-EN"])
def test_a_layout_naming_another_language_is_refused(layout):
    with pytest.raises(ValueError, match="names a language other than zh, en"):
        layout_langs(layout)


def test_is_lang_takes_exactly_zh_and_en():
    assert is_lang("zh") and is_lang("en")
    assert not any(is_lang(value) for value in ("ZH", "zh-CN", "", None, 1))


def test_with_text_replaces_one_language_only():
    english = Text("Title", "<p>Body</p>", "Body", "machine:test")
    before = item()
    after = before.with_text("en", english)
    assert (after.zh, after.en) == (before.zh, english)
    assert before.with_text("zh", None).zh is None and before.en is None
