"""Render: an :class:`Issue` → one HTML email (MJML) and one plain-text part per layout.

Pure. One Jinja environment, autoescape on (mjml-python chokes on a raw ``<`` or ``&``),
StrictUndefined so a template mistake fails the build. Personal links are placeholders filled
at send time, and only a template :class:`Slot` may print one: every other value passes
:func:`neutralise`, so no feed text can carry a placeholder into a link of its own.

The size budget: Gmail clips a message near 102 KB. Each part is weighed as sent, with real
link lengths; over ``[issue] size_budget_kb`` the lowest-priority items shrink to a title,
from the bottom, then the tail folds into one "N more in the archive" link.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup, escape
from mjml import mjml2html

from pipeline.core.email.mime import sent_size
from pipeline.core.email.wrap import wrap_text
from pipeline.core.issue.interests import Variant, for_you, interests_first
from pipeline.core.issue.rank import TIER_BY_NAME, TIERS
from pipeline.core.issue.sanitize import one_line, title_html
from pipeline.core.shipped import strings as strings  # re-exported: preview reads it here
from pipeline.core.shipped import templates_dir
from pipeline.errors import RenderError
from pipeline.model import LANG_TAGS, LAYOUTS, Issue, Item, Problem, PullFacts, Text, layout_langs
from pipeline.week import week_ranges

if TYPE_CHECKING:
    from pipeline.config import DeliverySettings, IssueSettings, SiteSettings

#: Filled per recipient at send time; never left in a sent message or the public archive.
UNSUBSCRIBE_PLACEHOLDER = "%%unsubscribe_url%%"
PREFERENCES_PLACEHOLDER = "%%preferences_url%%"
PLACEHOLDERS = (UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER)
#: Bytes reserved per placeholder for the real, signed link that replaces it.
LINK_RESERVE = 256
#: What weighs like a signed link when a part is measured: ASCII, with a query like one.
RESERVED_LINK = ("https://app.invalid/unsubscribe?token=" + "x" * LINK_RESERVE)[:LINK_RESERVE]
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


class Slot(str):
    """A template's own personal-link slot: the only value printed with its ``%%`` intact."""


#: What ``%%`` becomes in printed text: the same to a reader, never a placeholder.
_NEUTRAL_HTML = "%&#37;"
_NEUTRAL_TEXT = "%\u2060%"  # WORD JOINER: invisible, and no longer two percent signs


@jinja2.pass_eval_context
def neutralise(eval_ctx: jinja2.nodes.EvalContext, value: object) -> object:
    """The environment's ``finalize``: every printed value but a :class:`Slot` loses its
    ``%%``, so feed text can never reproduce a personal-link placeholder."""
    if isinstance(value, Slot) or not isinstance(value, str) or "%%" not in value:
        return value
    if eval_ctx.autoescape:  # escape() leaves Markup (sanitized HTML) as it is
        # One pass: the entity ends in ";", so no "%%" can form again.
        return Markup(str(escape(value)).replace("%%", _NEUTRAL_HTML))  # noqa: S704
    while "%%" in value:  # "%%%" would leave a new "%%" after one pass
        value = value.replace("%%", _NEUTRAL_TEXT)
    return value


def stray_placeholders(body: str, kind: str) -> int:
    """How many personal-link placeholders in ``body`` sit outside a template slot.

    A slot is a whole ``href`` value in HTML, a whole word in the text part; a placeholder
    anywhere else would hand a recipient's signed link to whoever wrote it there."""
    slots = (_HTML_SLOT if kind == "html" else _TEXT_SLOT).findall(body)
    return sum(body.count(p) for p in PLACEHOLDERS) - len(slots)


_ALTERNATIVES = "|".join(re.escape(p) for p in PLACEHOLDERS)
_HTML_SLOT = re.compile(rf"""\bhref\s*=\s*(?:"(?:{_ALTERNATIVES})"|'(?:{_ALTERNATIVES})')""")
_TEXT_SLOT = re.compile(rf"(?<!\S)(?:{_ALTERNATIVES})(?!\S)")


