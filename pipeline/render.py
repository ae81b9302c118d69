"""Render: an :class:`Issue` → one HTML email (MJML) and one plain-text part per layout.

Pure: objects in, strings out. One Jinja environment, autoescape on for markup templates
(mjml-python does not validate and chokes on a raw ``<`` or ``&``), StrictUndefined so a
template mistake fails the build instead of shipping a blank. Per-recipient links are left as
placeholders, filled in at send time without re-rendering; the archive copy replaces them
with the public pages.

The size budget: Gmail clips an HTML part near 102 KB, and Chinese costs three bytes a
character. When a layout would exceed ``[issue] size_budget_kb``, the lowest-priority items
shrink to a title and a link to the archive, one at a time from the bottom; if the list of
titles itself does not fit, its tail becomes one "N more in the archive" link.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jinja2
from markupsafe import Markup
from mjml import mjml2html

from .errors import RenderError
from .model import LANG_TAGS, LAYOUTS, Issue, Item, Problem, Text, layout_langs
from .rank import TIER_BY_NAME, TIERS
from .week import week_ranges

#: Filled per recipient at send time; never left in a sent message or the public archive.
UNSUBSCRIBE_PLACEHOLDER = "%%unsubscribe_url%%"
PREFERENCES_PLACEHOLDER = "%%preferences_url%%"
#: Bytes reserved per placeholder for the real, signed link that replaces it.
LINK_RESERVE = 256
#: The hard ceiling whatever the budget says (KB = 1,000 bytes).
HARD_LIMIT_BYTES = 100_000

#: System fonts only: no web font request, CJK faces named before the generic fallback.
FONT_STACK = Markup(
    "-apple-system, BlinkMacSystemFont, 'Segoe UI', 'PingFang SC', 'Hiragino Sans GB', "
    "'Microsoft YaHei', 'Noto Sans CJK SC', Roboto, Helvetica, Arial, sans-serif"
)
TIER_COLORS = {
    "must-read": ("#ffebe9", "#a40e26"),
    "medium": ("#fff8c5", "#7d4e00"),
    "skim": ("#ddf4ff", "#0a3069"),
    "unrated": ("#eff2f5", "#59636e"),
}


def templates_dir() -> Path:
    """The built-in templates, wherever the package is installed."""
    return Path(str(resources.files("pipeline.templates")))


def environment(override_dirs: Sequence[Path] = ()) -> jinja2.Environment:
    """The one template environment: an operator's folders first, then the built-in ones."""
    loaders = [jinja2.FileSystemLoader(str(d)) for d in override_dirs]
    loaders.append(jinja2.FileSystemLoader(str(templates_dir())))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        # Markup templates escape everything; the plain-text part must not.
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True,
                                            disabled_extensions=("txt.j2",)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.globals["facts_line"] = facts_line
    return env


def facts_line(facts) -> str:
    """The PR's facts in one compact line: author, merged date (or state), +/− lines, tags.
    ``facts`` is a :class:`PullFacts` or its issue.json dict; "" for None."""
    if not facts:
        return ""
    get = facts.get if isinstance(facts, dict) else lambda key: getattr(facts, key)
    parts = []
    if get("author"):
        parts.append(f"@{get('author')}")
    merged = get("merged_at")
    if merged:
        day = merged[:10] if isinstance(merged, str) else merged.strftime("%Y-%m-%d")
        parts.append(f"merged {day}")
    else:
        parts.append(str(get("state")))
    parts.append(f"+{get('additions')}/\u2212{get('deletions')}")
    tags = " ".join(f"[{tag}]" for tag in get("tags") or ())
    if tags:
        parts.append(tags)
    return " · ".join(parts)


