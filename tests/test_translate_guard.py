"""The placeholder guard (pipeline/core/issue/translate_guard.py): what a translator may not touch
survives, on the eight seed reviews and on hostile translations."""

from __future__ import annotations

import html
import re

import pytest
from support.project import seed_reviews

from pipeline.core.issue.sanitize import clean_html, text_to_html
from pipeline.core.issue.translate_guard import Guarded, GuardError, placeholder, protect, restore

PLACEHOLDER = re.compile(r"⟦(\d+)⟧")


REVIEWS = seed_reviews()


def body_html(index: int) -> str:
    return clean_html(text_to_html(REVIEWS[index][1]))


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+?)`", text)


def renumber(text: str, mapping: dict[int, int]) -> str:
    return PLACEHOLDER.sub(lambda m: placeholder(mapping.get(int(m[1]), int(m[1]))), text)


@pytest.mark.parametrize("index", range(8))
def test_a_seed_review_round_trips_with_every_backticked_span_protected_whole(index: int) -> None:
    headline, body = REVIEWS[index]
    assert headline and body.startswith("值得")
    assert restore(protect(headline), protect(headline).text) == headline
    source = body_html(index)
    guarded = protect(source)
    assert restore(guarded, guarded.text) == source
    assert len(PLACEHOLDER.findall(guarded.text)) == len(guarded.spans)
    codes = backticked(body)
    assert codes, "every seed review cites code"
    for code in codes:
        assert f"<code>{html.escape(code, quote=False)}</code>" in guarded.spans
        assert code not in guarded.text, code


@pytest.mark.parametrize(("index", "kept"), [
    (0, ["MoRI-IO"]),  # headline
    (1, ["Qwen4Exp", "6d038df"]),
    (4, ["ROCm", "DeepSeek-V4", "+4.6%"]),  # headline
    (5, ["27", "#56668", "#54042", "81"]),
    (3, ["soft_fail", "source_file_dependencies"]),
    (7, ["_remote_agents", "RLock", "10", "100"]),
])
def test_unquoted_code_references_and_figures_of_the_seed_are_protected(
        index: int, kept: list[str]) -> None:
    headline, body = REVIEWS[index]
    for text in (headline, clean_html(text_to_html(body))):
        guarded = protect(text)
        prose = PLACEHOLDER.sub(" ", guarded.text)
        for item in kept:
            if item in text:
                assert item in guarded.spans, (item, guarded.spans)
                assert not re.search(rf"(?<![\w.+#-]){re.escape(item)}(?![\w%])", prose)
    both = headline + body
    assert all(item in both for item in kept)


def test_the_seed_prose_is_left_to_translate() -> None:
    everything = " ".join(protect(body_html(i)).text + protect(REVIEWS[i][0]).text
                          for i in range(8))
    for prose in ("值得精读", "值得中等优先级精读", "KV", "NIXL", "fail closed", "local/remote",
                  "E2E/Smoke", "drafted/accepted", "PR", "FP32", "BF16", "cudagraph", "e2e",
                  "commit", "issue", "coderabbitai"):
        assert prose in everything, prose


@pytest.mark.parametrize(("text", "spans"), [
    *((f"吞吐提升 {figure}，见下文。", (figure,)) for figure in [  # figures, whole
        "+4.6%", "12.99%", "-1.5%", "2.5×", "3x", "12 ms", "80GB", "1,024", "27", "0.6.3",
        "~3×", "128K", "1.5 tok/s"]),
    ("改动在 ops/ple.py::_ple_conv_kernel 中", ("ops/ple.py::_ple_conv_kernel",)),
    ("见 vllm/models/deepseek_v4/amd/rocm.py。", ("vllm/models/deepseek_v4/amd/rocm.py",)),
    ("目录 tests/kernels/ 下", ("tests/kernels/",)),
    ("用 torch.equal 断言", ("torch.equal",)),
    ("调用 flush() 之后", ("flush()",)),
    ("SupportsHMA 与 LookupPhase", ("SupportsHMA", "LookupPhase")),
    ("MIN_ACCEPTANCE_LEN 与 _handshake_lock", ("MIN_ACCEPTANCE_LEN", "_handshake_lock")),
    ("commit 6d038df 的修复", ("6d038df",)),
    ("full hash 0123456789abcdef0123456789abcdef01234567.", (
        "0123456789abcdef0123456789abcdef01234567",)),
    ("See vllm-project/vllm#56668 and #54042.", ("vllm-project/vllm#56668", "#54042")),
    ("链接 https://github.com/vllm-project/vllm/pull/56671。", (
        "https://github.com/vllm-project/vllm/pull/56671",)),
    ("(see https://docs.vllm.ai/en/latest/).", ("https://docs.vllm.ai/en/latest/",)),
    ("Run newsletter build --week 2026-W48", ("--week", "2026")),
    ("Mail weekly@example.org today", ("weekly@example.org",)),
    ("Upgrade to v0.6.3rc1 now", ("v0.6.3rc1",)),
    ("It uses Node.js", ("Node.js",)),
    ("DeepSeek", ("DeepSeek",)),  # an inner capital: kept, as product names should be
])
def test_figures_and_code_references_are_protected(text: str, spans: tuple[str, ...]) -> None:
    guarded = protect(text)
    assert guarded.spans == spans
    assert restore(guarded, guarded.text) == text


@pytest.mark.parametrize("prose", [
    "e.g. this", "i.e. that", "PRs and GPUs", "and/or", "KV cache", "non-blocking", "the 1st run",
    "FP32 and BF16", "H100", "E2E/Smoke", "Lock", "cudagraph",
])
def test_prose_is_not_protected(prose: str) -> None:
    assert protect(prose) == Guarded(prose, ())


def test_tags_code_and_entities_are_protected_and_block_tags_share_a_placeholder() -> None:
    source = ('<p>See <a href="https://x.test/a?b=1&amp;c=2" rel="noopener noreferrer">the '
              'design</a> &amp; <em>why</em> it is <code>a &lt; b</code>.</p>'
              '<ul><li>one</li><li>two<br>lines</li></ul><pre><code>x = 1\ny = 2</code></pre>')
    guarded = protect(source)
    assert guarded.text == ("⟦1⟧See ⟦2⟧the design⟦3⟧ ⟦4⟧ ⟦5⟧why⟦6⟧ it is ⟦7⟧.⟦8⟧one⟦9⟧"
                            "two⟦10⟧lines⟦11⟧")
    assert guarded.spans[1] == '<a href="https://x.test/a?b=1&amp;c=2" rel="noopener noreferrer">'
    assert guarded.spans[6] == "<code>a &lt; b</code>"
    assert guarded.spans[7] == "</p><ul><li>"
    assert guarded.spans[-1] == "</li></ul><pre><code>x = 1\ny = 2</code></pre>"
    assert restore(guarded, guarded.text) == source


def test_whitespace_between_block_tags_joins_their_placeholder() -> None:
    source = "<p>一</p>\n\n<p>二</p>"
    guarded = protect(source)
    assert guarded.text == "⟦1⟧一⟦2⟧二⟦3⟧"
    assert guarded.spans[1] == "</p>\n\n<p>"


def test_placeholder_brackets_in_the_source_are_protected() -> None:
    source = "数学记号 ⟦x⟧ 与 ⟦1⟧ 不是占位符"
    guarded = protect(source)
    assert "⟦x" not in guarded.text
    assert all(m.group() == placeholder(int(m[1])) for m in PLACEHOLDER.finditer(guarded.text))
    assert re.sub(r"⟦\d+⟧", "", guarded.text).count("⟦") == 0
    assert restore(guarded, guarded.text) == source


def test_placeholders_survive_zh_en_punctuation_conventions() -> None:
    """Translators swap ASCII and CJK punctuation; the placeholder uses none of it."""
    guarded = protect(body_html(1))
    swaps = str.maketrans({"(": "（", ")": "）", ",": "，", ":": "：", ";": "；", "[": "【",
                           "]": "】", "<": "〈", ">": "〉", "{": "｛", "}": "｝", '"': "“"})
    back = str.maketrans({v: k for k, v in
                          {"(": "（", ")": "）", ",": "，", ":": "：", ";": "；"}.items()})
    assert restore(guarded, guarded.text.translate(swaps).translate(back))
    assert all(set(placeholder(n)) <= set("⟦⟧0123456789") for n in range(1, 200))


def test_spaces_or_full_width_digits_inside_a_placeholder_still_count() -> None:
    guarded = protect("调用 flush() 两次")
    assert restore(guarded, "call ⟦ 1 ⟧ twice") == "call flush() twice"
    assert restore(guarded, "call ⟦１⟧ twice") == "call flush() twice"


# -- hostile translations ---------------------------------------------------------------------


def seed_guarded() -> tuple[str, Guarded]:
    source = body_html(0)
    return source, protect(source)


def test_a_translation_that_reorders_placeholders_is_accepted() -> None:
    source, guarded = seed_guarded()
    # ⟦2⟧ = <code>SupportsHMA</code>, ⟦3⟧ = <code>request_finished_all_groups</code>
    assert guarded.spans[1:3] == ("<code>SupportsHMA</code>",
                                  "<code>request_finished_all_groups</code>")
    swapped = renumber(guarded.text, {2: 3, 3: 2})
    restored = restore(guarded, swapped)
    assert restored != source
    assert restored.index("request_finished_all_groups") < restored.index("SupportsHMA")
    assert sorted(restored) == sorted(source)


def test_a_dropped_placeholder_is_rejected_naming_what_it_stood_for() -> None:
    _, guarded = seed_guarded()
    with pytest.raises(GuardError) as caught:
        restore(guarded, guarded.text.replace("⟦2⟧", ""))
    assert caught.value.reason.startswith("⟦2⟧ ('<code>SupportsHMA</code>') was lost")
    assert str(caught.value) == caught.value.reason


#: What the guard says of ⟦3⟧ of the first seed review when the translation lost it.
LOST_3 = r"⟦3⟧ \('<code>request_finished_all_groups</code>'\) was lost"


@pytest.mark.parametrize(("placeholder_3", "said"), [
    ("⟦3⟧ ⟦3⟧", r"⟦3⟧ \('<code>request_finished_all_groups</code>'\) appears 2 times"),
    ("⟦2⟧", r"⟦2⟧ .* appears 2 times"),
    ("⟦9⟧", LOST_3 + ".*⟦9⟧ was invented"),  # one past the review's last placeholder, ⟦8⟧
    # Written out: the translator never saw the identifier, so its placeholder was lost.
    ("<code>request_finished_all_group</code>", LOST_3),
    *((broken, LOST_3) for broken in ["⟦3", "3⟧", "⟦3]", "[3]", "⟦三⟧"]),
    ("⟦3", "malformed placeholder near"),
    ("⟦3⟧ ⟦99⟧", r"⟦99⟧ was invented"),
], ids=["duplicated", "renumbered to another", "renumbered past the last", "written out",
        "unclosed", "unopened", "ascii bracket", "square brackets", "chinese numeral",
        "stray bracket", "invented"])
def test_a_duplicated_renumbered_malformed_or_invented_placeholder_is_rejected(
        placeholder_3: str, said: str) -> None:
    _, guarded = seed_guarded()
    with pytest.raises(GuardError, match=said):
        restore(guarded, guarded.text.replace("⟦3⟧", placeholder_3))


def test_a_placeholder_in_a_text_without_any_is_invented() -> None:
    with pytest.raises(GuardError, match=r"⟦1⟧ was invented \(the text has no placeholders\)"):
        restore(protect("纯文本"), "plain ⟦1⟧")


# -- inline markup ----------------------------------------------------------------------------


INLINE = ('<p>值得精读：见 <a href="https://github.com/vllm-project/vllm/pull/56366" '
          'rel="noopener noreferrer">这个 PR</a> 中的 <em>渲染顺序</em>，'
          '以及 <strong>索引</strong> 与 <code>extract_media_parts</code>。</p>'
          '<ul><li>第一点<br>续行</li><li>第二点</li></ul>')


def fake_english(text: str) -> str:
    """A 'translation' that keeps placeholders and changes all the prose."""
    parts = re.split(r"(⟦\d+⟧)", text)
    return "".join(p if PLACEHOLDER.fullmatch(p) else re.sub(r"[\u4e00-\u9fff]+", "zh", p)
                   for p in parts)


def test_inline_markup_survives_a_round_trip() -> None:
    source = clean_html(INLINE)
    assert source == INLINE  # already sanitized
    guarded = protect(source)
    translated = restore(guarded, fake_english(guarded.text))
    assert clean_html(translated) == translated
    for tag in ('<a href="https://github.com/vllm-project/vllm/pull/56366" '
                'rel="noopener noreferrer">', "</a>", "<em>", "</em>", "<strong>", "</strong>",
                "<code>extract_media_parts</code>", "<br>", "<ul><li>", "</li><li>",
                "</li></ul>"):
        assert translated.count(tag) == source.count(tag) == 1, tag
    assert "zh PR</a>" in translated


def test_moving_a_whole_inline_element_is_accepted() -> None:
    guarded = protect(INLINE)
    # ⟦2⟧…⟦3⟧ is the link, ⟦4⟧…⟦5⟧ the emphasis: swap the two elements, text and all.
    text = guarded.text
    link = text[text.index("⟦2⟧"): text.index("⟦3⟧") + 3]
    emphasis = text[text.index("⟦4⟧"): text.index("⟦5⟧") + 3]
    swapped = text.replace(link, "\0").replace(emphasis, link).replace("\0", emphasis)
    restored = restore(guarded, swapped)
    assert restored.index("<em>") < restored.index("<a href")
    assert clean_html(restored) == restored


def test_a_closing_tag_moved_before_its_opening_tag_or_crossed_elements_are_rejected() -> None:
    guarded = protect(INLINE)
    assert (guarded.spans[3], guarded.spans[4]) == ("<em>", "</em>")
    with pytest.raises(GuardError, match=r"markup out of order: ⟦5⟧ \('</em>'\)"):
        restore(guarded, renumber(guarded.text, {4: 5, 5: 4}))
    guarded = protect("<p><em>甲</em>乙<strong>丙</strong></p>")
    assert guarded.text == "⟦1⟧⟦2⟧甲⟦3⟧乙⟦4⟧丙⟦5⟧⟦6⟧"
    with pytest.raises(GuardError, match="markup out of order"):
        restore(guarded, "⟦1⟧⟦2⟧A⟦4⟧B⟦3⟧C⟦5⟧⟦6⟧")  # <em>A<strong>B</em>C</strong>


def test_a_plain_text_with_angle_brackets_round_trips() -> None:
    title = "Vec<T> 与 a < b 的比较"
    guarded = protect(title)
    assert guarded.spans == ("<T>",)
    assert restore(guarded, "Comparing Vec⟦1⟧ with a < b") == "Comparing Vec<T> with a < b"
