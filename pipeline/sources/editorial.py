"""Read the editor's file for a week, ``<editorial_dir>/<week>.toml``, off the disk;
:func:`pipeline.core.issue.editorial.parse_editorial` decides what it says.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.core.issue.editorial import Editorial, editorial_path, parse_editorial
from pipeline.errors import ConfigError


def load_editorial(folder: Path, week_id: str, tiers: tuple[str, ...]) -> Editorial:
    """``<folder>/<week>.toml`` read and parsed; no file is no decision (an empty
    ``Editorial``); a file that cannot be read or parsed raises ConfigError naming it."""
    path = editorial_path(folder, week_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Editorial()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return parse_editorial(text, path, tiers)
