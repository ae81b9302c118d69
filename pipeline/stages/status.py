"""``newsletter status``: the operator's view of one week and of the list.

The delivery numbers come from the ledger (the truth across shards and machines); the send
reports add how the runs ended. Rates are set against Gmail's and Yahoo's 0.3 % complaint
line and SES's 5 % bounce line. The exit code tells a scheduler what to do next
(docs/operations.md has the table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.stages.approve import is_approved
from pipeline.stages.built import issue_folder, readable_built
from pipeline.stages.freeze import refused
from pipeline.stages.invocation import command
from pipeline.stages.send_report import REPORT_FILE
from pipeline.week import iso_z
from subscribers.model import LAYOUTS, STATUSES

if TYPE_CHECKING:
    from pipeline.archive import Archive
    from pipeline.config import Settings
    from subscribers.model import SentIssue
    from subscribers.store import DeliveryStore

#: Above these, mail stops landing (Gmail, Yahoo) or the account is reviewed (SES).
COMPLAINT_LINE = 0.003
BOUNCE_LINE = 0.05

EXIT_SENT, EXIT_FAILED, EXIT_BLOCKED, EXIT_INCOMPLETE, EXIT_NOT_BUILT = 0, 1, 3, 4, 6


@dataclass(frozen=True)
class IssueRates:
    issue: str
    sent: int
    bounces: int
    complaints: int

    @property
    def bounce_rate(self) -> float:
        return self.bounces / self.sent if self.sent else 0.0

    @property
    def complaint_rate(self) -> float:
        return self.complaints / self.sent if self.sent else 0.0


@dataclass(frozen=True)
class WeekStatus:
    """Everything ``status`` says about one week."""

    week: str
    built: bool
    items: int = 0
    content_hash: str = ""
    folder: str = ""
    approved: bool = False
    approval_required: bool = False
    blocking: int = 0
    published: bool = False
    archive_url: str = ""
    ledger: Mapping[str, int] = field(default_factory=dict)
    permanent_failures: int = 0
    reports: Sequence[Mapping[str, Any]] = ()
    missing_shards: Sequence[str] = ()
    rates: IssueRates | None = None
    #: Subscriber id → why it is unconfirmed.
    unconfirmed: Mapping[str, str] = field(default_factory=dict)
    sent: SentIssue | None = None
    #: The issue built here differs from what went out and is no correction of it.
    differs_from_sent: bool = False

    @property
    def state(self) -> str:
        """The first state that holds (docs/operations.md)."""
        if not self.built:
            return "not built"
        if self.differs_from_sent or self.blocking:
            return "blocked"
        if self.approval_required and not self.approved:
            return "waiting for approval"
        if self.failed:
            return "failed"
        if self.complete:
            return "sent"
        if any(r.get("stopped") for r in self.reports):
            return "stopped (resumable)"
        return "not fully sent"

    @property
    def failed(self) -> bool:
        """A run stopped on a refusal no rerun cures (``stop_exit`` 2); bounces and
        resumable stops are not failures."""
        return any(r.get("stopped") and r.get("stop_exit") == 2 for r in self.reports)

    @property
    def to_retry(self) -> int:
        """Failed for now: the next run sends them."""
        return self.ledger.get("failed", 0) - self.permanent_failures

    @property
    def complete(self) -> bool:
        """Every run reported, none stopped, nothing in flight, to retry or unconfirmed."""
        return (bool(self.reports) and not self.missing_shards
                and not any(r.get("stopped") for r in self.reports)
                and not self.ledger.get("sending") and self.to_retry == 0
                and not self.ledger.get("unconfirmed"))

    @property
    def plain_fallback(self) -> int:
        """Readers given the plain layout by the latest runs (areas changed since the build)."""
        return sum(int(r.get("plain_fallback") or 0) for r in self.reports)

    @property
    def exit_code(self) -> int:
        return {"not built": EXIT_NOT_BUILT, "waiting for approval": EXIT_BLOCKED,
                "blocked": EXIT_BLOCKED, "failed": EXIT_FAILED, "sent": EXIT_SENT,
                }.get(self.state, EXIT_INCOMPLETE)


def current_reports(reports: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The reports of the latest way the issue was sent (whole or in shards): a stale report
    of the other kind says nothing. On a tie the shards win."""
    if not reports:
        return []
    newest = max(reports, key=lambda r: (str(r.get("finished_at") or ""), bool(r.get("shard"))))
    return [r for r in reports if bool(r.get("shard")) == bool(newest.get("shard"))]


