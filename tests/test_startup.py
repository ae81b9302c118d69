"""boto3, Playwright and jieba's dictionary are imported where they are used, not by every
command.

Every other import sits at the top of its module. These are the exceptions: boto3 is needed
only by a deployment on AWS (the S3, SES, DynamoDB, Translate and SQS adapters), Playwright
only by the preview's screenshots (the ``preview`` extra, which an installation may leave
out), and rjieba, which loads its dictionary on import, only by the search index ``publish``
writes. Each command runs in a fresh interpreter (this test process has imported everything
long ago) that prints the packages it holds at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import clean_env
from support.project import SAMPLE_FEED, SAMPLE_WEEK

#: Run as ``python -c``: the command, then the top-level packages it imported, as JSON.
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
