"""Proof: a built issue → the report the editor reads before approving it.

Pure. It repeats every problem ``build`` recorded and adds what only the finished artifacts
show, in every layout and variant: a part over the size budget, a personal-link placeholder
outside a slot, an image without ``alt``, an unsafe or suspicious link, template code left
outside the supplied text. Blocking problems come first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urlsplit

from markupsafe import escape

from pipeline.core.email.render import PLACEHOLDERS, Budget, stray_placeholders
from pipeline.core.issue.bilingual import sort_problems
from pipeline.core.issue.built_issue import BuiltIssue
from pipeline.core.issue.sanitize import one_line
from pipeline.model import LANGS, LAYOUTS, Issue, Item, Problem, Severity, Skipped

#: Share of the budget above which a layout is flagged as close to it.
NEAR_SHARE = 0.9
#: Schemes that run code or smuggle content in: never in a newsletter.
UNSAFE_SCHEMES = frozenset({"javascript", "vbscript", "data", "file"})
_GITHUB_HOSTS = frozenset({"github.com", "www.github.com"})
_LEFTOVERS = ("{{", "{%", "<mj-")


@dataclass(frozen=True)
class LayoutSize:
    """One layout's HTML part against the budget."""

    layout: str
    #: The file's bytes (UTF-8), as built.
    bytes: int
    #: What a recipient's copy weighs as sent: after its transfer encoding, placeholders
    #: counted at a signed link's length.
    weight: int
    #: The budget in bytes: ``[issue] size_budget_kb`` × 1,000, never above 100 KB.
    budget: int

    @property
    def percent(self) -> float:
        return 100.0 * self.weight / self.budget if self.budget else 0.0

    @property
    def status(self) -> str:
        """``over`` the budget, ``near`` it (above 90 %), or ``ok``."""
        if self.weight > self.budget:
            return "over"
        return "near" if self.weight > NEAR_SHARE * self.budget else "ok"


@dataclass(frozen=True)
class VariantProof:
    """One interest variant as the editor proofs it."""

    key: str
    layout: str
    #: The areas it puts first.
    areas: tuple[str, ...]
    #: Its HTML part against the budget (named by the key).
    html: LayoutSize
    #: Its text part as sent (the budget applies to it too).
    text_weight: int
    #: How many items were shortened to a title and a link, and left to the archive.
    shrunk: int = 0
    folded: int = 0


@dataclass(frozen=True)
class ProofReport:
    """Everything the preview shows about one built issue."""

    issue_id: str
    content_hash: str
    #: Every problem, blocking first.
    problems: tuple[Problem, ...]
    sizes: tuple[LayoutSize, ...]
    #: The items in reading order.
    ranking: tuple[Item, ...]
    #: PRs the editor's file hid this week.
    hidden: tuple[int, ...]
    #: Feed entries build could not use, with the reason.
    skipped: tuple[Skipped, ...]
    #: The interest variants rendered, by key.
    variants: tuple[VariantProof, ...] = ()

    @property
    def blocking(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "blocking")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def has_blocking(self) -> bool:
        return bool(self.blocking)


def proof(built: BuiltIssue, *, budget: Budget, repo: str) -> ProofReport:
    """The proof report of ``built``, checked against ``budget`` and ``repo``'s PR links."""
    issue = built.issue
    html = {key: built.html(key) for key in built.keys}
    text = {key: built.text(key) for key in built.keys}
    sizes = {key: LayoutSize(key, len(document.encode("utf-8")),
                             budget.weigh(document, html=True), budget.bytes)
             for key, document in html.items()}
    already_over = {p.layout for p in issue.problems if p.code == "over-size-limit"}
    found = [problem for size in sizes.values() if (problem := _size_problem(size, already_over))]
    found += check_markup(html, repo)
    found += check_parts(html, text, _feed_strings(issue))
    return ProofReport(
        issue_id=issue.id,
        content_hash=built.content_hash,
        problems=sort_problems([*issue.problems, *found]),
        sizes=tuple(sizes[layout] for layout in LAYOUTS),
        ranking=issue.items,
        hidden=issue.hidden,
        skipped=issue.skipped,
        variants=tuple(VariantProof(v.key, v.variant.layout, v.variant.areas, sizes[v.key],
                                    budget.weigh(text[v.key]), len(v.brief), v.folded)
                       for v in built.variants),
    )


def _size_problem(size: LayoutSize, already_over: set[str | None]) -> Problem | None:
    shown = (f"{size.layout}: {size.weight / 1000:.1f} KB as sent, {size.percent:.0f}% of "
             f"the {size.budget / 1000:.0f} KB budget")
    if size.status == "over" and size.layout not in already_over:
        return Problem("over-size-limit", "blocking", layout=size.layout,
                       message=f"{shown}; mail clients clip or refuse it")
    if size.status == "near":
        return Problem("near-size-limit", "warning", layout=size.layout,
                       message=f"{shown}; close to the limit")
    return None


# -- links and images ------------------------------------------------------------------------


