"""Where the week's material comes from: the feeds (:mod:`pipeline.sources.feeds`) and the
PRs' own facts from GitHub (:mod:`pipeline.sources.github`, behind :class:`PullSource`).

The build asks these before it assembles anything; what they answer reaches the pure
:func:`pipeline.core.assemble.assemble` as data.
"""

from __future__ import annotations

from typing import Protocol

from pipeline.model import Problem, PullFacts

__all__ = ["PullSource"]


class PullSource(Protocol):
    """A PR's facts, for one build. Never raises for a failure of the service: it answers
    None and says what went wrong in :meth:`problems`."""

    def pull(self, repo: str, n: int) -> PullFacts | None:
        """The PR's facts, or None (no such PR, or the source cannot be asked)."""

    def files(self, repo: str, n: int) -> tuple[str, ...] | None:
        """The paths of the PR's changed files, or None."""

    def problems(self) -> list[Problem]:
        """The warnings of this build (the source could not be asked), none otherwise."""
