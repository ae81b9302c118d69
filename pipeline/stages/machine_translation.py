"""Machine translation of one text: protect code and markup, ask the memory, else the
translator, restore and check the answer. :func:`translate_items` asks for every missing
language before assembly, so assembling the issue makes no call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from pipeline.core.issue.bilingual import MachineText, missing_languages
from pipeline.core.issue.sanitize import clean_html, letter_counts, one_line
from pipeline.core.issue.translate_guard import GuardError, protect, restore
from pipeline.errors import TranslateError
from pipeline.model import Item
from pipeline.translate import LANGUAGE_NAMES, Memory, Translation, Translator

__all__ = ["Translate", "translate_html", "translate_items"]


class Translate(Protocol):
    """:func:`translate_html` with its translator and memory bound."""

    def __call__(self, html: str, source: str, target: str, *, title: bool = False
                 ) -> Translation: ...


def translate_items(items: Sequence[Item], translate: Translate | None
                    ) -> dict[tuple[int, str], MachineText]:
    """Every missing language of ``items`` machine-translated, by (PR, target). A backend
    that fails does not stop the build: the language stays missing, the proof says why."""
    if translate is None:
        return {}
    found: dict[tuple[int, str], MachineText] = {}
    for item, source, target, original in missing_languages(items):
        try:
            title = translate(original.title, source, target, title=True)
            body = translate(original.body_html, source, target)
        except TranslateError as exc:
            found[item.pr, target] = MachineText(failed=str(exc))
            continue
        found[item.pr, target] = MachineText(title.text, body.text, body.source,
                                             rejected=title.rejected or body.rejected)
    return found


_LETTER = re.compile(r"[^\W\d_]")
_PLACEHOLDERS = re.compile(r"⟦[^⟦⟧]*⟧")
_BLOCK_SPACE = re.compile(r"\s*(</?(?:p|ul|ol|li|blockquote)\b[^>]*>)\s*")
#: Above this share of Chinese characters among the letters, a text is not English.
_MAX_CJK_IN_ENGLISH = 0.1


def translate_html(translator: Translator, memory: Memory | None, html: str,
                   source: str, target: str, *, title: bool = False) -> Translation:
    """Translate one sanitized HTML body (or, with ``title``, one plain headline); a
    refused, empty or wrong-language answer comes back rejected and is not remembered.
    """
    if source not in LANGUAGE_NAMES or target not in LANGUAGE_NAMES or source == target:
        raise ValueError(f"cannot translate {source!r} into {target!r}")
    origin = f"machine:{translator.name}"
    key = {"backend": translator.name, "model": translator.model, "target": target}
    remembered = memory.get(html, **key) if memory is not None else None
    if remembered is not None:
        return Translation(remembered, origin, None, cached=True)
    guarded = protect(html)
    if not _LETTER.search(_PLACEHOLDERS.sub(" ", guarded.text)):  # only code, figures, markup
        return Translation(_finish(html, title), origin, None, cached=False)
    answer = translator.translate(guarded.text, source, target)
    try:
        text = _finish(restore(guarded, answer), title)
    except GuardError as exc:
        return Translation(None, origin, f"code or markup not kept: {exc.reason}", cached=False)
    problem = _language_problem(_PLACEHOLDERS.sub(" ", answer), target)
    if problem or not text:
        return Translation(None, origin, problem or "the translation is empty", cached=False)
    if memory is not None:
        memory.put(html, text, **key)
    return Translation(text, origin, None, cached=False)


def _finish(text: str, title: bool) -> str:
    """A title as one plain line; a body tidied around block tags and sanitized again."""
    if title:
        return one_line(text)
    return clean_html(_BLOCK_SPACE.sub(r"\1", text))


def _language_problem(prose: str, target: str) -> str | None:
    """Why the answer is not in ``target`` (a model that echoed its input), or None."""
    cjk, latin = letter_counts(prose)
    if target == "en" and cjk and cjk > _MAX_CJK_IN_ENGLISH * (cjk + latin):
        return (f"the translation is not in English ({cjk} of {cjk + latin} letters are "
                "Chinese)")
    if target == "zh" and cjk == 0 and latin:
        return "the translation is not in Chinese (no Chinese character in it)"
    return None