class _Markup(HTMLParser):
    """Collects the links and images of one HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images_without_alt: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("a", "area") and "href" in values:
            self.links.append((values["href"] or "").strip())
        elif tag == "img" and "alt" not in values:
            self.images_without_alt.append(values.get("src") or "(no src)")

    handle_startendtag = handle_starttag


def check_markup(html: Mapping[str, str], repo: str) -> list[Problem]:
    """Images without alt and links a reader should not get, each once with its layouts."""
    links: dict[tuple[str, str], list[str]] = {}
    images: dict[str, list[str]] = {}
    for layout, document in html.items():
        parser = _Markup()
        parser.feed(document)
        parser.close()
        for href in parser.links:
            if verdict := link_verdict(href, repo):
                links.setdefault((href, verdict), []).append(layout)
        for src in parser.images_without_alt:
            images.setdefault(src, []).append(layout)
    problems = []
    for (href, verdict), layouts in links.items():
        code, severity, why = _LINK_VERDICTS[verdict]
        problems.append(_seen_in(layouts, code, severity,
                                 f"link {one_line(href, 80)} {why.format(repo=repo)}"))
    return problems + [
        _seen_in(layouts, "image-without-alt", "warning",
                 f"image {one_line(src, 80)} has no alt text (screen readers, and mail apps "
                 "that block images, show nothing)")
        for src, layouts in images.items()]


def _seen_in(layouts: list[str], code: str, severity: Severity, what: str) -> Problem:
    """A finding in ``layouts`` (and variant keys): "every layout" stands for the four."""
    shown = ", ".join(layouts)
    if set(LAYOUTS) <= set(layouts):
        rest = [key for key in layouts if key not in LAYOUTS]
        shown = "every layout" + (f" and {', '.join(rest)}" if rest else "")
    return Problem(code, severity, layout=layouts[0] if len(layouts) == 1 else None,
                   message=f"{shown}: {what}")


_LINK_VERDICTS: dict[str, tuple[str, Severity, str]] = {
    "unsafe": ("unsafe-link", "blocking", "uses a scheme that runs code or embeds content"),
    "scheme": ("suspicious-link", "warning", "is not an http(s) link"),
    "github": ("suspicious-link", "warning", "points into GitHub but not to a PR of {repo}"),
}


#: A link to an id in the same message, as the contents list writes them (a card's
#: ``#pr-<n>``; a long week's ``#tier-<name>`` and ``#more``): no scheme, no request.
_SAME_MESSAGE = re.compile(r"#(?:pr-[0-9]{1,9}|tier-[a-z-]+|more)")


def link_verdict(href: str, repo: str) -> str | None:
    """None for a link readers may get; else ``unsafe``, ``scheme`` or ``github``."""
    if href in PLACEHOLDERS or _SAME_MESSAGE.fullmatch(href):
        return None
    compact = re.sub(r"[\x00-\x20]", "", href)  # browsers ignore these inside a scheme
    scheme = urlsplit(compact).scheme.lower()
    if scheme in UNSAFE_SCHEMES:
        return "unsafe"
    if scheme not in ("http", "https"):
        return "scheme"
    parts = urlsplit(href)
    # 1 to 9 ASCII digits, as collect takes them: a longer number is no PR.
    if (parts.hostname or "").lower() in _GITHUB_HOSTS and not re.fullmatch(
            rf"/{re.escape(repo)}/pull/[0-9]{{1,9}}(/.*)?", parts.path, re.I):
        return "github"
    return None


# -- personal links and template leftovers ------------------------------------------------


def check_parts(html: Mapping[str, str], text: Mapping[str, str],
                feed_strings: Iterable[str | None]) -> list[Problem]:
    """Per part, both blocking: a personal-link placeholder anywhere but a template slot, and
    ``{{``, ``{%`` or ``<mj-`` outside the text the feed supplied."""
    strings = sorted({s for s in feed_strings if s}, key=len, reverse=True)
    markup = sorted({*strings, *(str(escape(s)) for s in strings)}, key=len, reverse=True)
    problems = []
    for kind, documents, known in (("html", html, markup), ("txt", text, strings)):
        for key, document in documents.items():
            if stray := stray_placeholders(document, kind):
                problems.append(Problem(
                    "stray-personal-link", "blocking", layout=key,
                    message=f"email-{key}.{kind}: {stray} personal-link placeholder(s) "
                            f"outside the template's slots would hand each recipient's signed "
                            f"link to whoever wrote them; rebuild the issue"))
            rest = document
            for s in known:
                rest = rest.replace(s, " ")
            if found := [marker for marker in _LEFTOVERS if marker in rest]:
                index = min(rest.index(m) for m in found)
                problems.append(Problem(
                    "template-leftover", "blocking", layout=key,
                    message=f"email-{key}.{kind}: template code left in what readers see "
                            f"({', '.join(found)}): …{one_line(rest[index:index + 60], 80)}…"))
    return problems


def _feed_strings(issue: Issue) -> list[str | None]:
    """Every string of the issue that came from the feed or the editor's file."""
    items = issue.items
    texts = [text for item in items for lang in LANGS if (text := item.text(lang))]
    return [*(s for text in texts for s in (text.title, text.body_html, text.body_text)),
            *(note for item in items if item.note for note in (item.note.zh, item.note.en)),
            *(item.scope_note for item in items),
            *(words.get(layout, "") for words in (issue.subject, issue.preheader)
              for layout in LAYOUTS)]
