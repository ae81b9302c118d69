"""``newsletter`` as the tests run it, as a real process where the process is the point, else
in this one; each with a clean environment."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path


def newsletter_cmd() -> list[str]:
    """The installed command, or the package run as a module."""
    exe = Path(sys.executable).with_name("newsletter")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeline"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(extra)
    return env


def run_newsletter(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``newsletter ARGS`` in ``cwd`` as a real process, with a clean environment plus ``env``."""
    return subprocess.run([*newsletter_cmd(), *args], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=120, check=False)


def newsletter_main(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """What :func:`run_newsletter` returns, from ``pipeline.cli.main`` called in this process
    (no interpreter start). stdout and stderr are UTF-8 streams that are not terminals, as a
    pipe is; the working folder and ``os.environ`` are restored whatever happens."""
    from pipeline.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)
                for _ in range(2))
    saved_env, saved_cwd = os.environ.copy(), os.getcwd()
    saved_streams = sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update({k: v for k, v in saved_env.items() if not k.startswith("NEWSLETTER_")})
    os.environ.update(env)
    try:
        os.chdir(cwd)
        sys.stdout, sys.stderr = out, err
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)

    def text(stream: io.TextIOWrapper) -> str:
        stream.flush()
        buffer = stream.buffer
        assert isinstance(buffer, io.BytesIO)  # made above
        return buffer.getvalue().decode("utf-8")

    return subprocess.CompletedProcess(["newsletter", *args], code, text(out), text(err))


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``result``, asserted to have exited 0."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result
