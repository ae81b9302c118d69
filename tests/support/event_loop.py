"""Running a coroutine from a test, in whatever worker it lands: Playwright's sync API keeps
its event loop marked as running in the main thread, where ``asyncio.run`` then fails.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_apart(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)`` on a new thread; its result, or what it raised."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(asyncio.run(coroutine))
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="test-event-loop")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]
