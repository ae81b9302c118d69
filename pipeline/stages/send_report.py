"""What a send did: the report (``send-report.json``), the progress line, and the error a
run ends with (:func:`stop_error`: 4 to run again, 2 to fix the configuration first)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any

from pipeline.errors import NewsletterError, OutputError, SendingMisconfigured, StoppedError
from pipeline.output import write_file

if TYPE_CHECKING:
    from pipeline.stages.built import BuiltIssue
    from subscribers.shards import Shard

__all__ = ["REPORT_FILE", "Progress", "SendReport", "report_file", "stop_error",
           "write_report"]

REPORT_FILE = "send-report.json"
_log = logging.getLogger("newsletter.send")


@dataclass
class SendReport:
    """What a run did; printed, and kept as send-report.json beside issue.json.

    The counts add up to the list walked: ``sent`` this run; ``skipped``, done by an
    earlier run; ``failed`` for good this run (``bounced`` of them: the mailbox is gone);
    ``temporary``, still refused for now (the next run retries); ``unconfirmed``, every
    recipient the ledger holds that may or may not have got it, from whichever run;
    ``released``, let go unsent as the run stopped; ``left``, unsubscribed meanwhile.
    """

    issue: str
    transport: str
    content_hash: str
    started_at: str = ""
    finished_at: str = ""
    duration_s: float = 0.0
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    temporary: int = 0
    unconfirmed: int = 0
    released: int = 0
    left: int = 0
    bounced: int = 0
    #: Why the run stopped early, or None when it went through the list.
    stopped: str | None = None
    #: 4 (run again), or 2 for a refusal no rerun cures (a login refused).
    stop_exit: int = 4
    dry_run: bool = False
    #: Subscriber ids (never addresses: the report may be shared), reason, permanent, bounced.
    failures: list[dict[str, Any]] = field(default_factory=list)
    unconfirmed_ids: list[str] = field(default_factory=list)
    #: ``I/N`` when the run sent one shard of the list.
    shard: str | None = None
    #: Readers given the plain layout: their interests changed after the build.
    plain_fallback: int = 0
    #: Seconds spent retrying temporary failures after the first pass.
    retried_for_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0

    def summary(self) -> str:
        head = "dry run: would send" if self.dry_run else "sent"
        part = f" (shard {self.shard})" if self.shard else ""
        # The first four keep the order scripts read; the rest say what else happened.
        counts = [f"{head} {self.sent}", f"skipped {self.skipped}", f"failed {self.failed}",
                  f"unconfirmed {self.unconfirmed}",
                  f"temporary {self.temporary}" + (" (to retry)" if self.temporary else "")]
        counts += [said for n, said in (
            (self.bounced, f"bounced {self.bounced} (of the failed)"),
            (self.released, f"released {self.released} (the run was stopping)"),
            (self.left, f"left the list {self.left}")) if n]
        line = (f"{self.issue}{part}: {', '.join(counts)} in {self.duration_s:.1f} s "
                f"({self.rate:.1f}/s) via {self.transport}")
        if self.plain_fallback:
            line += (f"; {self.plain_fallback} got the plain layout (interests changed since "
                     "the build)")
        return line + (f"; stopped: {self.stopped}" if self.stopped else "")

    def to_json(self) -> bytes:
        data = asdict(self)
        data["rate_per_s"] = round(self.rate, 2)
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


class Progress:
    """A bar on a terminal, else a logged (timestamped) line every 100 messages."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.stream: IO[str] = sys.stderr
        self.tty = self.stream.isatty()
        self.done = 0
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def step(self, report: SendReport) -> None:
        with self.lock:
            self.done += 1
            total = f"/{self.total}" if self.total else ""
            rate = self.done / max(1e-9, time.monotonic() - self.started)
            counts = (f"{self.done}{total} done, sent {report.sent}, failed {report.failed}, "
                      f"unconfirmed {report.unconfirmed}, {rate:.1f}/s")
            if self.tty:
                bar = "#" * int(self.done / self.total * 30) if self.total else ""
                self.stream.write(f"\r[{bar:<30}] {counts}")
                self.stream.flush()
            elif self.done % 100 == 0:
                _log.info("progress: %s", counts)  # timestamped

    def close(self) -> None:
        if self.tty and self.done:
            self.stream.write("\n")


def report_file(shard: Shard | None) -> str:
    """``send-report.json``, or ``send-report.shard-2-of-3.json`` for one shard's part."""
    return REPORT_FILE if shard is None else f"send-report.{shard.slug}.json"


def write_report(built: BuiltIssue, report: SendReport, shard: Shard | None = None) -> None:
    """Keep the report beside issue.json; OutputError (no temp file left) if it cannot."""
    try:
        write_file(built.folder / report_file(shard), report.to_json(), prefix=".send-report-")
    except OSError as exc:
        raise OutputError(f"cannot write {built.folder / report_file(shard)}: "
                          f"{exc.strerror or exc}") from exc


def stop_error(report: SendReport) -> NewsletterError | None:
    """The error a finished run ends with: its stop, else the temporary failures left;
    None when the list went through (permanent failures and unconfirmed are results)."""
    done = f"sent {report.sent} this run"
    left = (f"; {report.temporary} refused for now" if report.temporary else "")
    if report.stopped and report.stop_exit == 2:
        return SendingMisconfigured(f"{report.issue}: stopped: {report.stopped}; {done}{left}; "
                                    "fix the configuration, then run the same command again")
    if report.stopped:
        return StoppedError(f"{report.issue}: stopped ({report.stopped}); {done}{left}; run "
                            "the same command again to finish")
    if report.temporary:
        last = next(f["reason"] for f in reversed(report.failures) if not f["permanent"])
        return StoppedError(f"{report.issue}: {report.temporary} recipient(s) still refused "
                            f"for now after {report.retried_for_s:.0f} s of retries (last: "
                            f"{last}); {done}; run the same command again to retry them")
    return None