def read_reports(folder: Path) -> list[dict[str, Any]]:
    """The week's send reports: ``send-report.json`` and every shard's part."""
    found = []
    for path in sorted(folder.glob("send-report*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a damaged report says nothing; the ledger still does
        if isinstance(data, dict) and not data.get("dry_run"):
            data["file"] = path.name
            found.append(data)
    return found


def missing_shards(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """Shards not reported yet (``2/3`` when only 1/3 and 3/3 did); a whole report covers all."""
    if any(r.get("file") == REPORT_FILE for r in reports):
        return []
    seen: dict[int, set[int]] = {}
    for report in reports:
        shard = str(report.get("shard") or "")
        index, _, count = shard.partition("/")
        if index.isdigit() and count.isdigit():
            seen.setdefault(int(count), set()).add(int(index))
    total = max(seen, default=0)
    return [f"{i}/{total}" for i in range(1, total + 1) if i not in seen[total]]


def render(status: WeekStatus, history: Sequence[IssueRates],
           counts: Mapping[tuple[str, str], int]) -> str:
    """The text ``newsletter status`` prints."""
    lines = [f"{status.week}: {status.state}"]
    if status.sent is not None:
        lines.append("  went out   " + _went_out(status.sent)
                     + (f"; the issue built here ({status.content_hash[:12]}) differs and is "
                        "no correction of it: it never goes out" if status.differs_from_sent
                        else ""))
    if status.built:
        lines.append(f"  built      {status.items} items, content {status.content_hash[:12]} "
                     f"({status.folder})")
        approval = "yes" if status.approved else (
            "no (required)" if status.approval_required else "no (not required)")
        if status.blocking:
            approval += f"; {status.blocking} blocking problem(s)"
        lines.append(f"  approved   {approval}")
        where = f"yes ({status.archive_url})" if status.published else "no"
        lines.append(f"  published  {where}")
        ledger = status.ledger
        parts = ", ".join(r.get("shard") or "all" for r in status.reports) or "none yet"
        lines.append(f"  delivery   sent {ledger.get('sent', 0)}, failed "
                     f"{status.permanent_failures} (+{status.to_retry} to retry), unconfirmed "
                     f"{ledger.get('unconfirmed', 0)}, in flight {ledger.get('sending', 0)} "
                     f"(runs reported: {parts})")
        if status.plain_fallback:
            lines.append(f"  plain      {status.plain_fallback} reader(s) got the plain layout: "
                         "their areas changed after the build (the next build renders them)")
        if status.unconfirmed:
            resend = command("send", "--week", status.week, "--resend-unconfirmed")
            lines.append(f"  unconfirmed (each may or may not have arrived; {resend} "
                         "sends them again):")
            lines.extend(f"             {sid}  {reason}"
                         for sid, reason in status.unconfirmed.items())
        if status.missing_shards:
            lines.append(f"  waiting    for shard(s) {', '.join(status.missing_shards)}")
        for report in status.reports:
            if report.get("stopped"):
                cure = ("; fix the configuration, then run it again (a rerun alone is refused "
                        "the same)" if report.get("stop_exit") == 2 else "")
                lines.append(f"  stopped    {report.get('file')}: {report['stopped']}{cure}")
        if status.rates:
            lines.append("  feedback   " + _rates(status.rates))
    if history:
        lines.append("last issues")
        for rates in history:
            flag = ("  ← over the line" if rates.complaint_rate > COMPLAINT_LINE
                    or rates.bounce_rate > BOUNCE_LINE else "")
            lines.append(f"  {rates.issue}  sent {rates.sent:>7}  {_rates(rates)}{flag}")
        lines.append(f"  (lines: complaints {COMPLAINT_LINE:.1%}, bounces {BOUNCE_LINE:.0%})")
    lines.append("list       " + _list(counts))
    return "\n".join(lines)


def as_json(status: WeekStatus, history: Sequence[IssueRates],
            counts: Mapping[tuple[str, str], int]) -> dict[str, Any]:
    """What ``newsletter status --json`` prints: the text's facts, for a script."""
    ledger = status.ledger
    data: dict[str, Any] = {"week": status.week, "state": status.state,
                            "exit_code": status.exit_code, "built": status.built,
                            "published": status.published,
                            "went_out": _went_out_json(status.sent)}
    if status.built:
        data.update({
            "items": status.items, "content_hash": status.content_hash,
            "folder": status.folder, "approved": status.approved,
            "approval_required": status.approval_required, "blocking": status.blocking,
            "archive_url": status.archive_url,
            "delivery": {
                "sent": ledger.get("sent", 0), "failed": status.permanent_failures,
                "to_retry": status.to_retry,
                "unconfirmed": ledger.get("unconfirmed", 0),
                "in_flight": ledger.get("sending", 0),
                "plain_fallback": status.plain_fallback,
                "runs": [r.get("shard") or "all" for r in status.reports],
                "missing_shards": list(status.missing_shards),
                "stopped": {str(r.get("file")): r["stopped"] for r in status.reports
                            if r.get("stopped")},
            },
            "unconfirmed": dict(status.unconfirmed),
            "feedback": _rates_json(status.rates) if status.rates else None,
        })
    data["last_issues"] = [{"issue": r.issue, "sent": r.sent, **_rates_json(r)}
                           for r in history]
    data["lines"] = {"complaint_rate": COMPLAINT_LINE, "bounce_rate": BOUNCE_LINE}
    data["list"] = {state: {layout: counts.get((state, layout), 0) for layout in LAYOUTS}
                    for state in STATUSES}
    return data


def _went_out(sent: SentIssue) -> str:
    """How the week went out: as built, or corrected (when, why, what it replaced)."""
    first = f"{sent.first_sent_at:%Y-%m-%d}"
    if sent.corrected_on is None:
        return f"as built, {sent.content_hash[:12]}, from {first}"
    return (f"corrected on {sent.corrected_on}: {sent.correction} (now {sent.content_hash[:12]}; "
            f"first sent as {sent.first_hash[:12]} from {first})")


def _went_out_json(sent: SentIssue | None) -> dict[str, Any] | None:
    if sent is None:
        return None
    return {"as": "corrected" if sent.corrected_on else "built",
            "content_hash": sent.content_hash, "first_hash": sent.first_hash,
            "first_sent_at": iso_z(sent.first_sent_at), "corrected_on": sent.corrected_on,
            "correction": sent.correction}


def _rates_json(rates: IssueRates) -> dict[str, Any]:
    return {"bounces": rates.bounces, "complaints": rates.complaints,
            "bounce_rate": round(rates.bounce_rate, 6),
            "complaint_rate": round(rates.complaint_rate, 6)}


def _rates(rates: IssueRates) -> str:
    return (f"bounces {rates.bounces} ({rates.bounce_rate:.2%}), complaints "
            f"{rates.complaints} ({rates.complaint_rate:.3%})")


def _list(counts: Mapping[tuple[str, str], int]) -> str:
    parts = []
    for status in STATUSES:
        total = sum(n for (s, _), n in counts.items() if s == status)
        if status == "active" and total:
            layouts = ", ".join(f"{layout} {counts[(status, layout)]}" for layout in LAYOUTS
                                if counts.get((status, layout)))
            parts.append(f"active {total} ({layouts})")
        else:
            parts.append(f"{status} {total}")
    return " · ".join(parts)


def gather(settings: Settings, week_id: str, store: DeliveryStore, archive: Archive, *,
           last: int = 6) -> tuple[WeekStatus, list[IssueRates], dict[tuple[str, str], int]]:
    """Read what ``status`` needs from the issue folder, the archive and the store."""
    folder = issue_folder(settings, week_id)
    published = set(archive.list_issues())
    sent = store.sent_issue(week_id)
    built = readable_built(folder, week_id)
    if built is None:
        week = WeekStatus(week=week_id, built=False, published=week_id in published,
                          sent=sent)
    else:
        reports = current_reports(read_reports(folder))
        ledger = store.ledger_counts(week_id)
        week = WeekStatus(
            week=week_id, built=True, items=len(built.issue.items),
            content_hash=built.content_hash, folder=str(folder),
            approved=is_approved(built), approval_required=settings.issue.require_approval,
            blocking=len(built.blocking()), published=week_id in published,
            archive_url=built.issue.archive_url, ledger=ledger,
            permanent_failures=sum(e.permanent for e in store.ledger(week_id, "failed").values()),
            reports=reports, missing_shards=missing_shards(reports),
            unconfirmed={sid: entry.reason or ""
                         for sid, entry in store.ledger(week_id, "unconfirmed").items()},
            rates=_issue_rates(store, week_id, ledger), sent=sent,
            differs_from_sent=refused(built.content_hash, built.issue.correction, sent))
    # Each issue's ledger is counted once (on DynamoDB a count reads the issue's rows).
    weeks = sorted(published | ({week_id} if week.built else set()))[-last:]
    history = [r for r in ((week.rates if w == week_id and week.rates else
                            _issue_rates(store, w)) for w in reversed(weeks)) if r.sent]
    return week, history, store.count_by()


def _issue_rates(store: DeliveryStore, week_id: str, ledger: Mapping[str, int] | None = None
                 ) -> IssueRates:
    feedback = store.feedback_counts(week_id)
    sent = (ledger if ledger is not None else store.ledger_counts(week_id)).get("sent", 0)
    return IssueRates(week_id, sent, feedback.get("bounce", 0), feedback.get("complaint", 0))
