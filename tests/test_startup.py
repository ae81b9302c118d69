"""boto3 (a deployment on AWS), Playwright (the optional ``preview`` extra) and rjieba (which
loads its dictionary on import, for the search index) are imported where they are used, not by
every command: a local build, in a fresh interpreter, loads none of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import clean_env
from support.project import SAMPLE_FEED, SAMPLE_WEEK

#: The command, then the top-level packages it imported, as JSON on stderr.
PROBE = """
import json, sys
from pipeline.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""

OPTIONAL = {"boto3", "botocore", "s3transfer", "playwright", "rjieba"}


def imported(args: list[str], cwd: Path) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=clean_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    modules: list[str] = json.loads(result.stderr.strip().splitlines()[-1])
    return set(modules)


@pytest.mark.subprocess
def test_a_local_build_imports_no_aws_browser_or_word_cutter(tmp_path):
    out = tmp_path / "issue"
    modules = imported(["build", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED),
                        "--out", str(out), "-q"], tmp_path)
    assert (out / "issue.json").is_file()  # it did build: the modules are a build's
    assert {"jinja2", "mjml", "feedparser"} <= modules
    assert modules & OPTIONAL == set()
