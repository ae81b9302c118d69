"""Independent pure work spread over the machine's cores, in forked processes.

A 200-review week renders four layouts (and each interest variant) of about 0.1 s each, one
after the other, while the second core of a two-core machine waits. :func:`fork_map` forks a
child per extra core; the parent keeps a share of the jobs itself, each child computes its
share and sends the results back pickled, and the parent puts them in the jobs' order, so the
answer is the one ``[fn(job) for job in jobs]`` gives, byte for byte.

Forking copies the parent's memory, so nothing is pickled on the way in (a Jinja environment,
compiled templates and the issue's records are simply there in the child); only the results
come back. It is safe only where the parent has no other thread (a forked child gets every
lock another thread held, held for ever), so with another thread alive, on a platform
without ``fork``, on one core or for a single job it is the plain loop.

Nothing a child does can change the answer or hide an error: a share whose child raised,
died or sent something unreadable is computed again in the parent, where an error is raised
with its own traceback, as the plain loop would raise it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.core.spread import one_by_one

if TYPE_CHECKING:
    import multiprocessing.process
    from multiprocessing.connection import Connection

_log = logging.getLogger("newsletter.parallel")

J = TypeVar("J")
R = TypeVar("R")


#: The plain loop: every job in this process, one after the other (the core's own).
serial = one_by_one


def cores() -> int:
    """The cores this process may run on (its CPU affinity, where the platform says)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether forking is safe here: a ``fork`` start method and no other thread."""
    import multiprocessing  # here: a command that never forks does not import it

    return ("fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1)


def fork_map(fn: Callable[[J], R], jobs: Sequence[J], /) -> list[R]:
    """``[fn(job) for job in jobs]``, the jobs shared among the cores (see the module): a
    :class:`pipeline.core.spread.Spread`."""
    workers = min(cores(), len(jobs))
    if workers < 2 or not can_fork():
        return serial(fn, jobs)
    return _shared(fn, jobs, workers)


def _shared(fn: Callable[[J], R], jobs: Sequence[J], workers: int) -> list[R]:
    """Share ``k`` of the jobs is ``jobs[k::workers]``: interleaved, so jobs that cost
    alike (a layout and its mirror) go to different cores. Share 0 stays here."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    children: list[tuple[int, multiprocessing.process.BaseProcess, Connection]] = []
    results: list[R | None] = [None] * len(jobs)
    # The objects alive now are moved out of the collector's sight: a collection in a child
    # would otherwise touch every one of them and copy each page it sits on.
    gc.freeze()
    try:
        for share in range(1, workers):
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(fn, jobs[share::workers], sender),
                                    daemon=True)
            child.start()
            sender.close()
            children.append((share, child, receiver))
        results[0::workers] = serial(fn, jobs[0::workers])
        for share, _, receiver in children:
            part: list[R] | None = _received(receiver)
            if part is None:
                _log.debug("share %d came back empty: computed here", share)
                part = serial(fn, jobs[share::workers])
            results[share::workers] = part
    finally:
        gc.unfreeze()
        for _, process, receiver in children:
            receiver.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
    return results  # type: ignore[return-value]  # every slot is filled above


def _received(receiver: Connection) -> list[Any] | None:
    """The child's results, or None when it raised, died or sent something unreadable."""
    try:
        kind, part = receiver.recv()
    except (EOFError, OSError, pickle.UnpicklingError, ValueError, TypeError):
        return None
    return part if kind == "ok" else None


def _child(fn: Callable[[J], R], jobs: Sequence[J], sender: Connection) -> None:
    """In the child: compute the share and send it; an error sends only that it failed (the
    parent computes the share again and raises it there)."""
    gc.disable()  # a short life: what it allocates goes with it
    try:
        reply: tuple[str, object] = ("ok", serial(fn, jobs))
    except BaseException:  # the parent raises it again, with its own traceback
        reply = ("failed", None)
    with contextlib.suppress(Exception):
        sender.send(reply)
    sender.close()
