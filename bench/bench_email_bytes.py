"""Benchmark of the HTML email's weight: bytes per full bilingual item, and how many items of a
50-review week stay in full within the size budget.

Both templates are rendered in the same run: the current ``email/issue.mjml.j2`` and, as the
baseline, the template as it was before its markup was cut (commit 25a9b3e, kept as
``bench/fixtures/issue-25a9b3e.mjml.j2`` so the bench needs no git history). The week is the
synthetic one of ``bench_build.py`` (the eight sample review pairs, renumbered, 50 PRs).

First table, layout ``zh-en``: what one item in full adds to each part, that is (the part with
all 50 items in full − the part with no item at all) / 50. An item's share therefore holds its
card and its contents entry. ``raw`` is UTF-8 bytes; ``sent`` is the part as sent (its transfer
encoding, as ``render.Budget.weigh`` counts it for the budget). ``markup/text`` is (HTML − text) /
text per item: how much markup the HTML wraps around the words the text part carries.

Second table, every layout: items kept in full once the renderer fits the 50-item week into
``[issue] size_budget_kb``, and both parts' weight as sent at that point (the heavier one is
what stops the next item). Third: the median time of one ``Renderer.render`` (four layouts,
fitting included) with each template, after one warm-up run.

Bytes do not vary between runs. Run: ``make bench`` or
``.venv/bin/python bench/bench_email_bytes.py [--runs N] [--size 50]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_build import (
    CONFIG,
    WEEK_ID,
    compose_issue,
    median_ms,
    read_sample,
    synthetic_feed,
    table,
)

from pipeline.config import Settings, load
from pipeline.core.email.render import Budget, Footer, Renderer, _Plan, environment
from pipeline.core.issue.interests import Variant
from pipeline.model import LAYOUTS, Issue
from pipeline.week import parse_week

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "issue-25a9b3e.mjml.j2"
SIZE = 50
RUNS = 5
BILINGUAL = "zh-en"


@dataclass(frozen=True)
class PerItem:
    """What one item in full adds to each part of the ``zh-en`` email, in bytes."""

    html_raw: float
    html_sent: float
    text_raw: float
    text_sent: float


@dataclass(frozen=True)
class Fitted:
    """One layout of the week, fitted to the budget."""

    full: int
    html_sent: int
    text_sent: int


@dataclass(frozen=True)
class Measured:
    name: str
    per_item: PerItem
    fitted: dict[str, Fitted]
    render_ms: float


def baseline_renderer(folder: Path) -> Renderer:
    """A renderer whose ``email/issue.mjml.j2`` is the baseline fixture (the rest built in)."""
    (folder / "email").mkdir()
    (folder / "email" / "issue.mjml.j2").write_text(FIXTURE.read_text(encoding="utf-8"),
                                                     encoding="utf-8")
    return Renderer(environment([folder]))


def per_item(renderer: Renderer, issue: Issue, base_url: str, footer: Footer,
             eight_bit: bool = False) -> PerItem:
    variant, n = Variant(BILINGUAL), len(issue.items)

    def parts(plan: _Plan) -> tuple[str, str]:
        return renderer._parts(issue, variant, base_url, plan, footer)

    (html, text), (html0, text0) = parts(_Plan(issue.items, (), 0)), parts(_Plan((), (), 0))

    def raw(body: str) -> int:
        return len(body.encode("utf-8"))

    def sent(body: str, html: bool) -> int:
        return Budget(90, eight_bit).weigh(body, html=html)

    return PerItem((raw(html) - raw(html0)) / n, (sent(html, True) - sent(html0, True)) / n,
                   (raw(text) - raw(text0)) / n, (sent(text, False) - sent(text0, False)) / n)


def measure(name: str, renderer: Renderer, issue: Issue, settings: Settings,
            runs: int, eight_bit: bool = False) -> Measured:
    base_url = settings.site.base_url.rstrip("/")
    budget = Budget(settings.issue.size_budget_kb, eight_bit)
    footer = Footer.configured(settings.delivery, settings.site)
    rendered, _ = renderer.render(issue, base_url, budget, footer)
    fitted = {layout: Fitted(len(issue.items) - len(r.brief) - r.folded,
                             budget.weigh(r.html, html=True), budget.weigh(r.text))
              for layout, r in rendered.items()}
    return Measured(name, per_item(renderer, issue, base_url, footer, eight_bit), fitted,
                    median_ms(lambda: renderer.render(issue, base_url, budget, footer), runs))


def per_item_rows(baseline: Measured, current: Measured, eight: Measured) -> list[list[str]]:
    rows = []
    for m in (baseline, current, eight):
        p = m.per_item
        rows.append([m.name, f"{p.html_raw:,.0f}", f"{p.text_raw:,.0f}",
                     f"{(p.html_raw - p.text_raw) / p.text_raw:.2f}x", f"{p.html_sent:,.0f}",
                     f"{p.text_sent:,.0f}", f"{(p.html_sent - p.text_sent) / p.text_sent:.2f}x",
                     f"{p.html_raw / baseline.per_item.html_raw:.2f}x"])
    return rows


def fitted_rows(baseline: Measured, current: Measured, eight: Measured, size: int
                ) -> list[list[str]]:
    rows = []
    for layout in LAYOUTS:
        b, c, e = baseline.fitted[layout], current.fitted[layout], eight.fitted[layout]
        rows.append([layout, f"{b.full}/{size}", f"{c.full}/{size}", f"{e.full}/{size}",
                     f"{b.html_sent / 1000:.1f}", f"{c.html_sent / 1000:.1f}",
                     f"{e.html_sent / 1000:.1f}", f"{e.text_sent / 1000:.1f}",
                     "html" if e.html_sent >= e.text_sent else "text"])
    return rows


def report(baseline: Measured, current: Measured, eight: Measured, settings: Settings,
           size: int, runs: int) -> str:
    budget = settings.issue.size_budget_kb
    return "\n\n".join([
        f"email bytes: {size}-PR synthetic week, budget {budget} KB as sent, "
        f"baseline = template at 25a9b3e (same run), median of {runs} runs",
        f"bytes per full bilingual item ({BILINGUAL}: its card + its contents entry)\n"
        + table(["template", "html raw", "text raw", "markup/text", "html sent", "text sent",
                 "markup/text sent", "vs base"], per_item_rows(baseline, current, eight)),
        f"items in full within {budget} KB as sent (KB; now = quoted-printable or base64, "
        "8bit = [delivery] eight_bit)\n"
        + table(["layout", "base full", "now full", "8bit full", "base html", "now html",
                 "8bit html", "8bit text", "heavier"],
                fitted_rows(baseline, current, eight, size)),
        "Renderer.render, four layouts with fitting (ms)\n"
        + table(["template", "ms", "vs base"],
                [[m.name, f"{m.render_ms:.1f}", f"{m.render_ms / baseline.render_ms:.2f}x"]
                 for m in (baseline, current, eight)]),
    ])


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="timed runs per figure (5)")
    parser.add_argument("--size", type=int, default=SIZE, help="PRs in the week (50)")
    ns = parser.parse_args(argv)
    if ns.runs < 1 or ns.size < 1:
        parser.error("--runs and --size must be at least 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    settings = load(CONFIG, os.environ)
    week = parse_week(WEEK_ID, settings.issue.timezone)
    issue = compose_issue(synthetic_feed(read_sample(), ns.size, week), settings, week)
    with tempfile.TemporaryDirectory() as folder:
        baseline = measure("25a9b3e", baseline_renderer(Path(folder)), issue, settings,
                           ns.runs)
    current = measure("current", Renderer(), issue, settings, ns.runs)
    eight = measure("current, 8bit", Renderer(), issue, settings, ns.runs, eight_bit=True)
    print(report(baseline, current, eight, settings, ns.size, ns.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
