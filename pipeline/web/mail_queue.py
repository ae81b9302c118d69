"""Work done after the answer has gone: the sign-up's store work and mail.

The person was told to check their inbox, so work that fails for now is tried again a few
times, with growing waits, and one that never succeeds is logged as an error naming the
sign-up by when it was asked (never by its address): nobody else would notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from pipeline.errors import PermanentFailure, TransportError, Unconfirmed
from pipeline.retry import backoff
from subscribers.errors import InvalidAddress, StoreError

__all__ = ["MailQueue", "carry_out"]

log = logging.getLogger("newsletter.app")

#: Tries after the first, and the first wait (doubling, with jitter): about half a minute in
#: all, enough for a relay or a store that restarts.
RETRIES = 4
FIRST_WAIT = 2.0


class MailQueue:
    """Sign-up work run as a response's background task; a job that fails for now is tried
    ``retries`` more times, waiting in the event loop (no worker thread held).
    """

    def __init__(self, *, retries: int = RETRIES, first_wait: float = FIRST_WAIT) -> None:
        self.retries = retries
        self.first_wait = first_wait
        self._pending = 0
        self._idle = threading.Condition()
        #: Set by :meth:`stop_waiting`: wakes the jobs waiting now.
        self._stopped = asyncio.Event()
        #: Jobs queued since start (for the tests: one per accepted request).
        self.queued = 0

    def put(self, job: Callable[[], object], what: str, about: str = "") -> BackgroundTask:
        """The background task that runs ``job``; ``about`` names it if it is given up."""
        with self._idle:
            self._pending += 1
            self.queued += 1
        return BackgroundTask(self._run, job, what, about)

    async def _run(self, job: Callable[[], object], what: str, about: str) -> None:
        tries = 0
        try:
            while not await run_in_threadpool(carry_out, job, what):
                tries += 1
                stopped = self._stopped.is_set()
                if tries > self.retries or stopped:
                    log.error("%s (%s): given up after %d tries%s: the person was told to "
                              "check their inbox and got nothing; they stay pending until "
                              "they ask again", what, about or "?", tries,
                              " (the app stopped)" if stopped else "")
                    return
                with contextlib.suppress(TimeoutError):  # the wait, or a stop
                    await asyncio.wait_for(self._stopped.wait(),
                                           backoff(tries, base=self.first_wait))
        except asyncio.CancelledError:  # the server was made to stop at once
            log.error("%s (%s): abandoned when the app stopped", what, about or "?")
            raise
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def stop_waiting(self) -> None:
        """Each job waiting to be tried again is tried once more now, then given up."""
        self._stopped.set()

    def wait(self, timeout: float) -> bool:
        """Block until no job is queued or running; False if ``timeout`` seconds pass."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


def carry_out(job: Callable[[], object], what: str) -> bool:
    """Run one sign-up's work and log how it went; False when it is worth another try (the
    store or the transport unavailable)."""
    try:
        log.info("%s: %s", what, job())
    except InvalidAddress as exc:  # checked before it was queued: no retry mends it
        log.warning("%s: dropped: %s", what, exc)
    except Unconfirmed:  # the mail may have left: sending it again could send it twice
        log.warning("%s: the mail may or may not have left", what)
    except PermanentFailure:  # the mailbox refuses it: so would every retry
        log.warning("%s: the mail was refused for good (PermanentFailure)", what)
    except (TransportError, StoreError) as exc:
        log.warning("%s: not done: %s", what, type(exc).__name__)
        return False
    return True
