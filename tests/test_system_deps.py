"""scripts/system-deps: the Debian packages the tests need, installed when missing.

The real script runs in a real bash whose PATH holds only stand-ins (for the commands it asks
about, ``id`` and an ``apt-get`` that records what it was asked and "installs" a package by
putting its command in place), so no case touches the machine's own packages.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.project import ROOT

#: Every test here starts a process (a real CLI, make, bash or mypy).
pytestmark = pytest.mark.subprocess

SCRIPT = ROOT / "scripts" / "system-deps"
EVERYTHING = ("chromium", "fonts-noto-cjk", "default-jre-headless", "spamassassin")
# What apt-get's stand-in puts in place for each package.
PROVIDES = {"chromium": "chromium", "default-jre-headless": "java", "spamassassin": "spamassassin",
            "fonts-noto-cjk": "fc-font"}


def _tool(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _machine(tmp_path: Path, present: tuple[str, ...], *, uid: int = 0, apt: str | None = "ok",
             fontconfig: bool = True) -> Path:
    """A bin folder standing for a machine that has ``present``; ``apt``: None (no apt-get),
    "ok" (installs what it is asked), "fails" (exits 100), "noop" (succeeds, installs nothing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir / "id", f'echo {uid}\n')
    # fc-list answers with a Chinese font once the fonts' marker file is there.
    _tool(bin_dir / ("fc-list" if fontconfig else "no-fc-list"),
          f'[ -e {bin_dir}/fc-font ] && echo "/usr/share/fonts/NotoSansCJK.ttc: Noto Sans CJK SC"\n'
          'exit 0\n')
    for package in present:
        _tool(bin_dir / PROVIDES[package], "exit 0\n")
    log = tmp_path / "apt.log"
    if apt is not None:
        install = {
            "ok": 'for p in "$@"; do case "$p" in -*|install) ;; *)'
                  f' printf "#!/bin/bash\\n" > {bin_dir}/$(provides "$p");'
                  f' /bin/chmod +x {bin_dir}/$(provides "$p");; esac; done',
            "fails": 'echo "E: Unable to locate package" >&2; exit 100',
            "noop": ":",
        }[apt]
        cases = " ".join(f'{p}) echo {c};;' for p, c in PROVIDES.items())
        _tool(bin_dir / "apt-get",
              f'provides() {{ case "$1" in {cases} esac; }}\n'
              f'echo "$*" >> {log}\n'
              f'if [ "$1" = install ]; then {install}; fi\n')
    return bin_dir


def _run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=60, check=False)


def _apt_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_machine_with_everything_installs_nothing_and_says_nothing(tmp_path: Path) -> None:
    result = _run(_machine(tmp_path, EVERYTHING))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert _apt_calls(tmp_path) == []


def test_as_root_it_installs_exactly_what_is_missing(tmp_path: Path) -> None:
    result = _run(_machine(tmp_path, ("default-jre-headless", "spamassassin")))
    assert result.returncode == 0, result.stderr
    assert _apt_calls(tmp_path) == [
        "update -q", "install -y -q --no-install-recommends chromium fonts-noto-cjk"]
    assert "installing chromium fonts-noto-cjk" in result.stderr
    # Once there, a second run has nothing to do.
    (tmp_path / "apt.log").unlink()
    assert _run(tmp_path / "bin").returncode == 0
    assert _apt_calls(tmp_path) == []


NO_JAVA = ("chromium", "fonts-noto-cjk", "spamassassin")
APT_LINE = "apt-get install --no-install-recommends"


@pytest.mark.parametrize(("present", "machine", "stderr", "apt"), [
    pytest.param((), {"uid": 1000}, [
        f"system-deps: missing {' '.join(EVERYTHING)}; install them with: sudo {APT_LINE} "
        + " ".join(EVERYTHING)], [], id="not root"),
    pytest.param(NO_JAVA, {"apt": None}, [
        "system-deps: missing default-jre-headless (no apt-get here; on Debian: "
        f"{APT_LINE} default-jre-headless)"], [], id="no apt"),
    pytest.param(NO_JAVA, {"apt": "fails"}, [
        "system-deps: installing default-jre-headless (apt-get)", "E: Unable to locate package",
        "system-deps: apt-get could not install default-jre-headless; try: "
        f"{APT_LINE} default-jre-headless"],
        ["update -q", "install -y -q --no-install-recommends default-jre-headless"],
        id="apt fails"),
    # A package that brings no command is not taken for installed.
    pytest.param(("fonts-noto-cjk", "default-jre-headless", "spamassassin"), {"apt": "noop"}, [
        "system-deps: installing chromium (apt-get)",
        "system-deps: chromium still missing after apt-get install"],
        ["update -q", "install -y -q --no-install-recommends chromium"], id="apt installs nothing"),
    pytest.param(("chromium", "default-jre-headless", "spamassassin"),
                 {"uid": 1000, "fontconfig": False}, [
        "system-deps: missing fontconfig fonts-noto-cjk; install them with: "
        f"sudo {APT_LINE} fontconfig fonts-noto-cjk"], [], id="no fontconfig"),
])
def test_what_it_cannot_install_stops_it_with_exit_2_saying_what_to_do(
        tmp_path: Path, present: tuple[str, ...], machine: dict[str, Any], stderr: list[str],
        apt: list[str]) -> None:
    result = _run(_machine(tmp_path, present, **machine))
    assert (result.returncode, result.stderr.splitlines()) == (2, stderr)
    assert _apt_calls(tmp_path) == apt
