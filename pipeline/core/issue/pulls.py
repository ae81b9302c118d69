"""What a PR's facts from GitHub mean for an item: areas from its title tags and labels,
and the review's code spans that name a changed file linked to it in the diff view. Pure.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import replace

from pipeline.model import LANGS, Item, PullFacts

_TAG = re.compile(r"\[([^\[\]]+)\]")


def title_tags(title: str) -> tuple[str, ...]:
    """Every bracketed text in a PR title, stripped, as written and in order."""
    return tuple(tag for tag in (m.group(1).strip() for m in _TAG.finditer(title)) if tag)


def area_names(facts: PullFacts) -> tuple[str, ...]:
    """Areas (lower-case-hyphen) from the title tags and labels, sorted, no duplicates."""
    names = {re.sub(r"[\s_/]+", "-", name.strip().lower()) for name in (*facts.tags, *facts.labels)}
    return tuple(sorted(name for name in names if name))


_PATHLIKE = re.compile(r"^[\w.\-/]+$")
_CODE = re.compile(r"<code>([^<>]+)</code>")


def names_paths(body_html: str) -> bool:
    """Whether a review's code spans look like file paths or test names worth matching."""
    return any(_PATHLIKE.match(code) and ("/" in code or code.endswith(".py") or "test" in code)
               for code in _CODE.findall(body_html))


def diff_url(pr_url: str, path: str) -> str:
    """The file's place in the PR's diff view (GitHub's anchor: ``diff-`` + sha256 of the path)."""
    return f"{pr_url.rstrip('/')}/files#diff-{hashlib.sha256(path.encode()).hexdigest()}"


def _match(code: str, files: tuple[str, ...]) -> str | None:
    """The one PR file a code span names: its full path, a path suffix, or a basename (a test
    file named with ``::test_name`` too). Ambiguous or unknown names match nothing."""
    name = html.unescape(code).strip().split("::")[0]
    if not name or any(c.isspace() for c in name):
        return None
    if name in files:
        return name
    found = [path for path in files if path.endswith("/" + name)]
    return found[0] if len(found) == 1 else None


def link_files(body_html: str, files: tuple[str, ...], pr_url: str) -> str:
    """Sanitized HTML with each ``<code>`` naming one of the PR's files linked to it in the
    diff view; code already inside a link is left alone, the rest is returned byte for byte."""
    def link(m: re.Match[str]) -> str:
        if body_html.rfind("<a ", 0, m.start()) > body_html.rfind("</a>", 0, m.start()):
            return m.group(0)  # already inside a link
        path = _match(m.group(1), files)
        if path is None:
            return m.group(0)
        return f'<a href="{html.escape(diff_url(pr_url, path))}">{m.group(0)}</a>'

    return _CODE.sub(link, body_html) if files else body_html


def with_facts(item: Item, facts: PullFacts | None) -> Item:
    """The item with the PR's facts from GitHub; areas from the title tags and labels when
    the feed gave none."""
    if facts is None:
        return item
    return replace(item, github=facts, areas=item.areas or area_names(facts))


def link_item(item: Item) -> Item:
    """Backticked paths naming the PR's changed files linked to them in the diff view."""
    if item.github is None or not item.github.files:
        return item
    files = item.github.files
    for lang in LANGS:
        text = item.text(lang)
        if text is not None:
            item = item.with_text(lang, replace(text, body_html=link_files(
                text.body_html, files, item.url)))
    return item