def with_reserved_links(body: str) -> str:
    """``body`` with each placeholder replaced by a link as long as a real one may be."""
    for placeholder in PLACEHOLDERS:
        body = body.replace(placeholder, RESERVED_LINK)
    return body


@dataclass(frozen=True)
class Budget:
    """What one part of a message may weigh as sent, in the transfer encoding the transport
    will choose."""

    #: ``[issue] size_budget_kb`` (KB = 1,000 bytes).
    kb: int
    eight_bit: bool = False

    @classmethod
    def configured(cls, issue: IssueSettings, delivery: DeliverySettings) -> Budget:
        return cls(issue.size_budget_kb, delivery.eight_bit)

    @property
    def bytes(self) -> int:
        """The budget in bytes, never above :data:`HARD_LIMIT_BYTES`."""
        return min(self.kb * 1000, HARD_LIMIT_BYTES)

    def weigh(self, body: str, *, html: bool = False) -> int:
        """The bytes one recipient's part weighs as sent: encoded (``html``: the part is
        HTML, folded as sent), with links as long as real ones filled in."""
        return sent_size(with_reserved_links(body), eight_bit=self.eight_bit, html=html)


@dataclass(frozen=True)
class Footer:
    """Who sends the issue and why, at the foot of every copy (CAN-SPAM, RFC 2369's spirit)."""

    #: ``[delivery] publisher``, else the sender's name and address.
    publisher: str = ""
    #: ``[delivery] postal_address``; shown only when set.
    postal_address: str = ""
    #: The subscribe page (``[site] app_url``/subscribe), for a reader of a forwarded copy.
    subscribe_url: str = ""

    @classmethod
    def configured(cls, delivery: DeliverySettings, site: SiteSettings) -> Footer:
        app_url = site.app_url.rstrip("/")
        return cls(
            publisher=one_line(delivery.publisher) or one_line(delivery.from_),
            postal_address=one_line(delivery.postal_address),
            subscribe_url=f"{app_url}/subscribe" if app_url else "",
        )


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates shared by every environment of this process, in memory only.

    An edited template fails the checksum and is compiled afresh. Never on disk: loading
    compiled code runs it, and a swapped file would run as us."""

    def __init__(self) -> None:
        #: Jinja's key → (the source's checksum, the code compiled from it).
        self._code: dict[str, tuple[str, types.CodeType]] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        kept = self._code.get(bucket.key)
        if kept is not None and kept[0] == bucket.checksum:  # else edited: compiled again
            bucket.code = kept[1]

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.code is not None:
            self._code[bucket.key] = (bucket.checksum, bucket.code)


_COMPILED = _CompiledTemplates()


def environment(override_dirs: Sequence[Path] = ()) -> jinja2.Environment:
    """The one template environment: an operator's folders first, then the built-in ones."""
    loaders = [jinja2.FileSystemLoader(str(d)) for d in (*override_dirs, templates_dir())]
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        bytecode_cache=_COMPILED,
        # Markup templates escape everything; the plain-text part must not.
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True,
                                            disabled_extensions=("txt.j2",)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=neutralise,
    )
    env.globals.update(facts_line=facts_line, counted=counted, body=body, minutes=minutes)
    env.filters["compact_css"] = compact_css
    # A headline's backticked code as code (a Markup: escaped first, then tagged).
    env.filters["title_html"] = lambda title: Markup(title_html(str(title)))  # noqa: S704
    return env


_CSS_SPACE = re.compile(r"\s*([{};:,>])\s*|\s+")


def compact_css(css: str) -> str:
    """The email's style block without its white space: a quarter fewer bytes. Only for our
    templates' CSS, where no string holds ``{};:,>`` or a space that matters."""
    # "} }" rather than "}}": a rendered part holds no "}}" a template left behind.
    lines = (_CSS_SPACE.sub(lambda m: m[1] or " ", line).strip().replace(";}", "}")
             .replace("}}", "} }") for line in css.split("\n"))
    return "\n".join(line for line in lines if line)


