"""Send: deliver a built issue to every active subscriber, exactly once each.

The guarantee, and how it is kept:

* **Nobody gets an issue twice.** Before a message is handed to the transport, the ledger
  *claims* (issue, subscriber) with an atomic insert; a re-run skips every claimed pair. The
  claim notes the moment its message is handed over, right before the transport call. A claim
  still ``sending`` when a run starts was left by a crash: if it was never handed over,
  nothing left and it is released (this run sends it); if it was, the message may have
  arrived: it becomes ``unconfirmed`` and is listed, never re-sent blindly (a timeout makes
  it unconfirmed too); ``--resend-unconfirmed`` sends those again, knowingly. A crash thus
  withholds at most one message per sending thread.
* **Nobody unconfirmed is forgotten.** Every report (``send-report.json``) lists every
  unconfirmed recipient the ledger holds for the issue, from whichever run, until they are
  resent.
* **Nobody is left out by a stop.** Throttling is retried with backoff and jitter; a stop
  (quota, paused account, Ctrl-C) releases the claims not yet handed over and exits 4, and
  the next run finishes the list. Temporary failures are retried by the next run too.
* **Unsubscribes win.** Each subscriber's status is read again right before their message.
* **What was proofed is what is sent.** Each subscriber gets the interest variant their
  layout and areas choose (:meth:`BuiltIssue.choose`) when the build rendered it; a reader
  whose areas changed after the build gets the plain layout instead, counted as
  ``plain_fallback`` in the report: nothing is rendered at send time.

Decide, then act: the gates are checked, every layout's headers prepared and the transport
opened before the first message goes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import datetime
from hashlib import sha256
from typing import IO, TYPE_CHECKING, Any

from pipeline import retry
from pipeline.config import Settings
from pipeline.core.addresses import UnsendableAddress, wire_address
from pipeline.core.message import Messages
from pipeline.core.pace import TokenBucket
from pipeline.errors import (
    BlockedError,
    OutputError,
    PermanentFailure,
    SendingStopped,
    StoppedError,
    TemporaryFailure,
    Unconfirmed,
)
from pipeline.model import LAYOUTS
from pipeline.output import write_file
from pipeline.stages.approve import is_approved
from pipeline.stages.built import BuiltIssue
from pipeline.transport import Transport
from pipeline.week import iso_z, now
from subscribers.shards import Shard

if TYPE_CHECKING:
    from types import FrameType

    from subscribers.model import LedgerEntry, Subscriber
    from subscribers.store import DeliveryStore

REPORT_FILE = "send-report.json"
INTERRUPTED = "interrupted (Ctrl-C)"
MAX_ATTEMPTS = 6
_log = logging.getLogger("newsletter.send")


def check_gates(built: BuiltIssue, settings: Settings, *,
                allow_missing_translations: bool = False) -> None:
    """Everything that must hold before the first message goes (exit 3 otherwise)."""
    blocking = built.blocking(allow_missing_translations=allow_missing_translations)
    if blocking:
        first = blocking[0]
        hint = (" (or --allow-missing-translations)"
                if all(p.code == "missing-language" for p in blocking) else "")
        raise BlockedError(f"{built.id} has {len(blocking)} blocking problem(s), first: "
                           f"{first.code}: {first.message}{hint}")
    if settings.issue.require_approval and not is_approved(built):
        raise BlockedError(f"{built.id} is not approved as built ({built.content_hash[:12]}); "
                           f"proof it, then run: newsletter approve --week {built.id}")


@dataclass
class SendReport:
    """What a run did; printed, and kept as send-report.json beside issue.json."""

    issue: str
    transport: str
    content_hash: str
    started_at: str = ""
    finished_at: str = ""
    duration_s: float = 0.0
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    unconfirmed: int = 0
    #: Why the run stopped early (resumable), or None when it went through the list.
    stopped: str | None = None
    dry_run: bool = False
    #: Subscriber ids (never addresses: the report may be shared) with the reason.
    failures: list[dict[str, Any]] = field(default_factory=list)
    unconfirmed_ids: list[str] = field(default_factory=list)
    #: ``I/N`` when the run sent one shard of the list.
    shard: str | None = None
    #: Readers given the plain layout because the build has no variant for their current
    #: interests (they changed them after the build; the next build renders it).
    plain_fallback: int = 0

    @property
    def rate(self) -> float:
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0

    def summary(self) -> str:
        head = "dry run: would send" if self.dry_run else "sent"
        part = f" (shard {self.shard})" if self.shard else ""
        line = (f"{self.issue}{part}: {head} {self.sent}, skipped {self.skipped}, failed "
                f"{self.failed}, unconfirmed {self.unconfirmed} in {self.duration_s:.1f} s "
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
    """A bar on a terminal, else a line every ``every`` messages (logged: a scheduler's log
    gets it timestamped)."""

    def __init__(self, total: int | None, stream: IO[str] | None = None, every: int = 100):
        self.total, self.every = total, every
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.done = 0
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def step(self, report: SendReport) -> None:
        with self.lock:
            self.done += 1
            if self.tty:
                self._bar(report)
            elif self.done % self.every == 0:
                _log.info("progress: %s", self._counts(report))  # timestamped

    def _counts(self, report: SendReport) -> str:
        total = f"/{self.total}" if self.total else ""
        rate = self.done / max(1e-9, time.monotonic() - self.started)
        return (f"{self.done}{total} done, sent {report.sent}, failed {report.failed}, "
                f"unconfirmed {report.unconfirmed}, {rate:.1f}/s")

    def _bar(self, report: SendReport) -> None:
        width = 30
        share = self.done / self.total if self.total else 0
        bar = "#" * int(share * width)
        self.stream.write(f"\r[{bar:<{width}}] {self._counts(report)}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.done:
            self.stream.write("\n")


@dataclass
class SendOptions:
    dry_run: bool = False
    limit: int | None = None
    resend_unconfirmed: bool = False
    #: Only this part of the list (``send --shard I/N``); None: everyone.
    shard: Shard | None = None


class Sender:
    """One run of ``send`` for one issue."""

    def __init__(self, built: BuiltIssue, store: DeliveryStore, transport: Transport,
                 messages: Messages, *, rate: float | None, concurrency: int,
                 clock: Callable[[], datetime] = now,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.built, self.store, self.transport, self.messages = built, store, transport, messages
        self.bucket = TokenBucket(rate, burst=max(1, concurrency), sleep=sleep)
        self.concurrency = concurrency
        self.clock, self.sleep = clock, sleep
        self.stop = threading.Event()
        self.stop_reason: str | None = None
        self.shard: Shard | None = None
        self.lock = threading.Lock()
        #: Recipients the ledger held as unconfirmed when this run started (earlier runs').
        self.unconfirmed_before: set[str] = set()

    def run(self, options: SendOptions, progress: Progress | None = None) -> SendReport:
        issue = self.built.id
        report = SendReport(issue, self.transport.name, self.built.content_hash,
                            started_at=iso_z(self.clock()), dry_run=options.dry_run,
                            shard=str(options.shard) if options.shard else None)
        self.shard = options.shard
        started = time.monotonic()
        if not options.dry_run:
            self.store.expire_in_flight(issue, self.clock(), shard=options.shard)
            self.unconfirmed_before = set(self._unconfirmed())
        try:
            if options.dry_run:
                self._dry_run(report, options)
            else:
                self._deliver(report, options, progress)
        finally:
            report.duration_s = round(time.monotonic() - started, 3)
            report.finished_at = iso_z(self.clock())
            report.stopped = report.stopped or self.stop_reason
            if progress:
                progress.close()
        if not options.dry_run:
            # Every unconfirmed recipient the ledger holds, not only this run's: an earlier
            # crash's are named in each report until someone resends them.
            report.unconfirmed_ids = self._unconfirmed()
            report.unconfirmed = len(report.unconfirmed_ids)
        return report

    def _unconfirmed(self) -> list[str]:
        """The issue's unconfirmed recipients (of this run's shard), by id."""
        return sorted(sid for sid in self.store.ledger(self.built.id, "unconfirmed")
                      if self.shard is None or sid in self.shard)

    def _candidates(self) -> Iterable[Subscriber]:
        active = self.store.iter_subscribers(status="active")
        if self.shard is None:
            return active
        return (subscriber for subscriber in active if subscriber.id in self.shard)

    def request_stop(self, reason: str) -> None:
        """Stop handing out messages (those in flight finish): another thread's word, such
        as the lease keeper's "the lock was lost"."""
        self._halt(reason)

    def _variant(self, subscriber: Subscriber, report: SendReport) -> str:
        """The rendering ``subscriber`` gets; a fallback to the plain layout is counted, and
        logged the first time (once per run, not once per reader)."""
        key, fallback = self.built.choose(subscriber.layout, subscriber.areas)
        if fallback:
            with self.lock:
                report.plain_fallback += 1
                first = report.plain_fallback == 1
            if first:
                _log.warning("%s: some readers' interests changed after the build; they get "
                             "the plain layout (counted as plain_fallback in the report)",
                             self.built.id)
        return key

    def _dry_run(self, report: SendReport, options: SendOptions) -> None:
        for subscriber in self._candidates():
            entry = self.store.ledger_entry(self.built.id, subscriber.id)
            if entry is None or self._may_retry(entry, options):
                if options.limit is not None and report.sent >= options.limit:
                    break
                self._variant(subscriber, report)
                report.sent += 1
            else:
                report.skipped += 1

    def _may_retry(self, entry: LedgerEntry, options: SendOptions) -> bool:
        if entry.status == "failed" and not entry.permanent:
            return True
        return entry.status == "unconfirmed" and options.resend_unconfirmed

    def _deliver(self, report: SendReport, options: SendOptions,
                 progress: Progress | None) -> None:
        with self._ctrl_c_stops():
            self._walk(report, options, progress)

    @contextlib.contextmanager
    def _ctrl_c_stops(self) -> Iterator[None]:
        """Ctrl-C asks the run to stop (the messages in flight finish, the rest stay
        unclaimed) instead of raising in the middle of a ledger write; a second Ctrl-C
        interrupts at once."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if self.stop.is_set() and self.stop_reason == INTERRUPTED:
                raise KeyboardInterrupt
            self._halt(INTERRUPTED)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _walk(self, report: SendReport, options: SendOptions,
              progress: Progress | None) -> None:
        handed = 0
        in_flight: set[Future[None]] = set()
        with ThreadPoolExecutor(max_workers=self.concurrency,
                                thread_name_prefix="send") as pool:
            for subscriber in self._candidates():
                if self.stop.is_set():
                    break
                if options.limit is not None and handed >= options.limit:
                    break
                while len(in_flight) >= 2 * self.concurrency:
                    done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                    _reraise(done)
                if not self._claim(subscriber.id, options):
                    if subscriber.id not in self.unconfirmed_before:  # counted at the end
                        with self.lock:
                            report.skipped += 1
                    continue
                handed += 1
                in_flight.add(pool.submit(self._one, subscriber.id, report, progress))
            done, _ = wait(in_flight)
            _reraise(done)

    def _claim(self, subscriber_id: str, options: SendOptions) -> bool:
        """One atomic claim: a new pair, a temporary failure to retry, or (when asked) an
        unconfirmed one. Never a read-then-write."""
        return self.store.claim(self.built.id, subscriber_id, self.clock(),
                                retry=options.resend_unconfirmed, retry_temporary=True)

    def _halt(self, reason: str) -> None:
        with self.lock:
            if not self.stop.is_set():
                self.stop_reason = reason
                self.stop.set()

    def _one(self, subscriber_id: str, report: SendReport, progress: Progress | None) -> None:
        """Send one claimed message; every way out of here settles the claim."""
        issue = self.built.id
        subscriber = self.store.get(subscriber_id)
        if self.stop.is_set() or subscriber is None or subscriber.status != "active":
            self.store.release(issue, subscriber_id)
            with self.lock:
                report.skipped += 1
            return
        message = self.messages.build(subscriber.email, subscriber.id, subscriber.layout,
                                      self.clock(), variant=self._variant(subscriber, report))
        handed_over = False

        def attempt() -> str:
            nonlocal handed_over
            self.bucket.acquire()
            try:
                # From here the message may leave: noted first, so that a crash from now
                # on withholds it as unconfirmed, and one before releases it.
                handed_over = True
                self.store.mark_handed_over(issue, subscriber_id)
                return self.transport.send(message)
            except TemporaryFailure:
                # Not taken: a crash while waiting to retry must not withhold it.
                self.store.mark_handed_over(issue, subscriber_id, False)
                handed_over = False
                raise

        try:
            try:
                message_id = retry.call(
                    attempt, retry_on=TemporaryFailure, attempts=MAX_ATTEMPTS,
                    wait=lambda n, exc: exc.retry_after or retry.backoff(n),
                    stop=self.stop.is_set, sleep=self.sleep)
            except retry.GaveUp as gave_up:
                self.store.mark_failed(issue, subscriber_id, f"gave up after "
                                       f"{gave_up.attempts} attempts: {gave_up.last}",
                                       False, self.clock())
                self._count(report, "failed", subscriber_id,
                            _without(str(gave_up.last), subscriber.email), progress)
                return
            self.store.mark_sent(issue, subscriber_id, message_id, self.clock())
            self._count(report, "sent", subscriber_id, None, progress)
        except PermanentFailure as exc:
            self.store.mark_failed(issue, subscriber_id, str(exc), True, self.clock())
            self._count(report, "failed", subscriber_id, _without(str(exc), subscriber.email),
                        progress)
        except Unconfirmed as exc:
            self.store.mark_unconfirmed(issue, subscriber_id, str(exc), self.clock())
            self._count(report, "unconfirmed", subscriber_id, str(exc), progress)
        except SendingStopped as exc:
            # The account refused before taking it: nothing went out, the next run sends it.
            self.store.release(issue, subscriber_id)
            self._halt(str(exc))
        except BaseException:
            if handed_over:
                self.store.mark_unconfirmed(issue, subscriber_id, "internal error during "
                                            "the transport call", self.clock())
            else:
                self.store.release(issue, subscriber_id)
            self._halt("internal error")
            raise

    def _count(self, report: SendReport, outcome: str, subscriber_id: str,
               reason: str | None, progress: Progress | None) -> None:
        with self.lock:
            setattr(report, outcome, getattr(report, outcome) + 1)
            if outcome == "failed":
                report.failures.append({"subscriber": subscriber_id, "reason": reason})
            elif outcome == "unconfirmed":
                report.unconfirmed_ids.append(subscriber_id)
        if progress:
            progress.step(report)


def _without(reason: str, address: str) -> str:
    """A server's reason with the recipient's address taken out (as the list keeps it, and
    in the IDNA form a server may quote back): the report holds ids only."""
    forms = {address}
    with contextlib.suppress(UnsendableAddress):
        forms.add(wire_address(address).idna)
    for form in forms:
        reason = re.sub(re.escape(form), "<recipient>", reason, flags=re.IGNORECASE)
    return reason


def _reraise(done: Iterable[Future[None]]) -> None:
    for future in done:
        exc = future.exception()
        if exc is not None:
            raise exc


def send_tests(built: BuiltIssue, messages: Messages, transport: Transport, address: str,
               layouts: Iterable[str] = LAYOUTS, clock: Callable[[], datetime] = now
               ) -> list[tuple[str, str]]:
    """Test copies through the real path and headers, outside the ledger: each of
    ``layouts``, then each interest variant of those layouts; (layout or variant key, id)."""
    fake_id = sha256(address.lower().encode()).hexdigest()[:24]
    chosen = list(layouts)
    wanted = [(layout, layout) for layout in chosen]
    wanted += [(v.variant.layout, v.key) for v in built.variants if v.variant.layout in chosen]
    sent = []
    for layout, key in wanted:
        message = messages.build(address, fake_id, layout, clock(), variant=key, test=True,
                                 tags={"issue": built.id, "kind": "test"})
        sent.append((key, transport.send(message)))
    return sent


def report_file(shard: Shard | None) -> str:
    """``send-report.json``, or ``send-report.shard-2-of-3.json`` for one shard's part
    (``newsletter status`` merges the parts)."""
    return REPORT_FILE if shard is None else f"send-report.{shard.slug}.json"


def write_report(built: BuiltIssue, report: SendReport, shard: Shard | None = None) -> None:
    """Keep the report beside issue.json (temp file, then rename); OutputError if the
    folder cannot take it (the disk the outbox filled, say), with no temp file left."""
    try:
        write_file(built.folder / report_file(shard), report.to_json(), prefix=".send-report-")
    except OSError as exc:
        raise OutputError(f"cannot write {built.folder / report_file(shard)}: "
                          f"{exc.strerror or exc}") from exc


def stop_error(report: SendReport) -> StoppedError:
    return StoppedError(f"{report.issue}: stopped ({report.stopped}); sent {report.sent} this "
                        "run; run the same command again to finish")
