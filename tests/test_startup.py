"""What a command imports when it starts: only what it uses (issue 26).

Each command is a new process, and every module it imports is start-up time a user waits for
on every run: boto3 alone costs ~0.3 s, Jinja and MJML ~0.1 s, email-validator's patterns
~30 ms, jieba's dictionary (rjieba, for the search index) ~0.2 s. The build never talks to
AWS, serves nothing, drives no browser, checks no address and indexes nothing, so none of
those may be imported on its way; ``--help`` only lists the commands, so it
compiles no template and reads no feed; a command that renders nothing imports no template
engine. Each runs in a fresh interpreter (the process boundary is what is checked: this
test process has imported everything long ago) that prints the modules it holds at the end.
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

#: Never on the way of a build: AWS, the web app, the browser, the address checker, the
#: search index's segmenter.
NOT_FOR_BUILD = {"boto3", "botocore", "s3transfer", "uvicorn", "starlette", "playwright",
                 "email_validator", "aiosmtpd", "rjieba"}
#: Never for ``--help``: besides those, the templates, the feed parser, the sanitizer.
NOT_FOR_HELP = NOT_FOR_BUILD | {"jinja2", "mjml", "feedparser", "nh3", "pendulum"}


def imported(args: list[str], cwd: Path) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=clean_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    modules: list[str] = json.loads(result.stderr.strip().splitlines()[-1])
    return set(modules)


@pytest.mark.subprocess
def test_build_imports_no_aws_web_browser_or_address_checker(tmp_path):
    out = tmp_path / "issue"
    modules = imported(["build", "--week", SAMPLE_WEEK, "--feed", str(SAMPLE_FEED),
                        "--out", str(out), "-q"], tmp_path)
    assert (out / "issue.json").is_file()  # it did build: the modules are a build's
    assert {"jinja2", "mjml", "feedparser"} <= modules
    assert modules & NOT_FOR_BUILD == set()


@pytest.mark.subprocess
def test_help_imports_only_the_parser(tmp_path):
    modules = imported(["--help"], tmp_path)
    assert "pipeline" in modules and "argparse" in modules
    assert modules & NOT_FOR_HELP == set()


@pytest.mark.subprocess
def test_a_command_that_renders_nothing_imports_no_template_engine(tmp_path):
    # Nothing a command does first (logging, settings) may import the renderer (Jinja, MJML).
    rows = tmp_path / "rows.csv"
    rows.write_text("email\nreader@example.com\n", encoding="utf-8")
    modules = imported(["subscribers", "import", str(rows), "--confirmed"], tmp_path)
    assert "email_validator" in modules  # it did import: the modules are an import's
    assert modules & {"jinja2", "mjml", "feedparser", "boto3"} == set()
