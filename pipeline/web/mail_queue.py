"""Work done after the answer has gone: the sign-up's store work and mail.

The subscribe page is answered before the address is looked up, so that neither the page
nor its timing tells whether the address is known (see :mod:`pipeline.web.app`); the work
itself waits here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from pipeline.errors import TransportError, Unconfirmed
from subscribers.errors import InvalidAddress, StoreError

__all__ = ["MailQueue", "carry_out"]

log = logging.getLogger("newsletter.app")


class MailQueue:
    """Sign-up work carried out after the answer has gone: Starlette runs a response's
    background task once its last byte is sent (uvicorn), or before the function returns
    (Mangum, on Lambda), so nothing queued is lost with either host.

    What a job raises is logged here, never shown: the person was already told to check
    their inbox, and asking again is their remedy. :meth:`wait` lets a host (and the tests)
    wait until every queued job is done.
    """

    def __init__(self) -> None:
        self._pending = 0
        self._idle = threading.Condition()
        #: Jobs queued since start (for the tests: one per accepted request).
        self.queued = 0

    def put(self, job: Callable[[], object], what: str) -> BackgroundTask:
        """The background task that runs ``job`` in the thread pool; attach it to the
        response (``response.background``)."""
        with self._idle:
            self._pending += 1
            self.queued += 1
        return BackgroundTask(self._run, job, what)

    async def _run(self, job: Callable[[], object], what: str) -> None:
        try:
            await run_in_threadpool(carry_out, job, what)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until no job is queued or running; False if ``timeout`` seconds pass."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


def carry_out(job: Callable[[], object], what: str) -> bool:
    """Run one sign-up's work and log how it went; False when it failed for now and is
    worth another try (the store or the transport unavailable). The same for the jobs
    queued here and for those the sign-up queue delivers (pipeline/web/lambda_app.py)."""
    try:
        log.info("%s: %s", what, job())
    except InvalidAddress as exc:  # checked before it was queued: no retry mends it
        log.warning("%s: dropped: %s", what, exc)
    except Unconfirmed:  # the mail may have left: sending it again could send it twice
        log.warning("%s: the mail may or may not have left", what)
    except (TransportError, StoreError) as exc:
        log.warning("%s: not done: %s", what, type(exc).__name__)
        return False
    return True
