"""Publish: a built issue → the public archive, issue pages first, then the index.

The order is the guarantee: the issue's own pages first, then the pages made from every issue
(one per reviewed PR, one page and Atom feed per area, the share card), and the index, feed
and sitemap last. All but the issue's own are made from the issue.json files the archive
itself holds (the one just written included), so a failure half-way leaves the live index
pointing only at pages that exist, and a fresh runner with an empty ``build/`` still
publishes a complete index. Unchanged objects are not written again: a second publish of the
same content writes nothing (each new issue rewrites only the PR and area pages it touches).

The archive holds what its issues make, no more: once the index, feed and sitemap stop
naming a PR or area page that no issue makes any more (the editor hid the PR, an area lost
its last review, an area needs one page fewer), that page is deleted. Before them, it would
be a page the live index still links to; left, it would stay public and link to a review
that is gone.
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
    #: Every area the archive's issues carry, sorted: what a reader may follow.
    areas: tuple[str, ...] = ()
    #: Why the search index was not updated ("" when it was): the pages are published and
    #: the old index still answers, so the week goes out; the operator is told.
    search_problem: str = ""
    #: Old search-index files deleted: named by neither this index nor the one before.
    removed: int = 0
    #: PR and area pages deleted because no issue the archive holds makes them any more.
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
        raw = archive.read(f"issues/{week}/issue.json")
        if raw is None:
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ArchiveError(f"issues/{week}/issue.json is not valid JSON: {exc}",
                               key=f"issues/{week}/issue.json") from None
        try:
            issues.append(issue_json.from_dict(data))
        except ValueError as exc:
            raise ArchiveError(f"issues/{week}/issue.json: {exc}",
                               key=f"issues/{week}/issue.json") from None
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