def facts_line(facts: PullFacts | None) -> str:
    """The PR's facts in one line: author, merged date (or state), +/− lines, tags."""
    if not facts:
        return ""
    parts = (f"@{facts.author}" if facts.author else "",
             f"merged {facts.merged_at:%Y-%m-%d}" if facts.merged_at else str(facts.state),
             f"+{facts.additions}/\u2212{facts.deletions}",
             " ".join(f"[{tag}]" for tag in facts.tags))
    return " · ".join(part for part in parts if part)


def counted(words: Mapping[str, str], key: str, n: int) -> str:
    """``words[key]`` with its count ``n``; ``<key>_one`` for 1 where the language has it."""
    form = words.get(f"{key}_one") if n == 1 else None
    return (form or words[key]).format(n=n)


@dataclass(frozen=True)
class RenderedLayout:
    layout: str
    html: str
    text: str
    #: PRs shown as a title and a link only, to fit the budget.
    brief: tuple[int, ...] = ()
    #: How many PRs are left to the archive's "N more" link.
    folded: int = 0
    #: The areas this rendering puts first (an interest variant); () for the plain layout.
    areas: tuple[str, ...] = ()

    @property
    def variant(self) -> Variant:
        return Variant(self.layout, self.areas)

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
        except jinja2.TemplateNotFound as exc:
            raise RenderError(name, _not_found(self.env, exc)) from None
        except jinja2.TemplateSyntaxError as exc:
            raise RenderError(name, f"line {exc.lineno}: {exc.message}") from None

    def render(self, issue: Issue, base_url: str, budget: Budget, footer: Footer | None = None,
               variants: Iterable[Variant] = ()) -> tuple[dict[str, RenderedLayout],
                                                          list[Problem]]:
        """Every layout of ``issue``, then each of ``variants``, within the budget (by key),
        and what fitting them cost."""
        fitted = {variant.key: self.render_variant(issue, variant, base_url, budget, footer)
                  for variant in (*map(Variant, LAYOUTS), *variants)}
        return ({key: result for key, (result, _) in fitted.items()},
                [problem for _, problem in fitted.values() if problem])

    def render_variant(self, issue: Issue, variant: Variant, base_url: str, budget: Budget,
                       footer: Footer | None = None) -> tuple[RenderedLayout, Problem | None]:
        """One variant of ``issue`` (a layout and the areas it puts first) within the
        budget; a problem names it by its key.

        Every item in full if that fits; else the fewest items shortened from the bottom;
        else the most titles kept and the rest folded (none: over the budget, a blocking
        problem). Found by bisection: parts only grow with what they show."""
        base_url = base_url.rstrip("/")
        items = interests_first(issue.items, variant.areas)
        n, limit = len(items), budget.bytes
        common = self._common_context(issue, variant, base_url, footer or Footer())
        draw = functools.cache(lambda plan: self._draw(common, plan, base_url, budget))

        def shortened(k: int) -> _Drawn:  # the last k items as titles
            return draw(_Plan(items[:n - k], items[n - k:], 0))

        def kept(m: int) -> _Drawn:  # m titles, the rest folded
            return draw(_Plan((), items[:m], n - m))

        full = shortened(0)
        if full.weight <= limit:
            return full.result(variant), None
        # bisect finds the first count whose key is true: the fewest titles that fit...
        k = bisect.bisect_left(range(n + 1), True, 1, key=lambda k: shortened(k).weight <= limit)
        if k <= n:
            chosen = shortened(k)
        else:  # ...else the first count of titles too many, less one (none fits: over)
            m = bisect.bisect_left(range(n), True, key=lambda m: kept(m).weight > limit)
            chosen = kept(max(m - 1, 0))
        return chosen.result(variant), _fit_problem(variant.key, chosen, limit, full.weight)

    def _draw(self, common: dict[str, Any], plan: _Plan, base_url: str, budget: Budget
              ) -> _Drawn:
        """``plan`` rendered, both parts, and weighed as sent."""
        html, text = self._parts_of({**common, **_plan_context(plan, base_url)})
        return _Drawn(plan, html, text, max(budget.weigh(html, html=True), budget.weigh(text)))

    def _common_context(self, issue: Issue, variant: Variant, base_url: str,
                        footer: Footer) -> dict[str, Any]:
        """What the templates print whichever items are shortened."""
        layout, interests = variant.layout, frozenset(variant.areas)
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
            "week_line": {lang: _week_line(s[lang], issue.number, year, int(number),
                                           ranges[lang]) for lang in langs},
            "archive_url": issue.archive_url,
            "base_url": base_url,
            "unsubscribe_url": Slot(UNSUBSCRIBE_PLACEHOLDER),
            "preferences_url": Slot(PREFERENCES_PLACEHOLDER),
            "footer": footer,
            "font_stack": FONT_STACK,
            "tier_colors": TIER_COLORS,
            "tier_label": tier_label,
            "titles": _titles,
            "interests": variant.areas,
            "for_you": lambda item: for_you(item, interests),
            "areas_first": {lang: s[lang]["areas_first"].format(
                areas=_AREA_SEPARATOR[lang].join(variant.areas)) for lang in langs},
            # The text part's one-line forms of the words.
            "brand_line": " · ".join(s[lang]["brand"] for lang in langs),
            "view_online": " / ".join(s[lang]["view_online"] for lang in langs),
            "for_you_line": " / ".join(s[lang]["for_you"] for lang in langs),
        }

    def _parts(self, issue: Issue, variant: Variant, base_url: str, plan: _Plan,
               footer: Footer) -> tuple[str, str]:
        """Both parts of ``plan``, as :meth:`render_variant` draws them."""
        return self._parts_of({**self._common_context(issue, variant, base_url, footer),
                               **_plan_context(plan, base_url)})

    def _parts_of(self, context: dict[str, Any]) -> tuple[str, str]:
        """The HTML part (MJML compiled) and the text part (wrapped) of one context."""
        try:
            html = mjml2html(_filled_in(self.html_template, context), fonts={})
        except ValueError as exc:
            raise RenderError(self.html_template.name or "email",
                              f"MJML does not compile: {exc}") from None
        return html, wrap_text(_filled_in(self.text_template, context))


