"""The text part's wrapping: 78 columns, whole words, whole URLs, CJK-aware."""

from __future__ import annotations

import re

from pipeline.core.email.wrap import SIGNATURE, width, wrap_text

ZH = ("修复 MoRI-IO 连接器在多节点下的握手超时问题，并补上回归测试，这一改动值得精读，"
      "因为它触及了分布式推理里最容易出错的部分（见 https://github.com/vllm-project/vllm/pull/"
      "53721/files#diff-0123456789abcdef 的讨论）。") * 3
EN = ("Must read: `request_finished_all_groups` carries the contract from the type layer "
      "(https://github.com/vllm-project/vllm/pull/53721) to the protocol layer, and more "
      "words follow so that the line has to wrap more than once at seventy-eight.")


def test_every_line_fits_78_columns_unless_it_is_one_url():
    for text in (ZH, EN, "- " + EN, "1. " + ZH):
        lines = wrap_text(text).split("\n")
        assert len(lines) > 1
        for line in lines:
            assert width(line) <= 78 or re.fullmatch(r"\s*\S*https?://\S+", line), line


def test_nothing_is_lost_and_no_word_or_url_is_broken():
    for text in (ZH, EN):
        wrapped = wrap_text(text)
        assert "".join(wrapped.split()) == "".join(text.split())
        words = set(EN.split())
        for line in wrap_text(EN).split("\n"):
            assert all(word in words for word in line.split()), line
    assert "(https://github.com/vllm-project/vllm/pull/53721)" in wrap_text(EN).split("\n")


def test_cjk_lines_never_start_with_closing_punctuation():
    for line in wrap_text(ZH).split("\n")[1:]:
        assert line[:1] not in "，。、；：！？）」", line


def test_a_list_item_continues_under_its_text_and_the_signature_keeps_its_space():
    lines = wrap_text("- " + EN).split("\n")
    assert lines[0].startswith("- ") and all(line.startswith("  ") for line in lines[1:])
    assert wrap_text(f"body\n{SIGNATURE}\nfooter").split("\n")[1] == "-- "
