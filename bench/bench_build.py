"""Benchmark of ``newsletter build`` minus its I/O: how the stages scale with the week's size.

What it measures, for synthetic weeks of 8, 20, 50 and 200 PRs (16 to 400 feed entries, both
languages per PR, made in memory from the eight review pairs of ``examples/sample-feed.atom``
with new PR numbers, new ids and dates spread over 2026-W48):

* ``collect``: ``parse_feed`` + ``merge`` + ``group_week``;
* ``rank``: ``rank`` on the grouped PRs;
* ``render``: ``Renderer.render`` for all four layouts, size-budget fitting included (one
  reused ``Renderer``, so template compilation is not counted);
* ``total``: ``parse_feed`` + ``assemble``, i.e. a build without fetching and writing.

Each figure is the median of several runs after one warm-up run. Absolute times depend on the
machine, so two baselines are measured in the same run: the Jinja2 render of
``email/issue.mjml.j2`` alone (layout ``zh-en``, every item in full, the context the renderer
builds) and ``mjml2html`` alone on that MJML. ``render/jinja`` says how many Jinja-only renders
a real render costs: four layouts, plus the extra attempts the size budget forces once the full
issue no longer fits. ``renderings`` counts the renderings ``render`` made for the four layouts
(each a Jinja render, an MJML compile and the text part), and ``vs j+m`` is ``render`` over the
issue's baseline, one Jinja plus one MJML render of it in full (the fitting is a plain
bisection over how many items show in full, each step a whole rendering). The second table
gives the HTML bytes per layout and how many items the budget shortened to a title
(``brief``) or left to the archive (``folded``).

The fourth table is the cost of interest variants: ``assemble`` (the build without I/O) of the
sample-sized issue for 1,000 subscribers whose (layout, areas) choices come to 0, 1 and 20
distinct variants, and for 10,000 sharing the same 20. Renderings follow the distinct choices,
never the subscribers: 20 choices cost the same for 1,000 readers as for 10,000.

The third table is the size budget as it is enforced: each layout's two parts *as sent*, that
is one recipient's message from ``Messages.build`` (real signed links), each part body after
the transfer encoding ``mime.choose_encoding`` picked for it (``qp`` or ``b64``), against
``[issue] size_budget_kb``. Its baseline is the same part in base64, what every part used to
be sent as (``vs b64`` = as sent / base64). ``µs/msg`` is the median time of one
``Messages.build``. Bytes do not vary between runs; the time is a median like the others.

Run: ``make bench`` or ``.venv/bin/python bench/bench_build.py [--runs N] [--sizes 8,50]``.
Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pendulum
from mjml import mjml2html

from pipeline.config import Settings, load
from pipeline.core.assemble import Choice, assemble, distinct_variants
from pipeline.core.email.message import Messages
from pipeline.core.email.mime import BASE64, encode_body
from pipeline.core.email.render import Budget, Footer, RenderedLayout, Renderer, _Plan
from pipeline.core.issue import issue_json
from pipeline.core.issue.bilingual import compose
from pipeline.core.issue.collect import (
    FeedResult,
    PullGroup,
    group_week,
    merge,
    parse_feed,
    skipped_in_week,
)
from pipeline.core.issue.interests import Variant, issue_areas
from pipeline.core.issue.rank import rank
from pipeline.model import LAYOUTS, Issue, Week
from pipeline.stages.build import rank_week, terms
from pipeline.stages.built import BuiltIssue
from pipeline.week import parse_week
from subscribers.tokens import Keys

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
CONFIG = ROOT / "newsletter.toml"
WEEK_ID = "2026-W48"
SIZES = (8, 20, 50, 200)
RUNS = 7
FIRST_PR = 60000
LOCATION = "bench:synthetic-feed"
BASELINE_LAYOUT = "zh-en"

_ENTRY = re.compile(r"<entry\b.*?</entry>", re.S)
_ENTRY_LANG = re.compile(r'<entry xml:lang="([a-z]{2})')
_PR_HREF = re.compile(r"(/pull/)(\d+)")
_ID = re.compile(r"<id>[^<]*</id>")
_DATES = re.compile(r"<(published|updated)>[^<]*</\1>")
_CONTENT_OPEN = '<content type="text">'
#: The sample's must-read openings, and what every 5th / 7th item says instead.
VERDICTS = {
    "zh": ("值得精读", "值得一读", "值得中等优先级精读"),
    "en": ("Must read,", "Skim,", "Worth a medium-priority read,"),
}


@dataclass(frozen=True)
class Sample:
    """The sample feed cut into its header and its review pairs (oldest PR first)."""

    head: str
    pairs: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class Timings:
    """Median milliseconds per stage for one size."""

    collect: float
    rank: float
    render: float
    total: float
    jinja: float
    mjml: float
    #: Renderings ``Renderer.render`` made for the four layouts (one call).
    renderings: int = 0


@dataclass(frozen=True)
class SentPart:
    """One part of one recipient's message, as on the wire."""

    encoding: str
    bytes: int
    #: The same part body in base64 (the baseline).
    base64_bytes: int


