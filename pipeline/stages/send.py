"""Send: deliver a built issue to every active subscriber, exactly once each.

* **Nobody gets an issue twice.** The ledger claims (issue, subscriber) atomically before
  the transport call and notes when the message is handed over. A crash's claim that was
  never handed over is released; one that was becomes ``unconfirmed``: listed in every
  report until ``--resend-unconfirmed`` sends it again, knowingly.
* **Nobody is left out by a stop.** A stop (quota, paused account, Ctrl-C, lost lock)
  releases what was not handed over and exits 4; a refusal no rerun cures exits 2.
* **A relay's "not now" is waited out.** A temporary refusal pauses every thread (a relay's
  limit is about us); what is still refused after the first pass is retried in rounds for
  up to ``retry_seconds``, then counted ``temporary`` (exit 4, retried by the next run).
* **A mailbox that does not exist gets no later issue**: it is marked bounced.
* **Unsubscribes win**: each reader's status is read again right before their message.
* **A week goes out as one issue** (:func:`pipeline.stages.freeze.note_send`), and **what
  was proofed is what is sent**: nothing is rendered at send time; a reader whose areas
  changed since the build gets the plain layout (``plain_fallback``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import TYPE_CHECKING

from pipeline.config import DeliverySettings, Settings
from pipeline.core.email.addresses import redact_address
from pipeline.core.email.message import Messages
from pipeline.errors import (
    BlockedError,
    PermanentFailure,
    SendingStopped,
    TemporaryFailure,
    Unconfirmed,
)
from pipeline.model import LAYOUTS
from pipeline.stages import freeze
from pipeline.stages.approve import is_approved
from pipeline.stages.built import BuiltIssue
from pipeline.stages.invocation import command
from pipeline.stages.pace import Cooldown, TokenBucket
from pipeline.stages.send_report import Progress, SendReport
from pipeline.transport import Transport
from pipeline.week import iso_z, now
from subscribers.bounces import mark_bounced
from subscribers.shards import Shard

if TYPE_CHECKING:
    from types import FrameType

    from subscribers.model import Subscriber
    from subscribers.store import DeliveryStore

INTERRUPTED = "interrupted (Ctrl-C)"
#: Tries per message in the first pass; then it waits for the rounds at the end, so one
#: relay limit does not hold a worker for minutes.
MAX_ATTEMPTS = 3
#: The default of ``[delivery] retry_seconds`` (a relay's minute windows pass many times).
RETRY_SECONDS: float = DeliverySettings.retry_seconds
#: A transport refusing everything gets at least this long (a minute window passes once).
MIN_REFUSING_SECONDS = 90.0
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
                           f"proof it, then run: {command('approve', '--week', built.id)}")


@dataclass
class SendOptions:
    dry_run: bool = False
    limit: int | None = None
    resend_unconfirmed: bool = False
    #: Only this part of the list (``send --shard I/N``); None: everyone.
    shard: Shard | None = None


class Sender:
    """One run of ``send`` for one issue; ``sleep`` and ``monotonic`` are for tests."""

    def __init__(self, built: BuiltIssue, store: DeliveryStore, transport: Transport,
                 messages: Messages, *, rate: float | None, concurrency: int,
                 retry_seconds: float = RETRY_SECONDS,
                 sleep: Callable[[float], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.built, self.store, self.transport, self.messages = built, store, transport, messages
        self.stop = threading.Event()
        self.sleep = sleep or self._nap
        self.bucket = TokenBucket(rate, burst=max(1, concurrency), clock=monotonic,
                                  sleep=self.sleep)
        self.cooldown = Cooldown(clock=monotonic, sleep=self.sleep)
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self.clock, self.monotonic = now, monotonic
        self.stop_reason: str | None = None
        self.stop_exit = 4
        self.shard: Shard | None = None
        self.lock = threading.Lock()
        #: Unconfirmed in the ledger when this run started (earlier runs').
        self.unconfirmed_before: set[str] = set()
        #: Refused for now this run, with the reason: retried after the first pass.
        self.deferred: dict[str, str] = {}
        self.first_pass = True
        #: This run's report (counted under ``lock``) and progress line, set by :meth:`run`.
        self.report: SendReport
        self.progress: Progress | None = None

    def _nap(self, seconds: float) -> None:
        """A wait that ends early when the run is asked to stop."""
        self.stop.wait(seconds)

    def run(self, options: SendOptions, progress: Progress | None = None) -> SendReport:
        issue = self.built.id
        report = self.report = SendReport(
            issue, self.transport.name, self.built.content_hash,
            started_at=iso_z(self.clock()), dry_run=options.dry_run,
            shard=str(options.shard) if options.shard else None)
        self.shard, self.progress = options.shard, progress
        freeze.note_send(self.built, self.store, self.clock(), dry_run=options.dry_run)
        started = time.monotonic()
        if not options.dry_run:
            self.store.expire_in_flight(issue, self.clock(), shard=options.shard)
        self.unconfirmed_before = set(self._unconfirmed())
        resent: set[str] = set()
        try:
            if options.dry_run:
                resent = self._dry_run(options)
            else:
                self._deliver(options)
        finally:
            report.duration_s = round(time.monotonic() - started, 3)
            report.finished_at = iso_z(self.clock())
            report.stopped = self.stop_reason
            report.stop_exit = self.stop_exit
            if progress:
                progress.close()
        # Every unconfirmed recipient the ledger holds, not only this run's: an earlier
        # crash's are named in each report until someone resends them.
        report.unconfirmed_ids = (sorted(self.unconfirmed_before - resent)
                                  if options.dry_run else self._unconfirmed())
        report.unconfirmed = len(report.unconfirmed_ids)
        return report

    def _unconfirmed(self) -> list[str]:
        return sorted(sid for sid in self.store.ledger(self.built.id, "unconfirmed")
                      if self.shard is None or sid in self.shard)

    def _candidates(self) -> Iterable[Subscriber]:
        return (subscriber for subscriber in self.store.iter_subscribers(status="active")
                if self.shard is None or subscriber.id in self.shard)

    def request_stop(self, reason: str, exit_code: int = 4) -> None:
        """Stop handing out messages (those in flight finish); the first reason wins."""
        with self.lock:
            if not self.stop.is_set():
                self.stop_reason = reason
                self.stop_exit = exit_code
                self.stop.set()

    def _variant(self, subscriber: Subscriber) -> str:
        """The rendering ``subscriber`` gets; a plain-layout fallback is counted, logged once."""
        key, fallback = self.built.choose(subscriber.layout, subscriber.areas)
        if fallback:
            with self.lock:
                self.report.plain_fallback += 1
                first = self.report.plain_fallback == 1
            if first:
                _log.warning("%s: some readers' interests changed after the build; they get "
                             "the plain layout (counted as plain_fallback in the report)",
                             self.built.id)
        return key

    def _dry_run(self, options: SendOptions) -> set[str]:
        """Count as the real run would, without claiming anything; return the unconfirmed
        recipients that ``--resend-unconfirmed`` would send."""
        report = self.report
        resent: set[str] = set()
        for subscriber in self._candidates():
            entry = self.store.ledger_entry(self.built.id, subscriber.id)
            if entry is not None and not (
                    (entry.status == "failed" and not entry.permanent)
                    or (entry.status == "unconfirmed" and options.resend_unconfirmed)):
                if entry.status in ("sent", "failed"):
                    report.skipped += 1
                continue  # unconfirmed: listed at the end; sending: a crashed run's
            if options.limit is not None and report.sent >= options.limit:
                break
            if entry is not None and entry.status == "unconfirmed":
                resent.add(subscriber.id)
            self._variant(subscriber)
            report.sent += 1
        return resent

    def _deliver(self, options: SendOptions) -> None:
        with self._ctrl_c_stops(), ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="send") as pool:
            self._send_each(pool, options)
            self.first_pass = False
            self._retry_deferred(pool)
        # What is still refused for now stays a temporary failure in the ledger.
        for subscriber_id, reason in sorted(self.deferred.items()):
            with self._counting() as report:
                report.temporary += 1
                report.failures.append({"subscriber": subscriber_id, "reason": reason,
                                        "permanent": False, "bounced": False})

    @contextlib.contextmanager
    def _ctrl_c_stops(self) -> Iterator[None]:
        """Ctrl-C stops the run rather than raising in the middle of a ledger write; a
        second Ctrl-C interrupts at once."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if self.stop.is_set() and self.stop_reason == INTERRUPTED:
                raise KeyboardInterrupt
            self.request_stop(INTERRUPTED)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _send_each(self, pool: ThreadPoolExecutor, options: SendOptions) -> None:
        """Every active subscriber once, in id order, ``MAX_ATTEMPTS`` tries each."""
        handed = 0
        in_flight: set[Future[None]] = set()
        for subscriber in self._candidates():
            if self.stop.is_set() or (options.limit is not None and handed >= options.limit):
                break
            while len(in_flight) >= 2 * self.concurrency:
                done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                _reraise(done)
            # One atomic claim (never a read-then-write): new, to retry, or asked to resend.
            if not self.store.claim(self.built.id, subscriber.id, self.clock(),
                                    retry=options.resend_unconfirmed, retry_temporary=True):
                if subscriber.id not in self.unconfirmed_before:  # listed at the end
                    with self.lock:
                        self.report.skipped += 1
                continue
            handed += 1
            in_flight.add(pool.submit(self._one, subscriber.id, MAX_ATTEMPTS))
        done, _ = wait(in_flight)
        _reraise(done)

    def _retry_deferred(self, pool: ThreadPoolExecutor) -> None:
        """Try the temporary failures again in rounds, each after the shared cooldown, until
        none is left or the next wait would pass ``retry_seconds``: a per-minute relay limit
        outlasts the first pass's quick retries."""
        started = self.monotonic()
        while self.deferred and self.retry_seconds > 0 and not self.stop.is_set():
            pause = self.cooldown.remaining()
            if self.monotonic() - started + pause > self.retry_seconds:
                break
            if pause:
                _log.info("%s: %d refused for now; trying them again in %.0f s",
                          self.built.id, len(self.deferred), pause)
            self.cooldown.wait(self.stop.is_set)
            with self.lock:
                batch, self.deferred = self.deferred, {}
            in_flight = []
            for subscriber_id, reason in batch.items():
                if self.stop.is_set() or not self.store.claim(
                        self.built.id, subscriber_id, self.clock(), retry_temporary=True):
                    with self.lock:  # this round's workers write it too
                        self.deferred.setdefault(subscriber_id, reason)
                    continue
                in_flight.append(pool.submit(self._one, subscriber_id, 1))
            done, _ = wait(in_flight)
            _reraise(done)
        self.report.retried_for_s = round(self.monotonic() - started, 3)

    def _one(self, subscriber_id: str, attempts: int) -> None:
        """Send one claimed message; every way out leaves the claim sent, failed,
        unconfirmed or released."""
        issue = self.built.id
        subscriber = self.store.get(subscriber_id)
        if self.stop.is_set():
            self._release(subscriber_id)
            return
        if subscriber is None or subscriber.status != "active":
            self._release(subscriber_id, left=True)
            return
        message = self.messages.build(subscriber.email, subscriber.id, subscriber.layout,
                                      self.clock(), variant=self._variant(subscriber))
        handed_over = False
        tries = 0
        try:
            while True:
                # A relay's limit is about us: every try first waits out the shared pause.
                self.cooldown.wait(self.stop.is_set)
                self.bucket.acquire()
                if self.stop.is_set():  # while it waited for its turn
                    self._release(subscriber_id)
                    return
                tries += 1
                # From here the message may leave: noted first, so that a crash from now
                # on withholds it as unconfirmed, and one before releases it.
                handed_over = True
                self.store.mark_handed_over(issue, subscriber_id)
                try:
                    message_id = self.transport.send(message)
                except TemporaryFailure as failure:
                    # Not taken: a crash while waiting to retry must not withhold it.
                    self.store.mark_handed_over(issue, subscriber_id, False)
                    handed_over = False
                    self._pause(failure)
                    if tries >= attempts or self.stop.is_set():
                        raise
                    continue
                self.cooldown.succeeded()
                break
        except TemporaryFailure as failure:
            self.store.mark_failed(issue, subscriber_id, f"temporary: {failure}", False,
                                   self.clock())
            with self.lock:
                self.deferred[subscriber_id] = redact_address(str(failure), subscriber.email)
            return
        except PermanentFailure as exc:
            self._failed_for_good(subscriber_id, subscriber.email, exc)
            return
        except Unconfirmed as exc:
            self.store.mark_unconfirmed(issue, subscriber_id, str(exc), self.clock())
            with self._counting() as report:  # for the progress line: run() lists the ledger's
                report.unconfirmed += 1
            return
        except SendingStopped as exc:
            # The account refused before taking it: nothing went out, the next run sends it
            # (or, for a refusal no rerun cures, the next run after the fix).
            self._release(subscriber_id)
            self.request_stop(str(exc), exc.exit_code)
            return
        except BaseException:
            if handed_over:
                self.store.mark_unconfirmed(issue, subscriber_id, "internal error during "
                                            "the transport call", self.clock())
            else:
                self.store.release(issue, subscriber_id)
            self.request_stop("internal error", 1)
            raise
        self.store.mark_sent(issue, subscriber_id, message_id, self.clock())
        with self._counting() as report:
            report.sent += 1

    def _failed_for_good(self, subscriber_id: str, email: str, exc: PermanentFailure) -> None:
        """A refusal for good; one saying the mailbox does not exist marks it bounced."""
        failed_at = self.clock()
        self.store.mark_failed(self.built.id, subscriber_id, str(exc), True, failed_at)
        if exc.bounce:
            mark_bounced(self.store, subscriber_id, self.built.id, failed_at)
        with self._counting() as report:
            report.failed += 1
            report.bounced += exc.bounce
            report.failures.append({"subscriber": subscriber_id,
                                    "reason": redact_address(str(exc), email),
                                    "permanent": True, "bounced": exc.bounce})

    def _pause(self, failure: TemporaryFailure) -> None:
        """Start (or join) the shared pause after a temporary failure. A transport that
        refused everything for longer than ``retry_seconds`` in the first pass stops the
        run, resumably, rather than creeping through the list a minute per message."""
        pause = self.cooldown.failed(failure.retry_after)
        refusing = self.cooldown.failing_for() + pause
        if self.first_pass and refusing > max(self.retry_seconds, MIN_REFUSING_SECONDS):
            self.request_stop(f"the transport refused every message for {refusing:.0f} s "
                              f"(last: {redact_address(str(failure), failure.recipient or '')})")

    def _release(self, subscriber_id: str, *, left: bool = False) -> None:
        """Let a claim go unsent: the run is stopping, or the reader ``left`` the list."""
        self.store.release(self.built.id, subscriber_id)
        with self.lock:
            if left:
                self.report.left += 1
            else:
                self.report.released += 1

    @contextlib.contextmanager
    def _counting(self) -> Iterator[SendReport]:
        """The report, to count one recipient's outcome in; then the progress line moves."""
        with self.lock:
            yield self.report
        if self.progress:
            self.progress.step(self.report)


def _reraise(done: Iterable[Future[None]]) -> None:
    for future in done:
        future.result()


def send_tests(built: BuiltIssue, messages: Messages, transport: Transport, address: str,
               layouts: Iterable[str] = LAYOUTS, clock: Callable[[], datetime] = now
               ) -> list[tuple[str, str]]:
    """Test copies of ``layouts`` and their variants, outside the ledger: (key, message id)."""
    fake_id = sha256(address.lower().encode()).hexdigest()[:24]
    chosen = list(layouts)
    wanted = [(layout, layout) for layout in chosen]
    wanted += [(v.variant.layout, v.key) for v in built.variants if v.variant.layout in chosen]
    tags = {"issue": built.id, "kind": "test"}
    return [(key, transport.send(messages.build(address, fake_id, layout, clock(),
                                                variant=key, test=True, tags=tags)))
            for layout, key in wanted]
