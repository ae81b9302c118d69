"""Publish: a built issue → the public archive, issue pages first, then the index.

The order is the guarantee: the issue's pages, then the pages made from every issue the
archive holds, and the index, feed and sitemap last; so a failure half-way leaves the live
index pointing only at pages that exist. A PR or area page no issue makes any more is
deleted once the index stops naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pipeline.archive import Archive, SiteObject
from pipeline.core.issue import issue_json
from pipeline.core.issue.interests import issue_areas
from pipeline.core.site.site import DERIVED, Site, retired
from pipeline.errors import ArchiveError, RenderError
from pipeline.model import Issue
from pipeline.stages.built import BuiltIssue
from pipeline.stages.search_index import publish_search


@dataclass
class PublishReport:
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    bytes_written: int = 0
    #: Every area the archive's issues carry: what a reader may follow.
    areas: tuple[str, ...] = ()
    #: Why the search index was not updated: the old one still answers, the week goes out.
    search_problem: str = ""
    #: Old search-index files deleted.
    removed: int = 0
    #: PR and area pages no issue makes any more, deleted.
    retired: list[str] = field(default_factory=list)

    def note(self, obj: SiteObject, changed: bool) -> None:
        if changed:
            self.written.append(obj.key)
            self.bytes_written += len(obj.data)
        else:
            self.unchanged += 1


def publish(built: BuiltIssue, archive: Archive, site: Site) -> PublishReport:
    report = PublishReport()
    for obj in site.issue_objects(built):  # every page decided before the first write
        report.note(obj, archive.write(obj))
    issues: list[Issue] = []
    for week in archive.list_issues():
        key = f"issues/{week}/issue.json"
        if (raw := archive.read(key)) is not None:
            try:
                issues.append(issue_json.from_dict(json.loads(raw)))
            except ValueError as exc:  # json's JSONDecodeError is one too
                raise ArchiveError(f"{key}: {exc}", key=key) from None
    if built.id not in {issue.id for issue in issues}:
        raise ArchiveError(f"issues/{built.id}/issue.json is not listed after writing it; "
                           "the index was not updated", key=f"issues/{built.id}/issue.json")
    made = site.index_objects(issues)
    for obj in made:
        report.note(obj, archive.write(obj))
    # After the index, feed and sitemap: nothing live links to a page deleted here.
    report.retired = retired([key for prefix in DERIVED for key in archive.keys(prefix)], made)
    archive.delete(report.retired)
    report.areas = issue_areas([item for issue in issues for item in issue.items])
    try:  # last: it indexes the pages above
        report.removed = publish_search(archive, site, issues, report.note)
    except RenderError as exc:  # search is an addition: a broken index stops no send
        report.search_problem = str(exc)
    return report