@functools.cache
def strings() -> dict[str, dict[str, str]]:
    """The UI words per language (``templates/strings.toml``)."""
    return tomllib.loads((templates_dir() / "strings.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class RenderedLayout:
    layout: str
    html: str
    text: str
    #: PRs shown as a title and a link only, to fit the budget.
    brief: tuple[int, ...] = ()
    #: How many PRs are left to the archive's "N more" link.
    folded: int = 0

    @property
    def html_bytes(self) -> int:
        return len(self.html.encode("utf-8"))


@dataclass(frozen=True)
class _Plan:
    full: tuple[Item, ...]
    brief: tuple[Item, ...]
    folded: int


class Renderer:
    """Renders issues with one set of compiled templates (reuse it across issues)."""

    def __init__(self, env: jinja2.Environment | None = None) -> None:
        self.env = env or environment()
        self.html_template = self._template("email/issue.mjml.j2")
        self.text_template = self._template("email/issue.txt.j2")

    def _template(self, name: str) -> jinja2.Template:
        try:
            return self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise RenderError(name, "template not found in "
                              + ", ".join(getattr(self.env.loader, "searchpath", [])
                                          or [str(templates_dir())])) from None
        except jinja2.TemplateSyntaxError as exc:
            raise RenderError(name, f"line {exc.lineno}: {exc.message}") from None

    def render(self, issue: Issue, base_url: str, budget_kb: int
               ) -> tuple[dict[str, RenderedLayout], list[Problem]]:
        """Every layout of ``issue``, each within the budget, and what fitting it cost."""
        budget = min(budget_kb * 1000, HARD_LIMIT_BYTES)
        rendered: dict[str, RenderedLayout] = {}
        problems: list[Problem] = []
        for layout in LAYOUTS:
            result, problem = self._fit(issue, layout, base_url.rstrip("/"), budget)
            rendered[layout] = result
            if problem:
                problems.append(problem)
        return rendered, problems

    # -- size budget -----------------------------------------------------------------

    def _fit(self, issue: Issue, layout: str, base_url: str, budget: int
             ) -> tuple[RenderedLayout, Problem | None]:
        items = issue.items
        n = len(items)
        text = self._text(issue, layout, base_url)

        def attempt(plan: _Plan) -> tuple[str, int]:
            html = self._html(issue, layout, base_url, plan)
            return html, _weight(html)

        html, size = attempt(_Plan(items, (), 0))
        if size <= budget:
            return RenderedLayout(layout, html, text), None
        full_size = size

        # Smallest number of items (from the bottom) to shrink to a title and a link.
        def shrink(k: int) -> _Plan:
            return _Plan(items[: n - k], items[n - k:], 0)

        k, found = _smallest(1, n, lambda k: attempt(shrink(k))[1] <= budget)
        if found is not None:
            plan = shrink(k)
        else:
            # Even the list of titles is too long: keep as many as fit, fold the rest.
            def fold(m: int) -> _Plan:
                return _Plan((), items[:m], n - m)

            m, _ = _largest(0, n - 1, lambda m: attempt(fold(m))[1] <= budget)
            plan = fold(m)
        html, size = attempt(plan)
        result = RenderedLayout(layout, html, text, tuple(i.pr for i in plan.brief), plan.folded)
        if size > budget:
            return result, Problem(
                "over-size-limit", "blocking", layout=layout,
                message=(f"{layout}: {size / 1000:.1f} KB even with every item folded; "
                         f"the budget is {budget / 1000:.0f} KB"),
            )
        shrunk = len(plan.brief) + plan.folded
        return result, Problem(
            "items-shrunk", "warning", layout=layout,
            message=(f"{layout}: {shrunk} lowest-priority item(s) shortened to a title and "
                     f"a link to fit {budget / 1000:.0f} KB (full: {full_size / 1000:.1f} KB)"
                     + (f"; {plan.folded} left to the archive" if plan.folded else "")),
        )

    # -- templates ---------------------------------------------------------------------

    def _context(self, issue: Issue, layout: str, base_url: str) -> dict:
        langs = layout_langs(layout)
        s = strings()
        year, number = issue.id.split("-W")
        ranges = week_ranges(issue.week.start, issue.week.end, issue.week.tz)
        return {
            "langs": langs,
            "lang_tag": LANG_TAGS,
            "html_lang": LANG_TAGS[langs[0]],
            "s": s,
            "subject": issue.subject[layout],
            "preheader": issue.preheader[layout],
            "intro": {lang: issue.preheader[lang] for lang in langs},
            "week_line": {lang: s[lang]["week"].format(year=year, number=int(number),
                                                      range=ranges[lang]) for lang in langs},
            "archive_url": issue.archive_url,
            "base_url": base_url,
            "unsubscribe_url": UNSUBSCRIBE_PLACEHOLDER,
            "preferences_url": PREFERENCES_PLACEHOLDER,
            "font_stack": FONT_STACK,
            "tier_colors": TIER_COLORS,
            "tier_label": _tier_label,
            "minutes": _minutes,
            "titles": _titles,
        }

    def _html(self, issue: Issue, layout: str, base_url: str, plan: _Plan) -> str:
        context = self._context(issue, layout, base_url)
        context.update(groups=_groups(_marked(plan.full)), brief=_marked(plan.brief),
                       folded=plan.folded)
        try:
            source = self.html_template.render(context)
        except jinja2.TemplateError as exc:
            raise RenderError(self.html_template.name or "email", str(exc)) from None
        try:
            return mjml2html(source, fonts={})
        except ValueError as exc:
            raise RenderError(self.html_template.name or "email",
                              f"MJML does not compile: {exc}") from None

    def _text(self, issue: Issue, layout: str, base_url: str) -> str:
        context = self._context(issue, layout, base_url)
        langs = context["langs"]
        context.update(
            groups=_groups(issue.items),
            brand_line=" · ".join(strings()[lang]["brand"] for lang in langs),
            view_online=" / ".join(strings()[lang]["view_online"] for lang in langs),
        )
        try:
            return self.text_template.render(context)
        except jinja2.TemplateError as exc:
            raise RenderError(self.text_template.name or "text", str(exc)) from None


def _weight(html: str) -> int:
    """The bytes a recipient's copy will weigh, placeholders counted at a real link's length."""
    placeholders = html.count(UNSUBSCRIBE_PLACEHOLDER) + html.count(PREFERENCES_PLACEHOLDER)
    return len(html.encode("utf-8")) + placeholders * LINK_RESERVE


def _smallest(lo: int, hi: int, fits: Callable[[int], bool]) -> tuple[int, int | None]:
    """The smallest k in [lo, hi] that fits (sizes shrink as k grows), or None."""
    if lo > hi or not fits(hi):
        return hi, None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, lo


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> tuple[int, int | None]:
    """The largest m in [lo, hi] that fits (sizes grow with m), or lo if none does."""
    if lo > hi or not fits(lo):
        return lo, None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo, lo


class _MarkedItem:
    """An item as templates see it: body HTML marked safe (it left the sanitizer)."""

    def __init__(self, item: Item) -> None:
        self._item = item
        self._texts = {lang: _marked_text(item.text(lang)) for lang in ("zh", "en")}

    def __getattr__(self, name: str):
        return getattr(self._item, name)

    def text(self, lang: str) -> Text | None:
        return self._texts[lang]


def _marked_text(text: Text | None) -> Text | None:
    if text is None:
        return None
    # Safe: body_html is the output of sanitize.clean_html, the only way into an Item.
    return Text(text.title, Markup(text.body_html), text.body_text, text.source)  # noqa: S704


def _marked(items: Sequence[Item]) -> list[_MarkedItem]:
    return [_MarkedItem(item) for item in items]


def _groups(items: Sequence) -> list[dict]:
    """Items grouped under their tier, tiers in rank order."""
    groups: list[dict] = []
    for tier in TIERS:
        members = [item for item in items if item.tier == tier.name]
        if members:
            groups.append({"tier": tier.name, "items": members})
    return groups


def _tier_label(tier: str, lang: str) -> str:
    return TIER_BY_NAME[tier].label.get(lang)


def _titles(item: Item, langs: Sequence[str]) -> list[tuple[str, str]]:
    """(language, headline) for a one-line entry: the layout's languages, or failing
    those, whichever language the item has, so no entry is ever blank."""
    found = [(lang, text.title) for lang in langs if (text := item.text(lang))]
    return found or [(lang, text.title) for lang in ("zh", "en") if (text := item.text(lang))]


def _minutes(item: Item, lang: str) -> str:
    return strings()[lang]["minutes"].format(n=item.reading_minutes.get(lang))
