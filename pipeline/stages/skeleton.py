"""``newsletter translations``: a skeleton in the editor's file for every text to write.

Each item's missing or machine-made language gets a table ``[<pr>.<lang>]`` with empty
``title`` and ``body`` (which change nothing in a build), the other language quoted above it.
The file is only ever appended to, and a table the editor has is left alone.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import ConfigError, OutputError
from pipeline.model import LANGS, Item, Lang
from pipeline.output import write_file

_LANG_NAMES = {"zh": "Chinese", "en": "English"}


def wanted(items: Sequence[Item]) -> list[tuple[Item, Lang]]:
    """(item, language) pairs the editor should write: missing or machine-made."""
    return [(item, lang) for item in items for lang in LANGS
            if (text := item.text(lang)) is None or text.source.startswith("machine:")]


def _comment(text: str) -> str:
    return "\n".join(f"#   {line}" if line else "#" for line in text.splitlines())


def skeleton_block(item: Item, lang: str) -> str:
    """One table for the editor to fill, with what there is to translate from."""
    other = "en" if lang == "zh" else "zh"
    current, source = item.text(lang), item.text(other)
    lines = [f"# PR #{item.pr} ({item.tier}) {item.url}"]
    if current is not None:
        lines.append(f"# {_LANG_NAMES[lang]} now: {current.source} (a draft to correct)")
        lines += [_comment(current.title), _comment(current.body_text)]
    if source is not None:
        lines.append(f"# {_LANG_NAMES[other]} ({source.source}):")
        lines += [_comment(source.title), _comment(source.body_text)]
    lines += [f"[{item.pr}.{lang}]", 'title = ""', 'body = """', '"""', ""]
    return "\n".join(lines) + "\n"


def extend(path: Path, items: Sequence[Item]) -> list[tuple[int, str]]:
    """Append the missing tables to ``path``; return the (pr, lang) pairs added."""
    try:
        head = path.read_bytes().decode("utf-8")
        tables = tomllib.loads(head)
    except FileNotFoundError:
        head, tables = "", {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it before adding to it") \
            from None
    new: list[tuple[Item, str]] = []
    for item, lang in wanted(items):
        entry = tables.get(str(item.pr), {})
        if not (isinstance(entry, dict) and lang in entry):  # the editor's is never touched
            new.append((item, lang))
    if not new:
        return []
    if not head:
        head = ("# The editor's file for this week: priority, hide, note, and texts per "
                "language.\n# Empty title/body change nothing; fill them to replace the "
                "feed's or the machine's text.\n")
    elif not head.endswith("\n"):
        head += "\n"
    body = head + "\n" + "\n".join(skeleton_block(item, lang) for item, lang in new)
    tomllib.loads(body)  # what we append must leave the file valid
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, body.encode("utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return [(item.pr, lang) for item, lang in new]
