"""Compiled templates live in this process's memory only: loading one runs its code, and a cache
on disk would be code loaded from a folder another local user could swap under us.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from support.commands import clean_env
from support.project import SAMPLE_FEED, SAMPLE_WEEK

#: Run as ``python -c``: an audit hook records every file operation under the folders given
#: first, then the command runs; what was touched is printed as JSON at the end.
PROBE = """
import json, os, sys
watched = tuple(sys.argv[1:3])
touched = []
def hook(event, args):
    if event in ("open", "os.mkdir", "os.listdir", "os.scandir", "os.rename", "os.remove",
                 "os.symlink", "os.chmod", "os.truncate", "shutil.rmtree") and args:
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith(watched):
            touched.append(f"{event} {os.fsdecode(path)}")
sys.addaudithook(hook)
from pipeline.cli import main
code = main(sys.argv[3:])
print(json.dumps([code, touched]), file=sys.stderr)
"""


class Payload:
    """What an attacker plants: unpickling it would create ``ran`` (code execution)."""

    def __init__(self, ran: Path) -> None:
        self.ran = ran

    def __reduce__(self):
        return (Path.touch, (self.ran,))


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``, symlinks not followed: path → bytes or link target."""
    return {str(p.relative_to(folder)): (str(p.readlink()) if p.is_symlink()
                                         else p.read_bytes() if p.is_file() else "dir")
            for p in sorted(folder.rglob("*"))}


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_build_reads_and_writes_no_compiled_template_on_disk(tmp_path):
    cache, home, attacker = tmp_path / "xdg", tmp_path / "home", tmp_path / "attacker"
    ran = tmp_path / "payload-ran"
    (attacker / "templates").mkdir(parents=True, mode=0o700)
    (attacker / "templates" / ("0" * 40)).write_bytes(
        jinja2.bccache.bc_magic + pickle.dumps(Payload(ran)))
    for base in (cache, home / ".cache"):  # the cache folder a symlink into the attacker's
        base.mkdir(parents=True)
        (base / "vllm-pr-weekly").symlink_to(attacker)
    before = {folder: tree(folder) for folder in (cache, home, attacker)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(cache), str(home), "build", "--week", SAMPLE_WEEK,
         "--feed", str(SAMPLE_FEED), "--out", str(tmp_path / "issue"), "-q"],
        cwd=tmp_path, env=clean_env(XDG_CACHE_HOME=str(cache), HOME=str(home)),
        capture_output=True, text=True, timeout=60, check=False)
    code, touched = json.loads(result.stderr.strip().splitlines()[-1])
    assert code == 0 and (tmp_path / "issue" / "issue.json").is_file(), result.stderr
    assert touched == []
    assert {folder: tree(folder) for folder in before} == before
    assert not ran.exists()