def _filled_in(template: jinja2.Template, context: dict[str, Any]) -> str:
    try:
        return template.render(context)
    except jinja2.TemplateNotFound as exc:  # an operator's template includes a missing one
        raise RenderError(template.name or "email", _not_found(template.environment, exc)) from None
    except jinja2.TemplateError as exc:
        raise RenderError(template.name or "email", str(exc)) from None


def _not_found(env: jinja2.Environment, exc: jinja2.TemplateNotFound) -> str:
    """Where a missing template was looked for: the operator's folders, then the built-in."""
    loaders = getattr(env.loader, "loaders", [env.loader])
    folders = [folder for loader in loaders for folder in getattr(loader, "searchpath", [])]
    return f"template {exc.name} not found in {', '.join(folders)}"


def _plan_context(plan: _Plan, base_url: str) -> dict[str, Any]:
    """What the templates print that depends on which items are shortened or folded."""
    return {
        "groups": _groups(plan.full),
        "contents": _contents(plan, base_url),
        "brief": plan.brief,
        "folded": plan.folded,
        # A long week's contents is one line per tier, and the titles shortened to fit are
        # listed after the cards: the first card then opens the first screen, not the
        # third. Counted on every item the issue has, so it holds through the whole search.
        "compact": len(plan.full) + len(plan.brief) + plan.folded > CONTENTS_IN_FULL,
    }


@dataclass(frozen=True)
class _Drawn:
    """One plan rendered: both parts, and the heavier one's weight as sent."""

    plan: _Plan
    html: str
    text: str
    weight: int

    def result(self, variant: Variant) -> RenderedLayout:
        return RenderedLayout(variant.layout, self.html, self.text,
                              tuple(i.pr for i in self.plan.brief), self.plan.folded,
                              variant.areas)