@dataclass(frozen=True)
class SentLayout:
    html: SentPart
    text: SentPart
    #: Median microseconds of one ``Messages.build``.
    build_us: float


@dataclass(frozen=True)
class SizeResult:
    size: int
    entries: int
    tiers: Counter[str]
    timings: Timings
    rendered: dict[str, RenderedLayout]
    sent: dict[str, SentLayout]


# -- synthetic feeds -------------------------------------------------------------------------


def read_sample(path: Path = SAMPLE_FEED) -> Sample:
    """Split the sample feed into its header and one ``{lang: entry}`` dict per PR."""
    text = path.read_text(encoding="utf-8")
    by_pr: dict[str, dict[str, str]] = {}
    for entry in _ENTRY.findall(text):
        pr = _PR_HREF.search(entry)
        lang = _ENTRY_LANG.match(entry)
        if not pr or not lang:
            raise SystemExit(f"{path}: an entry without a PR link or xml:lang")
        by_pr.setdefault(pr[2], {})[lang[1]] = entry
    pairs = tuple(reversed(by_pr.values()))  # the feed is newest first
    if not pairs or any(set(pair) != {"zh", "en"} for pair in pairs):
        raise SystemExit(f"{path}: expected one Chinese and one English review per PR")
    return Sample(text[: text.index("<entry")], pairs)


def verdict_variant(index: int) -> int:
    """Which opening item ``index`` gets: 0 must-read, 1 skim (every 5th), 2 medium (7th)."""
    if (index + 1) % 5 == 0:
        return 1
    if (index + 1) % 7 == 0:
        return 2
    return 0


def rewrite_entry(entry: str, lang: str, pr: int, when: datetime, variant: int) -> str:
    """One sample entry as PR ``pr``, dated ``when``, with the item's verdict."""
    stamp = when.isoformat(timespec="seconds")
    entry = _PR_HREF.sub(lambda m: f"{m[1]}{pr}", entry)
    entry = _ID.sub(f"<id>tag:vllm-pr-weekly.example,2026:bench/{pr}/{lang}</id>", entry, count=1)
    entry = _DATES.sub(lambda m: f"<{m[1]}>{stamp}</{m[1]}>", entry)
    must, *others = VERDICTS[lang]
    if variant:
        entry = entry.replace(_CONTENT_OPEN + must, _CONTENT_OPEN + others[variant - 1], 1)
    return entry


def synthetic_feed(sample: Sample, size: int, week: Week) -> bytes:
    """An Atom feed of ``size`` PRs, each reviewed in Chinese first, then in English.

    First reviews are spread evenly over the week in its timezone; each English review comes
    half a slot later, so both stay inside the week.
    """
    start = pendulum.instance(week.start).in_timezone(week.tz)
    slot = (week.end - week.start) / size
    entries = []
    for i in range(size):
        pair, pr, variant = sample.pairs[i % len(sample.pairs)], FIRST_PR + i, verdict_variant(i)
        first = start + slot * i + slot / 4
        entries.append(rewrite_entry(pair["zh"], "zh", pr, first, variant))
        entries.append(rewrite_entry(pair["en"], "en", pr, first + slot / 2, variant))
    body = "\n\n  ".join(reversed(entries))  # newest first, as feeds are
    return f"{sample.head}{body}\n</feed>\n".encode()


# -- the pipeline's stages, as the benchmark calls them ----------------------------------------


def collect(data: bytes, settings: Settings, week: Week) -> list[PullGroup]:
    reviews, _ = merge([parse_feed(data, LOCATION, settings.feed.repo)])
    return group_week(reviews, week, settings.feed.repo)


