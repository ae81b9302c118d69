"""Benchmark of /subscribe: does the time to answer tell what state an address is in?

An outside tester measured 5.4 ms for a removed address against 10.8-12.3 ms for the others,
and a 503 instead of a 200 when the mail transport was down (issue #13): both told a
stranger whether an address had been on the list. The app now answers before it looks the
address up, and handles the store and the mail after the answer for every state alike.

What it measures: the subscription app as ``newsletter serve`` runs it (``create_app`` over
the real SQLite store and transport, uvicorn on 127.0.0.1, in a temp folder), asked by an
HTTP client on a fresh connection per request, as a tester with ``curl`` would. For each
state of :data:`STATES` a distinct address is stored in that state beforehand (one per run,
so no address reaches its daily allowance), and the states take turns in a shuffled order
(seeded) so drift in the machine's speed spreads over all of them. Between two requests the
work queued after the previous answer is waited for, so each answer is timed on an idle app.

Three transports: ``outbox`` (the default deployment's ``.eml`` files), ``smtp`` (a plain
aiosmtpd server on loopback) and ``smtp-down`` (an SMTP port nobody listens on). The table
gives, per transport and state, the answer's status, the median and 90th percentile of the
time to the last byte of the answer, and the median's ratio to the ``new`` state's: ratios
near 1.00 (within the run-to-run noise, which the ``new`` row's p90 shows) and one status
are what no enumeration looks like.

Run: ``make bench`` or ``.venv/bin/python bench/bench_subscribe.py [--runs N]
[--transports outbox,smtp,smtp-down]``. Nothing here asserts on time: it is a measurement,
not a test.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import platform
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import uvicorn

from pipeline.config import load
from pipeline.web.app import MailQueue, create_app
from pipeline.web.serve import server_config
from pipeline.wiring import open_subscriptions

#: Every state an address can be in when someone asks to subscribe it.
STATES = ("new", "pending", "active", "unsubscribed", "bounced", "complained", "removed")
TRANSPORTS = ("outbox", "smtp", "smtp-down")
#: The archive's origin, which the form's POST must come from.
BASE_URL = "http://127.0.0.1:8000"
SECRET = "bench-only-signing-key-never-used-for-mail"  # noqa: S105 - a bench key


@dataclass(frozen=True)
class Row:
    transport: str
    state: str
    statuses: frozenset[int]
    median_ms: float
    p90_ms: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def smtp_sink() -> Iterator[int]:
    """A plain SMTP server on loopback that accepts every message (the port)."""
    from aiosmtpd.controller import Controller

    class Accept:
        async def handle_DATA(self, server, session, envelope) -> str:
            return "250 OK"

    port = free_port()  # aiosmtpd's Controller cannot be given port 0
    controller = Controller(Accept(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@contextmanager
def served(folder: Path, transport: str, smtp_port: int | None) -> Iterator[tuple]:
    """The app on a free port: (its port, its store, its queue)."""
    port = free_port()
    config = folder / "newsletter.toml"
    extra = ""
    if transport != "outbox":
        extra = (f'[delivery]\ntransport = "smtp"\n[smtp]\nhost = "127.0.0.1"\n'
                 f"port = {smtp_port or free_port()}\nstarttls = false\n")
    # https in the links (real transports want it); the app itself is served over http.
    config.write_text(f'[site]\nbase_url = "{BASE_URL}"\napp_url = "https://127.0.0.1:{port}"\n'
                      f"[subscriptions]\nclient_per_hour = 10000\n{extra}", encoding="utf-8")
    environ = {"NEWSLETTER_SECRET": SECRET}
    settings = load(config, environ)
    with open_subscriptions(settings, environ) as subscriptions:
        queue = MailQueue()
        app = create_app(subscriptions, app_url=settings.site.app_url,
                         base_url=settings.site.base_url, mail_queue=queue)
        server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port,
                                              forwarded_allow_ips="127.0.0.1"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.01)
        try:
            yield port, subscriptions.store, queue
        finally:
            server.should_exit = True
            thread.join(timeout=10)


def seed(store, runs: int) -> dict[str, list[str]]:
    """``runs`` addresses per state, stored in that state (``new`` ones are not stored)."""
    now = datetime.now(UTC)
    addresses = {state: [f"{state}-{n}@example.org" for n in range(runs)] for state in STATES}
    for address in addresses["pending"]:
        store.add(address, source="bench", now=now)
    for state in ("active", "unsubscribed", "bounced", "complained", "removed"):
        for address in addresses[state]:
            sub = store.add(address, status="active", source="bench", now=now).subscriber
            if state == "removed":
                store.remove(address, now)
            elif state != "active":
                store.set_status(sub.id, state, now)
    return addresses


def timed_subscribe(port: int, address: str) -> tuple[int, float]:
    """(status, seconds to the answer's last byte) of one form POST on a new connection."""
    body = urlencode({"email": address, "layout": "zh-en"}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": BASE_URL}
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/subscribe", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - start
    finally:
        connection.close()


def measure(transport: str, runs: int, rng: random.Random) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-subscribe-") as tmp, \
            (smtp_sink() if transport == "smtp" else _nothing()) as smtp_port, \
            served(Path(tmp), transport, smtp_port) as (port, store, queue):
        addresses = seed(store, runs + 1)
        for state in STATES:  # one warm-up request per state
            timed_subscribe(port, addresses[state][runs])
            queue.wait(30)
        times: dict[str, list[float]] = {state: [] for state in STATES}
        statuses: dict[str, set[int]] = {state: set() for state in STATES}
        for n in range(runs):
            order = list(STATES)
            rng.shuffle(order)
            for state in order:
                status, seconds = timed_subscribe(port, addresses[state][n])
                queue.wait(30)
                times[state].append(seconds * 1000)
                statuses[state].add(status)
    return [Row(transport, state, frozenset(statuses[state]), statistics.median(times[state]),
                statistics.quantiles(times[state], n=10)[-1] if runs >= 2 else times[state][0])
            for state in STATES]


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def report(rows: Sequence[Row], runs: int) -> str:
    lines = [
        f"/subscribe: time to answer per address state ({runs} runs each, median and p90; "
        f"python {platform.python_version()}, {platform.machine()})",
        "",
        f"{'transport':<10} {'state':<13} {'status':>6} {'median ms':>10} {'p90 ms':>8} "
        f"{'vs new':>7}",
    ]
    for transport in dict.fromkeys(row.transport for row in rows):
        mine = [row for row in rows if row.transport == transport]
        base = next(row for row in mine if row.state == "new").median_ms
        for row in mine:
            status = ",".join(str(s) for s in sorted(row.statuses))
            lines.append(f"{row.transport:<10} {row.state:<13} {status:>6} "
                         f"{row.median_ms:>10.2f} {row.p90_ms:>8.2f} "
                         f"{row.median_ms / base:>7.2f}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="requests per state (40)")
    parser.add_argument("--transports", default=",".join(TRANSPORTS),
                        help=f"comma-separated, of {', '.join(TRANSPORTS)}")
    parser.add_argument("--seed", type=int, default=13)
    ns = parser.parse_args(argv)
    ns.transports = [t.strip() for t in ns.transports.split(",") if t.strip()]
    unknown = set(ns.transports) - set(TRANSPORTS)
    if unknown or ns.runs < 1:
        parser.error(f"unknown transport(s) {', '.join(sorted(unknown))}" if unknown
                     else "--runs must be at least 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    logging.getLogger("newsletter.app").setLevel(logging.ERROR)  # smtp-down warns per mail
    rng = random.Random(ns.seed)
    rows = [row for transport in ns.transports for row in measure(transport, ns.runs, rng)]
    print(report(rows, ns.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