def _fit_problem(name: str, chosen: _Drawn, budget: int, full_weight: int) -> Problem:
    """What fitting cost: items shortened (a warning), or over budget even folded."""
    plan, size = chosen.plan, chosen.weight
    if size > budget:
        return Problem(
            "over-size-limit", "blocking", layout=name,
            message=(f"{name}: {size / 1000:.1f} KB as sent even with every item "
                     f"folded; the budget is {budget / 1000:.0f} KB"),
        )
    return Problem(
        "items-shrunk", "warning", layout=name,
        message=(f"{name}: {len(plan.brief) + plan.folded} lowest-priority item(s) shortened "
                 f"to a title and a link to fit {budget / 1000:.0f} KB as sent "
                 f"(full: {full_weight / 1000:.1f} KB)"
                 + (f"; {plan.folded} left to the archive" if plan.folded else "")),
    )


def body(text: Text | None) -> Markup | None:
    """A text's body HTML as markup: it left ``sanitize.clean_html``, the only way into an Item."""
    return Markup(text.body_html) if text else None  # noqa: S704


def _groups(items: Sequence[Item]) -> list[dict[str, Any]]:
    """Items grouped under their tier, tiers in rank order."""
    return [{"tier": tier.name, "items": members} for tier in TIERS
            if (members := [item for item in items if item.tier == tier.name])]


def pr_page(base_url: str, pr: int) -> str:
    """The archive's page of one PR review (the site writes ``pr/<number>/index.html``)."""
    return f"{base_url}/pr/{pr}/index.html"


@dataclass(frozen=True)
class _Entry:
    """One line of the contents: its number, the item, and where its links go."""

    n: int
    item: Item
    #: The item's PR page in the archive: the text part's link, which has no anchors.
    page: str
    #: Whether the item is shown in full, as a card with the id ``pr-<n>``.
    carded: bool

    @property
    def href(self) -> str:
        """The HTML contents' link: the item's card, else (a brief item) its PR page."""
        return f"#pr-{self.item.pr}" if self.carded else self.page


#: The most items whose contents lists every title at the top of the email; a longer week
#: lists its tiers there, so the first card still opens on the first screen.
CONTENTS_IN_FULL = 12


def _contents(plan: _Plan, base_url: str) -> list[dict[str, Any]]:
    """Every item the email shows, numbered, per tier in rank order."""
    full = {item.pr for item in plan.full}
    numbers = itertools.count(1)
    groups: list[dict[str, Any]] = []
    for group in _groups((*plan.full, *plan.brief)):
        entries = [_Entry(next(numbers), item, pr_page(base_url, item.pr), item.pr in full)
                   for item in group["items"]]
        groups.append({"tier": group["tier"], "entries": entries,
                       "carded": any(entry.carded for entry in entries)})
    return groups


#: How a list of area names is joined in each language's sentence.
_AREA_SEPARATOR = {"zh": "、", "en": ", "}


def _week_line(words: dict[str, str], issue_number: int, year: str, week: int,
               ranges: str) -> str:
    """The masthead's week line, led by the issue number when the issue has one (0: none)."""
    line = words["week"].format(year=year, number=week, range=ranges)
    if issue_number > 0:
        return f"{words['issue_number'].format(n=issue_number)} · {line}"
    return line


def tier_label(tier: str, lang: str) -> str:
    """A tier's name in ``lang`` (必读 / Must read): email, site and preview say it alike."""
    return TIER_BY_NAME[tier].label.get(lang)


def _titles(item: Item, langs: Sequence[str]) -> list[tuple[str, str]]:
    """(language, headline) for a one-line entry: the layout's languages, or failing
    those, whichever language the item has, so no entry is ever blank."""
    found = [(lang, text.title) for lang in langs if (text := item.text(lang))]
    return found or [(lang, text.title) for lang in ("zh", "en") if (text := item.text(lang))]


def minutes(item: Item, lang: str) -> str:
    """An item's reading time, said in ``lang``, as every email and page says it; an item
    without ``lang``'s text is timed in the language it is shown in, never "0 min"."""
    n = item.reading_minutes.get(lang) or max(item.reading_minutes.zh, item.reading_minutes.en)
    return strings()[lang]["minutes"].format(n=n)
