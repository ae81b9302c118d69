"""What `.ci/run` and the Makefile promise: CI fails on a ruff finding or a type error, and
`make install` honours requirements.lock with uv on the same indexes pip is set up with.
Everything runs for real (bash, make, ruff, mypy) but the expensive outside steps, stand-ins
that record what they were asked.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.project import ROOT

#: Every test here starts a process (a real CLI, make, bash or mypy).
pytestmark = pytest.mark.subprocess

VENV = Path(sys.prefix)


def _tool(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


# --- .ci/run -------------------------------------------------------------------------------

DURATIONS = "PYTEST_ARGS=--durations=25"


def _ci_run(tmp_path: Path, failing: str = "") -> tuple[int, list[str]]:
    """.ci/run in a copy of the repository where system-deps and make only log their calls
    (``failing`` names the one that fails)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / ".ci", repo / ".ci")
    log = tmp_path / "calls.log"
    fail = f'[ "$1" = "{failing}" ] && exit 1\nexit 0\n'
    _tool(repo / "scripts" / "system-deps",
          f'echo system-deps >> {log}\nset -- system-deps\n{fail}')
    _tool(tmp_path / "bin" / "make", f'echo "$*" >> {log}\n{fail}')
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(repo / ".ci" / "run")], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    return result.returncode, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(("failing", "ran"), [
    # The slowest tests are named at the end of every CI log.
    ("", ["system-deps", "lint", "typecheck", f"test {DURATIONS}"]),
    ("system-deps", ["system-deps"]),
    ("lint", ["system-deps", "lint"]),
    ("typecheck", ["system-deps", "lint", "typecheck"]),
    ("test", ["system-deps", "lint", "typecheck", f"test {DURATIONS}"]),
], ids=["all pass", "system-deps fails", "lint fails", "typecheck fails", "test fails"])
def test_ci_runs_system_deps_lint_typecheck_then_the_tests_and_stops_at_a_failure(
        tmp_path: Path, failing: str, ran: list[str]) -> None:
    code, calls = _ci_run(tmp_path, failing)
    assert (code == 0, calls) == (failing == "", ran)


# --- make lint, make typecheck, make test ----------------------------------------------------


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    """A small project under the repository's Makefile and pyproject.toml (ruff and mypy
    settings included)."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    for name in _contract_modules():  # import-linter refuses a contract naming no module
        if name.replace(".", "/") + ".py" in files:
            continue
        path = repo / (name.replace(".", "/") + "/__init__.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    return repo


def _contract_modules() -> set[str]:
    """Our modules that the import contracts of pyproject.toml name."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    names: set[str] = set()
    for contract in contracts["contracts"]:
        for key in ("source_modules", "forbidden_modules", "ancestors"):
            names.update(contract.get(key, ()))
    return {n for n in names if n.split(".")[0] in ("pipeline", "subscribers")}


