"""The sample project the tests stand on: the repository, the bundled sample feed and its
week, and the real review text kept with the tests (so the suite runs from any clone)."""

from __future__ import annotations

import json
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


def make_project(folder: Path, *, feed: Path | str = SAMPLE_FEED, extra: str = "") -> Path:
    """``folder`` with a newsletter.toml reading ``feed`` (a path relative to the folder, or
    absolute), then the TOML in ``extra``; the built-in defaults for the rest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "newsletter.toml").write_text(f"[feed]\nurls = [{json.dumps(str(feed))}]\n{extra}",
                                            encoding="utf-8")
    return folder


def sample_settings(folder: Path, *, feed: Path | str = SAMPLE_FEED, extra: str = "") -> Settings:
    """The settings of :func:`make_project`'s project, as the commands load them."""
    from pipeline.config import load

    return load(make_project(folder, feed=feed, extra=extra) / "newsletter.toml", {})


def smtp_toml(host: str, port: int, delivery: str = "") -> str:
    """The TOML of a deployment sending through a relay on loopback without STARTTLS, with an
    https app URL (RFC 8058 one-click unsubscribe needs one) and ``delivery`` keys."""
    return ('[site]\napp_url = "https://news.example.org/api"\n'
            f'[delivery]\ntransport = "smtp"\n{delivery}'
            f'[smtp]\nhost = "{host}"\nport = {port}\nstarttls = false\n')


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
