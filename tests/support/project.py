"""The sample project the tests stand on: the repository, the bundled sample feed and its
week, and the real review text kept with the tests (so the suite runs from any clone)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.core.assemble import Assembled
    from pipeline.core.email.render import Renderer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
#: A real sample of the review text the pipeline consumes (verdicts, backticked names, both
#: languages), kept with the tests so the suite runs from any clone.
SEED = ROOT / "tests" / "data" / "reviews-sample.zh.txt"
DATA = ROOT / "tests" / "data"
SAMPLE_WEEK = "2026-W48"
#: The PRs of the seed reviews, in the seed's order.
SEED_PRS = (53721, 55309, 55823, 54934, 51794, 56671, 56366, 56317)


def seed_reviews() -> list[tuple[str, str]]:
    """(headline, body) of each seed review: the first line names the repository, then
    headline / blank line / paragraph blocks."""
    blocks = [b.strip() for b in SEED.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    assert blocks[0] == "vllm-project/vllm"
    pairs = list(zip(blocks[1::2], blocks[2::2], strict=True))
    assert len(pairs) == len(SEED_PRS)
    return pairs


def assembled(settings: Settings, feed: bytes | None = None,
              renderer: Renderer | None = None) -> Assembled:
    """The sample week (or ``feed``) as ``build`` assembles it, nothing written: ``(issue,
    data, artifacts, rendered)``."""
    from pipeline.core.assemble import assemble
    from pipeline.core.issue.collect import parse_feed
    from pipeline.stages.build import rank_week, terms
    from pipeline.week import parse_week

    week = parse_week(SAMPLE_WEEK, settings.issue.timezone)
    result = parse_feed(SAMPLE_FEED.read_bytes() if feed is None else feed, "feed",
                        settings.feed.repo)
    return assemble(terms(settings), week, rank_week(settings, week, [result]), renderer)
