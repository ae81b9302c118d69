"""Deliver: the list's send as ``send`` and ``run`` carry it out, around one
:class:`~pipeline.stages.send.Sender`: under the lease ``send:<week>`` (or its shard's),
each of N shards at ``max_rate/N`` so together they keep to the account's rate."""

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


@dataclass(frozen=True)
class SendRequest:
    """What a send is asked to do: ``send``'s and ``run``'s flags, or test copies (``to``)."""

    options: SendOptions = field(default_factory=SendOptions)
    allow_missing_translations: bool = False
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
    """Send ``built`` to the list (or a shard of it) through ``delivery``, which the caller
    opened and closes; ``progress`` makes the progress line for the list's size."""
    part = options.shard
    rate = delivery.rate
    if rate is not None and part is not None:
        rate /= part.count
    sender = Sender(built, store, delivery.transport, delivery.messages, rate=rate,
                    concurrency=concurrency, retry_seconds=retry_seconds)
    lost = "lost its lock to another run (this one stalled past its lease)"
    with hold(store, f"send:{built.id}" + (f":{part}" if part else ""),
              f"send {built.id}" + (f" shard {part}" if part else ""),
              on_lost=lambda: sender.request_stop(lost)):
        # A shard's size is known only by going through it.
        active = None if part else store.count_by_status().get("active", 0)
        with log.timed(_log, "send"):
            return sender.run(options, progress(active))


def keep_report(built: BuiltIssue, report: SendReport, shard: Shard | None = None) -> None:
    """Write ``send-report.json`` for a real send. After a stop a failed write is only a
    warning: the stop is what the operator must hear, and the ledger keeps the truth."""
    if report.dry_run:
        return
    try:
        write_report(built, report, shard)
    except OutputError as exc:
        if not report.stopped:
            raise
        _log.warning("%s", exc)
