"""issue.json read back, by ``send`` from the build folder and by ``publish`` from the
archive: JSON that is not an issue (a list, an object missing ``week``) is said in one line,
never a traceback from deep in the site's templates.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.commands import newsletter_main as run
from support.project import SAMPLE_WEEK, make_project

from pipeline.core.issue import issue_json


@pytest.fixture
def project(tmp_path: Path) -> Path:
    built = run(["build", "--week", SAMPLE_WEEK], make_project(tmp_path))
    assert built.returncode == 0, built.stderr
    return tmp_path


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("content", ["[]", "null", '"2026-W48"'])
def test_a_built_issue_json_that_is_no_object_is_refused_in_one_line(project, content):
    (project / "build" / "issues" / SAMPLE_WEEK / "issue.json").write_text(content)
    result = run(["send", "--week", SAMPLE_WEEK, "--dry-run"], project)
    assert result.returncode == 3
    assert "issue.json is not an issue" in one_line_error(result)


@pytest.mark.parametrize(("content", "said"), [
    ("[]", "expected a JSON object, found an array"),
    ('{"id": "2026-W01"}', "not an issue: no schema_version, week"),
    ('{"id": "2026-W01", "week": {"start": 1}}', "not an issue: no schema_version"),
    ('{"schema_version": 1, "id": "2026-W01", "week": {"start": "2026-01-05", "end": "x", '
     '"tz": "UTC"}, "repo": "", "archive_url": "", "subject": {}, "preheader": {}, '
     '"items": [], "skipped": [], "problems": [], "content_hash": ""}',
     "week end 'x' is not a date and time"),
])
def test_publish_names_an_archived_issue_json_that_is_no_issue(project, content, said):
    archived = project / "build" / "site" / "issues" / "2026-W01" / "issue.json"
    archived.parent.mkdir(parents=True)
    archived.write_text(content)
    result = run(["publish", "--week", SAMPLE_WEEK], project)
    assert result.returncode == 1
    line = one_line_error(result)
    assert "issues/2026-W01/issue.json" in line and said in line


@pytest.mark.subprocess  # publishing runs Pagefind
def test_publish_takes_the_issues_it_wrote(project):
    assert run(["publish", "--week", SAMPLE_WEEK], project).returncode == 0
    again = run(["publish", "--week", SAMPLE_WEEK], project)
    assert again.returncode == 0, again.stderr


def test_checked_accepts_what_build_wrote_and_names_what_is_missing(project):
    data = json.loads((project / "build" / "issues" / SAMPLE_WEEK / "issue.json").read_text())
    assert issue_json.checked(data) is data
    with pytest.raises(ValueError, match="week needs start, end and tz"):
        issue_json.checked({**data, "week": {"start": "x", "end": "y"}})
    with pytest.raises(ValueError, match="id must be a string, items and problems lists"):
        issue_json.checked({**data, "items": None})
    with pytest.raises(ValueError, match="found a number"):
        issue_json.checked(7)
