"""The README and docs/ refer only to what a clone holds: a link to a file outside the
repository, or to a page since renamed, is a promise a reader cannot follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.project import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
_OUTSIDE = re.compile(r"(?<![\w-])(?:\.\./)*shared/|(?:DESIGN|NOTES|STYLE)\.md")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces → hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def _links(doc: Path) -> list[str]:
    return _LINK.findall(_FENCE.sub("", doc.read_text(encoding="utf-8")))


def _resolves(doc: Path, target: str) -> bool:
    """A relative link names an existing file inside the repository (and a heading of it)."""
    path, _, anchor = target.partition("#")
    page = (doc.parent / path).resolve() if path else doc
    if not page.is_relative_to(ROOT.resolve()) or not page.exists():
        return False
    return not anchor or page.suffix != ".md" or anchor in _anchors(page)


def test_the_docs_are_found() -> None:
    names = {path.name for path in DOCS}
    assert {"README.md", "architecture.md", "operations.md", "subscriptions.md",
            "deploy.md"} <= names


#: Every file a reader may open to learn why (but this one, which names the pattern).
SOURCES = sorted(p for folder in ("pipeline", "subscribers", "tests", "templates", "deploy",
                                  "scripts", "examples", "bench", ".ci", ".github")
                 for p in (ROOT / folder).rglob("*")
                 if p.is_file() and p.suffix in {".py", ".j2", ".toml", ".yml", ".yaml", ".md",
                                                 ".sh", ".txt", ""}
                 and p != Path(__file__).resolve() and "__pycache__" not in p.parts)


def test_no_file_refers_to_files_outside_the_repository() -> None:
    assert len(SOURCES) > 150
    found = [f"{p.relative_to(ROOT)}:{n}" for p in [*DOCS, *SOURCES]
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1)
             if _OUTSIDE.search(line)]
    assert found == []


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_names_a_file_of_the_repository(doc: Path) -> None:
    broken = [target for target in _links(doc)
              if not _EXTERNAL.match(target) and not _resolves(doc, target)]
    assert broken == [], f"{doc.name}: links to nothing in the repository: {broken}"


def test_the_checks_themselves_catch_what_they_should() -> None:
    assert _OUTSIDE.search("See `../shared/DESIGN.md`.")
    assert _OUTSIDE.search("a sample in shared/seeds/")
    assert _OUTSIDE.search("the trap NOTES.md names")
    assert not _OUTSIDE.search("one store for every sending thread, not shared-nothing")
    assert _links(ROOT / "README.md")  # the README does link into docs/
    assert _slug("Production: one store for app and job, shards") == (
        "production-one-store-for-app-and-job-shards")
    assert _slug("`issue.json`") == "issuejson"
    readme = ROOT / "README.md"
    assert _resolves(readme, "docs/operations.md#configuration")
    assert not _resolves(readme, "docs/nowhere.md")
    assert not _resolves(readme, "docs/operations.md#no-such-heading")
    assert not _resolves(readme, "../shared/DESIGN.md")


def test_the_ranking_tables_rows_read_as_they_say():
    """Each opening in docs/ranking.md's table reads as its row says."""
    from pipeline.core.issue.verdict import parse_verdict

    text = (ROOT / "docs" / "ranking.md").read_text(encoding="utf-8")
    table = text.split("## What is recognised", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    rows = [row for row in rows if row[0] != "opening"]
    assert len(rows) >= 30 and {row[2] for row in rows} == {"must-read", "medium", "skim",
                                                            "unrated"}
    wrong = []
    for opening, lang, tier, _ in rows:
        verdict = parse_verdict(opening, "zh" if lang == "zh" else "en")
        if (verdict.tier if verdict else "unrated") != tier:
            wrong.append((opening, tier, verdict))
    assert wrong == []
