"""Deliver: the list's send as ``send`` and ``run`` carry it out, around one
:class:`~pipeline.stages.send.Sender`.

* **One run per issue, or per shard.** The send holds the lease ``send:<week>`` (with
  ``--shard``, ``send:<week>:<i/n>``) for its whole walk; a run that loses it (stalled past
  its lease while another took over) stops, and the next run finishes the list.
* **The account's rate is shared.** N shards each send at ``max_rate/N``, so together they
  keep to what the account allows.
* **The stop is what is heard.** :func:`keep_report` writes ``send-report.json`` after every
  real send; when that write fails after a stop, the stop (exit 4) is still what the caller
  raises: the ledger keeps the truth the report would have summed up.

Its parts come in as arguments (the store, the checked :class:`Delivery`), so the stage
never opens an adapter; the command line opens them and says what happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline import log
from pipeline.errors import OutputError
from pipeline.model import LAYOUTS
from pipeline.stages.lock import hold
from pipeline.stages.send import RETRY_SECONDS, Sender, SendOptions
from pipeline.stages.send_report import Progress, SendReport, write_report

if TYPE_CHECKING:
    from pipeline.stages.built import BuiltIssue
    from pipeline.stages.preflight import Delivery
    from subscribers.shards import Shard
    from subscribers.store import SubscriberStore

__all__ = ["SendRequest", "keep_report", "send_list"]

_log = logging.getLogger("newsletter.send")

LOST = "lost its lock to another run (this one stalled past its lease)"


@dataclass(frozen=True)
class SendRequest:
    """What a send is asked to do: ``send``'s and ``run``'s flags as a record, and the test
    copies of ``send --to`` and ``preview --to``."""

    options: SendOptions = field(default_factory=SendOptions)
    allow_missing_translations: bool = False
    #: Send a week that has not ended yet (``--allow-partial-week``).
    allow_partial_week: bool = False
    #: Test copies to this address (outside the ledger), not the list.
    to: str | None = None
    #: With ``to``: the layouts copied.
    layouts: tuple[str, ...] = LAYOUTS


def send_list(built: BuiltIssue, delivery: Delivery, store: SubscriberStore,
              options: SendOptions, *, concurrency: int,
              retry_seconds: float = RETRY_SECONDS,
              progress: Callable[[int | None], Progress | None] = lambda total: None
              ) -> SendReport:
    """Send ``built`` to the list (or ``options.shard`` of it) through ``delivery``,
    already checked and opened by the caller, who closes it. ``progress`` makes the
    progress line for the number of active subscribers (None for a shard: its size is
    known only by going through it). ``retry_seconds`` bounds the retries of temporary
    failures after the first pass. The caller raises
    :func:`~pipeline.stages.send_report.stop_error` for a report that stopped or left
    temporary failures."""
    part = options.shard
    rate = delivery.rate
    if rate is not None and part is not None:
        rate /= part.count  # the account's rate is divided among shards
    name = f"send:{built.id}" + (f":{part}" if part else "")
    what = f"send {built.id}" + (f" shard {part}" if part else "")
    sender = Sender(built, store, delivery.transport, delivery.messages, rate=rate,
                    concurrency=concurrency, retry_seconds=retry_seconds)
    with hold(store, name, what, on_lost=lambda: sender.request_stop(LOST)):
        # A shard's size is known only by going through it: no count of the whole list then.
        active = None if part is not None else store.count_by_status().get("active", 0)
        with log.timed(_log, "send"):
            return sender.run(options, progress(active))


def keep_report(built: BuiltIssue, report: SendReport, shard: Shard | None = None) -> None:
    """Write ``send-report.json`` for a real send. A failed write is raised, except after a
    stop: the stop (exit 4) is what the operator must hear, and the ledger keeps the truth
    that the report would have summed up, so the failure is a warning then."""
    if report.dry_run:
        return
    try:
        write_report(built, report, shard)
    except OutputError as exc:
        if not report.stopped:
            raise
        _log.warning("%s", exc)
