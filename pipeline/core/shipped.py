"""Where the files that ship with the package are: the templates, the UI strings, the verdict
vocabulary. The one place the core reads from besides what it is handed."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from pathlib import Path


def templates_dir() -> Path:
    """The built-in templates, wherever the package is installed."""
    return Path(str(resources.files("pipeline.templates")))


@functools.cache
def strings() -> dict[str, dict[str, str]]:
    """The UI words per language (``templates/strings.toml``)."""
    return tomllib.loads((templates_dir() / "strings.toml").read_text(encoding="utf-8"))
