"""Feeds written by the tests: an :class:`Entry` is what a test sets of one feed entry,
:func:`atom` a well-formed Atom document of them, :func:`feed_project` a project reading one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from support.project import SAMPLE_WEEK, make_project


@dataclass
class Entry:
    """One feed entry to write; only what a test sets is written."""

    pr: int | None = 1
    title: str = "标题"
    body: str = "值得精读，测试。"
    published: str | None = "2026-11-24T10:00:00+08:00"
    updated: str | None = None
    lang: str | None = None
    id: str | None = None
    link: str | None = None
    content_type: str = "text"
    categories: list[str] = field(default_factory=list)
    repo: str = "vllm-project/vllm"


def atom(entries: list[Entry], feed_lang: str | None = "zh-CN") -> bytes:
    """A well-formed Atom 1.0 document holding ``entries``."""
    lang = f" xml:lang={quoteattr(feed_lang)}" if feed_lang else ""
    parts = [f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"'
             f'{lang}><title>t</title><id>tag:test,2026:feed</id>'
             f'<updated>2026-11-29T00:00:00Z</updated>']
    for n, e in enumerate(entries):
        link = e.link if e.link is not None else (
            f"https://github.com/{e.repo}/pull/{e.pr}" if e.pr else "")
        entry_lang = f" xml:lang={quoteattr(e.lang)}" if e.lang else ""
        parts.append(f"<entry{entry_lang}>")
        parts.append(f"<id>{escape(e.id or f'tag:test,2026:{e.pr}/{n}')}</id>")
        parts.append(f"<title>{escape(e.title)}</title>")
        if link:
            parts.append(f'<link rel="alternate" href={quoteattr(link)}/>')
        if e.published:
            parts.append(f"<published>{e.published}</published>")
        if e.updated:
            parts.append(f"<updated>{e.updated}</updated>")
        for term in e.categories:
            parts.append(f"<category term={quoteattr(term)}/>")
        # type="xhtml": the body is markup, written as it is inside the XHTML div.
        body = (f'<div xmlns="http://www.w3.org/1999/xhtml">{e.body}</div>'
                if e.content_type == "xhtml" else escape(e.body))
        parts.append(f'<content type="{e.content_type}">{body}</content>')
        parts.append("</entry>")
    parts.append("</feed>")
    return "".join(parts).encode("utf-8")


def raw_atom(entries_xml: str, feed_lang: str | None = "zh-CN") -> bytes:
    """An Atom document around entries written as XML by hand."""
    lang = f" xml:lang={quoteattr(feed_lang)}" if feed_lang else ""
    return (f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"'
            f"{lang}><title>t</title><id>tag:t,2026:f</id>"
            f"<updated>2026-11-29T00:00:00Z</updated>{entries_xml}</feed>").encode()


def feed_project(folder: Path, feed: bytes | list[Entry]) -> Path:
    """``folder`` as a project reading ``feed`` (its bytes, or entries) from feed.atom."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "feed.atom").write_bytes(feed if isinstance(feed, bytes) else atom(feed))
    return make_project(folder, feed="feed.atom")


def built_issue(project: Path, week: str = SAMPLE_WEEK) -> dict[str, Any]:
    """The issue.json a build of ``project`` wrote for ``week``; empty when it wrote none."""
    path = project / "build" / "issues" / week / "issue.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return data
