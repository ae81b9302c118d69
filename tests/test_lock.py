"""The per-issue lock: a second holder is refused with exit 5; a dead holder frees it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.errors import LockedError
from pipeline.lock import hold


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    path = tmp_path / ".send.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pipeline.lock import hold; from pathlib "
         f"import Path\nwith hold(Path({str(path)!r}), 'x'):\n print('held', flush=True); "
         "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError) as info, hold(path, "send 2026-W48"):
            pass
        assert info.value.exit_code == 5
        assert f"pid {holder.pid}" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    with hold(path, "send 2026-W48"):  # the kernel released the dead holder's lock
        pass
