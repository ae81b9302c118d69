"""One headless Chromium, driven over its DevTools pipe: the preview's screenshot engine.

Why not Chromium's own ``--screenshot`` command line: each shot then starts a browser (about
a second and a half of start-up on two cores, twelve times), and the window cannot be
narrower than 500 px. Why not Playwright: it is a test dependency, and the preview needs
nothing but the browser at run time. The DevTools protocol over ``--remote-debugging-pipe``
is JSON messages ending in a NUL byte, read from the browser's fd 4 and written to its
fd 3: the standard library speaks it, one browser serves every shot, and its tabs work in
parallel.

``Chromium`` is the browser (one reader thread hands each answer to the caller that waits for
it); ``Tab`` is one page target in it, used by one thread at a time.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Flags that work on these machines (closed network, root, no GPU): tests/test_browser.py's.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--force-device-scale-factor=1")
#: How long one protocol call (a navigation's load included) may take before it fails.
CALL_TIMEOUT_S = 60.0
#: The browser's ends of the pipe are moved to these numbers before it starts (3 and 4 are
#: what Chromium reads and writes; these are high enough never to be 3 or 4 themselves).
_FIRST_FREE_FD = 10
_BASH = shutil.which("bash") or "/bin/bash"


class BrowserError(Exception):
    """Chromium could not start, died, refused a command or took too long (one line)."""


@dataclass
class _Pending:
    done: threading.Event
    message: dict[str, Any] | None = None


class Chromium:
    """A headless Chromium and its DevTools pipe; ``close()`` (or ``with``) ends it."""

    def __init__(self, executable: str, *, timeout: float = CALL_TIMEOUT_S) -> None:
        self.timeout = timeout
        try:
            self._profile = tempfile.mkdtemp(prefix="newsletter-chromium-")
        except OSError as exc:  # a full or read-only temp folder: the shots say so, once
            raise BrowserError("cannot make Chromium's profile folder in "
                               f"{tempfile.gettempdir()}: {exc.strerror or exc}") from None
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._events: dict[str, queue.Queue[str | None]] = {}
        self._next_id = 0
        self._gone: str | None = None
        commands_r, commands_w = os.pipe()
        answers_r, answers_w = os.pipe()
        theirs = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _FIRST_FREE_FD)
                  for fd in (commands_r, answers_w)]
        os.close(commands_r)
        os.close(answers_w)
        # bash moves the two ends onto fd 3 and 4, then becomes Chromium (no preexec_fn in a
        # threaded process; dash cannot name a descriptor above 9).
        script = f'exec "$@" 3<&{theirs[0]} 4>&{theirs[1]} {theirs[0]}<&- {theirs[1]}>&-'
        try:
            self._process = subprocess.Popen(
                [_BASH, "-c", script, "bash", executable, *CHROMIUM_FLAGS,
                 "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=theirs, start_new_session=True)
        except OSError as exc:
            for fd in (*theirs, commands_w, answers_r):
                os.close(fd)
            shutil.rmtree(self._profile, ignore_errors=True)
            raise BrowserError(f"cannot start {executable}: {exc.strerror or exc}") from None
        for fd in theirs:
            os.close(fd)
        self._writer = os.fdopen(commands_w, "wb")
        self._reader = os.fdopen(answers_r, "rb", buffering=0)
        self._stderr: list[str] = []
        self._stderr_thread = threading.Thread(target=self._drain_stderr,
                                               name="chromium-stderr", daemon=True)
        self._stderr_thread.start()
        threading.Thread(target=self._read, name="chromium-pipe", daemon=True).start()
        try:
            self.call("Browser.getVersion")  # it answers: it is up
        except BrowserError as exc:
            self.close()
            raise BrowserError(f"Chromium did not start: {self._last_words() or exc}") from None

    @property
    def alive(self) -> bool:
        return self._gone is None and self._process.poll() is None

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol ----------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its answer; BrowserError when there is none."""
        with self._lock:
            if self._gone:
                raise BrowserError(self._gone)
            self._next_id += 1
            ident = self._next_id
            pending = self._pending[ident] = _Pending(threading.Event())
            message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            try:
                self._writer.write(json.dumps(message).encode() + b"\0")
                self._writer.flush()
            except OSError as exc:
                self._pending.pop(ident, None)
                raise BrowserError(f"Chromium's pipe is closed ({exc.strerror})") from None
        if not pending.done.wait(self.timeout):
            with self._lock:
                self._pending.pop(ident, None)
            raise BrowserError(f"Chromium did not answer {method} within {self.timeout:.0f} s")
        answer = pending.message
        if answer is None:
            raise BrowserError(self._gone or "Chromium went away")
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message', 'failed')}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def events(self, session: str) -> queue.Queue[str | None]:
        """The names of the events of ``session``, in order (None: the browser is gone)."""
        with self._lock:
            return self._events.setdefault(session, queue.Queue())

    def _read(self) -> None:
        parts: list[bytes] = []
        while chunk := self._read_chunk():
            while (end := chunk.find(b"\0")) >= 0:
                parts.append(chunk[:end])
                self._dispatch(b"".join(parts))
                parts, chunk = [], chunk[end + 1:]
            parts.append(chunk)
        self._stderr_thread.join(timeout=2)  # its last words say why
        last = self._last_words()
        with self._lock:
            self._gone = "Chromium closed its DevTools pipe" + (f": {last}" if last else "")
            for pending in self._pending.values():
                pending.done.set()
            self._pending.clear()
            for events in self._events.values():
                events.put(None)

    def _read_chunk(self) -> bytes:
        try:
            return self._reader.read(1 << 16) or b""
        except OSError:
            return b""

    def _dispatch(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            return
        with self._lock:
            if "id" in message:
                pending = self._pending.pop(message["id"], None)
                if pending is not None:
                    pending.message = message
                    pending.done.set()
            elif "sessionId" in message and "method" in message:
                self._events.setdefault(message["sessionId"], queue.Queue()).put(
                    message["method"])

    def _last_words(self) -> str:
        """The last line Chromium wrote on stderr (cut to 200 characters), or ''."""
        lines = [line.strip() for line in self._stderr if line.strip()]
        return lines[-1][:200] if lines else ""

    def _drain_stderr(self) -> None:
        if self._process.stderr is None:
            return
        for line in self._process.stderr:
            self._stderr = [*self._stderr[-20:], line.decode("utf-8", "replace")]

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """End the browser and every process it started (its own process group, killed at
        once), and remove its profile. Not ``Browser.close``, nor SIGTERM: a shutdown took
        0.2 s of every preview's wait, SIGTERM 0.1 s, and it saves nothing here (the
        profile is thrown away, the PNGs were already read). A browser that died and was
        reaped already is not signalled: its group id could name someone else's by now,
        and its renderers end with its pipe."""
        if self._process.returncode is None:  # not reaped: the group is surely still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._stderr_thread.join(timeout=2)
        with contextlib.suppress(OSError):
            self._writer.close()
        with contextlib.suppress(OSError):
            self._reader.close()
        shutil.rmtree(self._profile, ignore_errors=True)


class Tab:
    """One page of ``browser`` in its own window, attached (flat session): one thread uses it
    at a time."""

    def __init__(self, browser: Chromium) -> None:
        self.browser = browser
        # A window of its own: a background tab of a shared window gets no frames on time,
        # and its screenshot waits (seconds, measured; sometimes for ever).
        target = browser.call("Target.createTarget",
                              {"url": "about:blank", "newWindow": True})["targetId"]
        self.session: str = browser.call("Target.attachToTarget",
                                         {"targetId": target, "flatten": True})["sessionId"]
        self._events = browser.events(self.session)
        self._call("Page.enable")

    def _call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, session=self.session)

    def screenshots(self, url: str, widths: Sequence[int], *, max_height: int
                    ) -> Iterator[tuple[int, bytes, int]]:
        """For each of ``widths`` in turn: the width, a PNG of ``url`` that wide and as tall
        as its page (cut at ``max_height``), and the page's full height. The page is opened
        once: a new width lays it out again, which costs less than loading it again."""
        self._viewport(widths[0], 900)
        self._call("Emulation.setEmulatedMedia", {
            "media": "screen", "features": [{"name": "prefers-color-scheme",
                                             "value": "light"}]})
        while not self._events.empty():  # a previous page's late events
            self._events.get_nowait()
        answer = self._call("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise BrowserError(f"cannot open {url}: {answer['errorText']}")
        self._wait_for("Page.loadEventFired")
        for index, width in enumerate(widths):
            if index:
                # Back to a short window: the page's height is measured, not the window's.
                self._viewport(width, 900)
            height = int(self._evaluate("document.documentElement.scrollHeight") or 0)
            if height <= 0:
                raise BrowserError("the page reported no height")
            self._viewport(width, min(height, max_height))
            # Fast PNG encoding: about 40 % less of Chromium's CPU for files about 20 % larger
            # (measured on the sample's twelve shots); the pixels are the same.
            data = self._call("Page.captureScreenshot",
                              {"format": "png", "optimizeForSpeed": True})["data"]
            yield width, base64.b64decode(data), height

    def _viewport(self, width: int, height: int) -> None:
        self._call("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _evaluate(self, expression: str) -> Any:
        answer = self._call("Runtime.evaluate", {"expression": expression,
                                                 "returnByValue": True})
        return answer.get("result", {}).get("value")

    def _wait_for(self, event: str) -> None:
        while True:
            try:
                name = self._events.get(timeout=self.browser.timeout)
            except queue.Empty:
                raise BrowserError(f"no {event} within {self.browser.timeout:.0f} s") from None
            if name is None:
                raise BrowserError("Chromium went away")
            if name == event:
                return
