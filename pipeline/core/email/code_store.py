"""Where compiled templates outlive the process: the one choice a command makes about them
before anything renders.

The renderer (``render.py``) keeps each template's compiled code in memory and, given a
:class:`CodeStore`, between processes too (the command line gives it
``pipeline/template_cache.py``'s folder in the user's cache). The choice is kept here, apart
from the renderer, so that the command line makes it without importing Jinja, MJML and the
templates' helpers (~0.1 s): a command that renders nothing does not pay for them, and one
that does (``preview``) starts its browser that much sooner.
"""

from __future__ import annotations

from typing import Protocol


class CodeStore(Protocol):
    """Where compiled templates outlive the process: ``load`` answers None for a key it does
    not hold or cannot read, ``save`` never raises. A cache is a shortcut, never a reason to
    fail."""

    def load(self, key: str) -> bytes | None: ...

    def save(self, key: str, code: bytes) -> None: ...


_kept: CodeStore | None = None


def keep_compiled_templates(store: CodeStore | None) -> None:
    """Keep compiled templates in ``store`` from now on (None: in this process only). The
    command line calls it once, as it sets up logging; a library user or a test need not."""
    global _kept
    _kept = store


def kept_in() -> CodeStore | None:
    """The store :func:`keep_compiled_templates` chose, if any."""
    return _kept