def _make(repo: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    # -o install: the environment that runs this test is the installed one; do not remake it.
    return subprocess.run(["make", "--no-print-directory", "-C", str(repo), "-o", "install",
                           f"VENV={VENV}", *targets], capture_output=True, text=True,
                          timeout=300, check=False)


CLEAN = {"pipeline/__init__.py": "", "subscribers/__init__.py": "",
         "pipeline/week.py": '"""A module."""\n\n\ndef double(n: int) -> int:\n    return 2 * n\n',
         # A test needs no annotations (the relaxation pyproject.toml names for tests/).
         "tests/test_week.py": ('from pipeline.week import double\n\n\n'
                                'def test_double(tmp_path):\n    assert double(2) == 4\n')}


def test_make_lint_fails_on_a_ruff_finding(tmp_path: Path) -> None:
    assert _make(_project(tmp_path / "clean", CLEAN), "lint").returncode == 0
    bad = _make(_project(tmp_path / "bad", {**CLEAN, "pipeline/bad.py": "import os\n"}), "lint")
    assert bad.returncode != 0
    assert "F401" in bad.stdout


@pytest.mark.slow  # make, then mypy over three small projects
def test_make_typecheck_fails_on_a_type_error(tmp_path: Path) -> None:
    assert _make(_project(tmp_path / "clean", CLEAN), "typecheck").returncode == 0
    wrong = {**CLEAN, "subscribers/bad.py":
             'from pipeline.week import double\n\nHALF: str = double(2)\n'}
    bad = _make(_project(tmp_path / "bad", wrong), "typecheck")
    assert bad.returncode != 0
    assert "subscribers/bad.py:3: error: Incompatible types" in bad.stdout
    # tests/ is checked too: an unannotated test passes, a wrong call in its body does not;
    # and the product keeps strict's annotations.
    wrong = {**CLEAN, "tests/test_bad.py": ('from pipeline.week import double\n\n\n'
                                            'def test_half():\n    double("2")\n'),
             "pipeline/untyped.py": '"""A module."""\n\n\ndef half(n):\n    return n / 2\n'}
    bad = _make(_project(tmp_path / "bad-test", wrong), "typecheck")
    assert "tests/test_bad.py:5: error: Argument 1" in bad.stdout
    assert "pipeline/untyped.py:4: error: Function is missing a type annotation" in bad.stdout
    assert "tests/test_week.py" not in bad.stdout


@pytest.mark.parametrize("full", [False, True])
def test_make_bench_passes_each_script_only_its_own_options(full: bool) -> None:
    """A comma inside ``$(if ...)`` splits an argument: each script gets only its own options."""
    args = ["make", "-n", "-C", str(ROOT), "-o", "install", "bench", *(["FULL=1"] if full else [])]
    planned = subprocess.run(args, capture_output=True, text=True, timeout=60,
                             check=True).stdout
    scripts = [line.split("bench/", 1)[1].split() for line in planned.splitlines()
               if "bench/bench_" in line]
    assert len(scripts) == len(list((ROOT / "bench").glob("bench_*.py")))
    send = next(words for words in scripts if words[0] == "bench_send.py")
    assert send[1:] == (["--recipients", "10000", "--memory-sizes", "10000,50000,100000"]
                        if full else [])
    for words in scripts:  # options only: a bare word is an argument nobody meant
        assert len(words) == 1 or words[1].startswith("--"), words


# --- make install: uv on pip's indexes, pinned by requirements.lock --------------------------


def _install(tmp_path: Path, *, with_uv: bool) -> tuple[int, str, list[str]]:
    """scripts/python-deps install in a copy of the repository, with a venv python and a uv
    that log how they were called (no uv to be had when ``with_uv`` is false)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    log = tmp_path / "calls.log"
    venv_python = tmp_path / "venv" / "bin" / "python"
    _tool(venv_python,
          f'if [ "$1 $2 $3" = "-m pip install" ]; then\n'
          f'  case " $* " in *" uv "*) echo "pip-uv" >> {log}; exit 1;; esac\n'
          f'  echo "pip $*" >> {log}; exit 0\n'
          f'fi\nexec {sys.executable} "$@"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if with_uv:
        _tool(bin_dir / "uv", f'echo "uv $* cert=$SSL_CERT_FILE" >> {log}\n')
    # The configuration pip is given here, and nothing from the machine's pip.conf.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", PIP_CONFIG_FILE=os.devnull,
               PIP_INDEX_URL="https://mirror.example/simple",
               PIP_EXTRA_INDEX_URL="file:///opt/one/simple file:///opt/two/simple",
               PIP_FIND_LINKS="/opt/wheels", PIP_CERT="/etc/ssl/corp.pem",
               VENV=str(tmp_path / "venv"))
    if not with_uv:
        # No uv anywhere on PATH: only the one pip would install could serve.
        env["PATH"] = f"{bin_dir}{os.pathsep}" + os.pathsep.join(
            d for d in ("/usr/bin", "/bin") if not (Path(d) / "uv").exists())
    result = subprocess.run(["bash", str(repo / "scripts" / "python-deps"), "install"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    return result.returncode, result.stderr, log.read_text().splitlines()


def test_install_uses_uv_on_the_indexes_pip_is_set_up_with_pinned_by_the_lock(
        tmp_path: Path) -> None:
    code, stderr, calls = _install(tmp_path, with_uv=True)
    assert code == 0, stderr
    assert calls == [
        # Compiled at install: a process then never compiles a dependency again (where
        # PYTHONDONTWRITEBYTECODE is set, every one would, each time it starts).
        f"uv pip install --compile-bytecode --python {tmp_path}/venv/bin/python"
        " --index-url https://mirror.example/simple"
        " --extra-index-url file:///opt/one/simple --extra-index-url file:///opt/two/simple"
        " --find-links /opt/wheels --index-strategy unsafe-best-match"
        " -c requirements.lock -e .[test,preview] cert=/etc/ssl/corp.pem"]
    assert "with uv, pinned by requirements.lock" in stderr


def test_install_falls_back_to_pip_with_the_same_pins(tmp_path: Path) -> None:
    code, stderr, calls = _install(tmp_path, with_uv=False)
    assert code == 0, stderr
    assert calls[0] == "pip-uv"
    assert re.fullmatch(r"pip -m pip install .* -c requirements\.lock -e \.\[test,preview\]",
                        calls[1])
    assert "falling back to pip" in stderr


def locked_pins() -> dict[str, str]:
    """requirements.lock's versions, by normalised project name."""
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if match := re.match(r"([A-Za-z0-9._-]+)==([^ ;]+)", line):
            pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_the_lock_pins_every_declared_dependency_within_its_range() -> None:
    """A dependency added to pyproject.toml without `make lock` fails here, not in CI."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked_pins()
    extras = project["optional-dependencies"]
    declared = [*project["dependencies"], *extras["test"], *extras["preview"]]
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock: run make lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} is outside {requirement.specifier}: run make lock")
    # The extras of a requirement are locked too (boto3-stubs[s3,…] → mypy-boto3-s3, …).
    for service in ("s3", "sesv2", "dynamodb", "translate", "sns"):
        assert f"mypy-boto3-{service}" in pins


def test_the_shared_fixture_modules_each_go_to_one_worker() -> None:
    """Each module kept on one worker exists and has the module fixture that is why."""
    from support.scheduling import SHARED_FIXTURE_MODULES, scope_of

    for module in SHARED_FIXTURE_MODULES:
        assert 'scope="module"' in (ROOT / module).read_text(encoding="utf-8"), module
        assert scope_of(f"{module}::test_a[x]") == scope_of(f"{module}::test_b") == module
    assert scope_of("tests/test_fit.py::test_c[1]") == "tests/test_fit.py::test_c[1]"