def compose_issue(data: bytes, settings: Settings, week: Week) -> Issue:
    """The issue ``assemble`` hands to the renderer, built the same way."""
    result = parse_feed(data, LOCATION, settings.feed.repo)
    reviews, rejected = merge([result])
    groups = group_week(reviews, week, settings.feed.repo)
    items, problems = rank(groups)
    return compose(items, week, settings.feed.repo, settings.site.base_url,
                   skipped_in_week(rejected, week), problems)


def total(data: bytes, settings: Settings, week: Week, renderer: Renderer) -> None:
    results: list[FeedResult] = [parse_feed(data, LOCATION, settings.feed.repo)]
    assemble(terms(settings), week, rank_week(settings, week, results), renderer)


class CountingRenderer(Renderer):
    """A renderer that counts its renderings (each is one Jinja render + one MJML compile
    + the text part, measured)."""

    renderings = 0

    def _draw(self, *args: Any, **kwargs: Any) -> Any:
        self.renderings += 1
        return super()._draw(*args, **kwargs)


def renderings(issue: Issue, base_url: str, budget: Budget, footer: Footer) -> int:
    """How many renderings fitting the four layouts of ``issue`` takes."""
    counting = CountingRenderer()
    counting.render(issue, base_url, budget, footer)
    return counting.renderings


def mjml_source(renderer: Renderer, issue: Issue, base_url: str,
                footer: Footer) -> Callable[[], str]:
    """Jinja alone: ``Renderer._parts`` up to, not including, ``mjml2html`` (items in full)."""
    context = renderer._context(issue, Variant(BASELINE_LAYOUT), base_url.rstrip("/"),
                                _Plan(issue.items, (), 0), footer)
    return lambda: renderer.html_template.render(context)


def sent_layouts(issue: Issue, rendered: dict[str, RenderedLayout], settings: Settings,
                 runs: int) -> dict[str, SentLayout]:
    """Each layout's parts as one recipient's message carries them, and its build time."""
    artifacts = {}
    for layout in LAYOUTS:
        artifacts[f"email-{layout}.html"] = rendered[layout].html
        artifacts[f"email-{layout}.txt"] = rendered[layout].text
    built = BuiltIssue(Path("."), issue, "bench", artifacts,
                       issue_json.dumps(issue_json.with_hash(issue, "bench")))
    keys = Keys.from_environ({"NEWSLETTER_SECRET": "bench-secret-" + "x" * 32})
    messages = Messages(built, settings.site, settings.delivery, keys)
    now = pendulum.datetime(2026, 11, 30, tz="UTC")
    sid = "0123456789abcdef01234567"
    found = {}
    for layout in LAYOUTS:
        raw = messages.build("reader@example.org", sid, layout, now).raw
        parts = {}
        for chunk in raw.split(b"--" + messages.boundary.encode())[1:-1]:
            head, body = chunk.lstrip(b"\r\n").split(b"\r\n\r\n", 1)
            kind = "html" if b"text/html" in head else "text"
            encoding = re.search(rb"Content-Transfer-Encoding: (\S+)", head)[1].decode()
            decoded = (rendered[layout].html if kind == "html" else rendered[layout].text)
            links = messages.links(sid)
            decoded = decoded.replace("%%unsubscribe_url%%", links.unsubscribe).replace(
                "%%preferences_url%%", links.preferences)
            parts[kind] = SentPart(encoding, len(body), len(encode_body(decoded, BASE64)))
        found[layout] = SentLayout(parts["html"], parts["text"], 1000 * median_ms(
            lambda layout=layout: messages.build("reader@example.org", sid, layout, now),
            runs))
    return found


# -- measuring -------------------------------------------------------------------------------


#: The variants table's rows: (subscribers, distinct choices among them).
VARIANT_CASES = ((1_000, 0), (1_000, 1), (1_000, 20), (10_000, 20))


def reader_choices(areas: Sequence[str], distinct: int, subscribers: int) -> list[Choice]:
    """``subscribers`` choices that come to ``distinct`` interest variants of an issue whose
    items carry ``areas`` (one or two areas each; 0: nobody follows an area)."""
    pool: list[Choice] = []
    pairs = [(a, b) for i, a in enumerate(areas) for b in areas[i + 1:]]
    for n in range(distinct):
        picked = (areas[n % len(areas)],) if n < len(areas) else pairs[n - len(areas)]
        pool.append((LAYOUTS[n % len(LAYOUTS)], picked))
    if not pool:
        pool = [(LAYOUTS[0], ())]
    return [pool[n % len(pool)] for n in range(subscribers)]


