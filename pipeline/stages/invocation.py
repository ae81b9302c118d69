"""The commands that messages ask a person to run, written so that they run as printed.

``make install`` puts ``newsletter`` in ``.venv/bin``, which is not on an editor's PATH, so
a command names the program as this process was started: ``newsletter`` when the PATH finds
it, else the script's path, or ``python -m pipeline``.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["command", "program"]

#: The console script's name (``[project.scripts]`` in pyproject.toml).
SCRIPT = "newsletter"


def program() -> str:
    """How to start this program again from the working folder, as shell words."""
    started = Path(sys.argv[0])
    if started.name == "__main__.py" and started.parent.name == "pipeline":
        return f"{shlex.quote(sys.executable)} -m pipeline"
    if started.name != SCRIPT:
        return SCRIPT
    found = shutil.which(SCRIPT)
    with contextlib.suppress(OSError):
        if found is not None and Path(found).samefile(started):
            return SCRIPT
    return shlex.quote(_shown(started))


def command(*words: str) -> str:
    """``program()`` followed by ``words``, each quoted for the shell where it needs it."""
    return " ".join([program(), *(shlex.quote(word) for word in words)])


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it, else absolute; never a bare
    name, which the shell would look up in the PATH."""
    absolute = path.absolute()
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return str(absolute)
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"