@dataclass(frozen=True)
class VariantCost:
    distinct: int
    subscribers: int
    rendered: int
    total_ms: float
    #: ``distinct_variants`` alone: the only part that walks every subscriber's choice.
    dedup_ms: float


def bench_variants(sample: Sample, size: int, settings: Settings, week: Week,
                   renderer: Renderer, runs: int) -> list[VariantCost]:
    data = synthetic_feed(sample, size, week)
    ranked = rank_week(settings, week, [parse_feed(data, LOCATION, settings.feed.repo)])
    areas = issue_areas(ranked.items)
    costs = []
    for subscribers, distinct in VARIANT_CASES:
        choices = reader_choices(areas, distinct, subscribers)
        rendered = len(distinct_variants(choices, ranked.items))
        took = median_ms(lambda choices=choices: assemble(terms(settings), week, ranked, renderer,
                                                           choices), runs)
        dedup = median_ms(lambda choices=choices: distinct_variants(choices, ranked.items),
                          runs)
        costs.append(VariantCost(distinct, len(choices), rendered, took, dedup))
    return costs


def variant_rows(costs: Sequence[VariantCost]) -> list[list[str]]:
    base = costs[0].total_ms if costs else 0.0
    return [[str(c.subscribers), str(c.distinct), str(c.rendered), f"{c.total_ms:.1f}",
             f"{c.dedup_ms:.1f}",
             f"{(c.total_ms - c.dedup_ms - base) / c.rendered:.2f}" if c.rendered else "-"]
            for c in costs]


def median_ms(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls, in milliseconds, after one warm-up call."""
    fn()
    samples = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def bench_size(sample: Sample, size: int, settings: Settings, week: Week, renderer: Renderer,
               runs: int) -> SizeResult:
    data = synthetic_feed(sample, size, week)
    groups = collect(data, settings, week)
    if len(groups) != size:
        raise SystemExit(f"size {size}: the synthetic feed gave {len(groups)} PRs")
    base_url, budget = settings.site.base_url, Budget(settings.issue.size_budget_kb)
    items, _ = rank(groups)
    issue = compose_issue(data, settings, week)
    footer = Footer.configured(settings.delivery, settings.site)
    jinja = mjml_source(renderer, issue, base_url, footer)
    source = jinja()
    timings = Timings(
        collect=median_ms(lambda: collect(data, settings, week), runs),
        rank=median_ms(lambda: rank(groups), runs),
        render=median_ms(lambda: renderer.render(issue, base_url, budget, footer), runs),
        total=median_ms(lambda: total(data, settings, week, renderer), runs),
        jinja=median_ms(jinja, runs),
        mjml=median_ms(lambda: mjml2html(source, fonts={}), runs),
        renderings=renderings(issue, base_url, budget, footer),
    )
    rendered, _ = renderer.render(issue, base_url, budget, footer)
    return SizeResult(size, len(parse_feed(data, LOCATION, settings.feed.repo).reviews),
                      Counter(item.tier for item in items), timings, rendered,
                      sent_layouts(issue, rendered, settings, runs))


# -- reporting -------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned plain-text columns: numbers to the right, words to the left."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return " | ".join(c.rjust(w) if num else c.ljust(w)
                          for c, w, num in zip(cells, widths, numeric, strict=True)).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _is_number(cell: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d.,]+x?", cell))


def tier_mix(tiers: Counter[str]) -> str:
    return "/".join(str(tiers[name]) for name in ("must-read", "medium", "skim", "unrated"))


def timing_rows(results: Sequence[SizeResult]) -> list[list[str]]:
    rows = []
    for r in results:
        t = r.timings
        rows.append([str(r.size), str(r.entries), tier_mix(r.tiers),
                     *(f"{v:.1f}" for v in (t.collect, t.rank, t.render, t.total, t.jinja,
                                            t.mjml)),
                     f"{t.render / t.jinja:.1f}x", str(t.renderings),
                     f"{t.render / (t.jinja + t.mjml):.1f}x"])
    return rows


def byte_rows(results: Sequence[SizeResult]) -> list[list[str]]:
    rows = []
    for r in results:
        for layout in LAYOUTS:
            out = r.rendered[layout]
            rows.append([str(r.size), layout, f"{out.html_bytes / 1000:.1f}",
                         f"{out.html_bytes / r.size:,.0f}", str(len(out.brief)),
                         str(out.folded)])
    return rows


_SHORT = {"quoted-printable": "qp", "base64": "b64"}


def sent_rows(results: Sequence[SizeResult], budget: int) -> list[list[str]]:
    rows = []
    for r in results:
        for layout in LAYOUTS:
            sent = r.sent[layout]
            html, text = sent.html, sent.text
            rows.append([str(r.size), layout, f"{r.rendered[layout].html_bytes / 1000:.1f}",
                         _SHORT.get(html.encoding, html.encoding),
                         f"{html.bytes / 1000:.1f}", f"{html.bytes / html.base64_bytes:.2f}x",
                         _SHORT.get(text.encoding, text.encoding),
                         f"{text.bytes / 1000:.1f}", f"{text.bytes / text.base64_bytes:.2f}x",
                         f"{100 * max(html.bytes, text.bytes) / budget:.0f}",
                         f"{sent.build_us:.0f}"])
    return rows


def header(settings: Settings, runs: int) -> str:
    versions = ", ".join(f"{name} {metadata.version(name)}"
                         for name in ("jinja2", "mjml-python", "feedparser"))
    return "\n".join([
        "vLLM PR Weekly: build benchmark",
        f"machine: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; {versions}",
        f"runs: median of {runs} per figure, after 1 warm-up run; week {WEEK_ID} "
        f"({settings.issue.timezone}), size budget {settings.issue.size_budget_kb} KB",
        "collect = parse_feed+merge+group_week; render = 4 layouts with budget fitting; "
        "total = parse_feed+assemble",
        f"baselines: jinja-only / mjml-only = one {BASELINE_LAYOUT} render, every item in full; "
        "vs j+m = render / (jinja-only + mjml-only); renderings = for the four layouts",
    ])


def report(settings: Settings, runs: int, results: Sequence[SizeResult],
           variants: Sequence[VariantCost] = ()) -> str:
    timing_headers = ["size", "entries", "must/med/skim/unrated", "collect ms", "rank ms",
                      "render ms", "total ms", "jinja-only ms", "mjml-only ms", "render/jinja",
                      "renderings", "vs j+m"]
    byte_headers = ["size", "layout", "html KB", "bytes/item", "shortened", "folded"]
    budget = min(settings.issue.size_budget_kb, 100) * 1000
    sent_headers = ["size", "layout", "html KB", "html cte", "html sent KB", "vs b64",
                    "text cte", "text sent KB", "vs b64", "% of budget", "µs/msg"]
    return "\n\n".join([
        header(settings, runs),
        table(timing_headers, timing_rows(results)),
        table(byte_headers, byte_rows(results)),
        "KB = 1,000 bytes; shortened = items cut to a title and a link (RenderedLayout.brief); "
        "folded = items left to the archive's \"N more\" link.",
        f"Bytes as sent (one recipient's message, real links) against the "
        f"{budget / 1000:.0f} KB budget",
        table(sent_headers, sent_rows(results, budget)),
        "html KB = the built file; sent KB = the part body on the wire after its transfer "
        "encoding (qp = quoted-printable, b64 = base64); vs b64 = as sent / the same part in "
        "base64 (the baseline); % of budget = the heavier part; µs/msg = median "
        "Messages.build.",
        f"Interest variants: assemble of the {SIZES[0]}-PR issue for subscribers sharing "
        "their choices",
        table(["subscribers", "distinct choices", "variants rendered", "assemble ms",
               "of which dedup ms", "ms per variant"], variant_rows(variants)),
        "dedup = reducing every subscriber's choice to its variant (the store hands build "
        "distinct choices already); ms per variant = (assemble - dedup - the row without "
        "variants) / variants rendered: rendering follows the distinct choices only.",
    ])


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per figure ({RUNS})")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated numbers of PRs (8,50,200)")
    ns = parser.parse_args(argv)
    ns.sizes = tuple(int(s) for s in ns.sizes.split(",") if s.strip())
    if ns.runs < 1 or not ns.sizes or min(ns.sizes) < 1:
        parser.error("--runs and every size must be at least 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    settings = load(CONFIG, os.environ)
    week = parse_week(WEEK_ID, settings.issue.timezone)
    sample, renderer = read_sample(), Renderer()
    results = [bench_size(sample, size, settings, week, renderer, ns.runs)
               for size in ns.sizes]
    variants = bench_variants(sample, ns.sizes[0], settings, week, renderer, ns.runs)
    print(report(settings, ns.runs, results, variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
