"""Benchmark of ``newsletter send``: message building, SMTP throughput, and memory per list size.

What it measures, on the sample issue (``examples/sample-feed.atom`` built for 2026-W48 into a
temp folder with ``pipeline.stages.build.build``; nothing is written in the work tree):

* **build**: ``Messages.build`` per recipient (µs), for each layout: the signed links, the
  personal headers folded, both parts with the links filled in. ``8bit`` is the default
  (``[delivery] eight_bit``: each part folded once per layout, the links put into the folded
  bytes); ``7bit`` the same issue with it off (each part filled in and encoded whole,
  quoted-printable or base64, per recipient). Baseline in the same run: the same message
  built the obvious way with ``email.message.EmailMessage`` (same headers, same links,
  ``set_content`` text + ``add_alternative`` html, ``as_bytes()`` under the SMTP policy so
  both are CRLF; ``vs EmailMessage`` = its time / the 8bit one's).
* **smtp**: every active subscriber of a real ``SqliteStore`` (temp folder, one fresh store
  per run) through ``Sender`` + ``SmtpTransport`` (no STARTTLS, no rate limit, ledger and
  all) at each concurrency, to an aiosmtpd sink on 127.0.0.1 that only counts and answers
  250. Baseline in the same run: a plain ``smtplib`` loop over one connection sending one
  prebuilt message (the zh-en layout, ours) as many times to the same sink. The sink runs in
  a child process: in-process it would share the GIL with the client and cap every path at
  the same rate, hiding what concurrency buys; a real relay is another machine too.
  ``client CPU`` is this process's CPU time per message (all its threads, not the sink's):
  where the sink is the bottleneck, it shows what each path costs the sending side. Then a
  relay's connection limit: four workers against a sink that greets the third connection
  with ``421 too many connections``, without ``[smtp] max_connections`` (each refused
  greeting is a temporary failure, retried after the sender's backoff) and with it set to 2
  (no third connection is tried), beside the baseline of two workers and no limit.
* **starttls**: the same over STARTTLS, where a real relay is reached (the rows above are
  plain SMTP, which hid a stall of ~40 ms a message: Nagle's algorithm held each message's
  last TLS record until the relay's delayed ACK). A sink offering STARTTLS (a throwaway CA and
  certificate for 127.0.0.1, from tests/support/servers.py), in a child process; each row the
  median of ``--tls-runs`` runs of ``--tls-recipients`` messages. Baseline in the same run:
  plain ``smtplib`` over two STARTTLS connections (one thread each) with ``TCP_NODELAY``,
  i.e. what the relay itself takes over two connections; beside it the same loop as smtplib
  ships it (Nagle on), ``SmtpTransport.send`` alone from two threads (no ledger: what the
  transport itself costs), then ``Sender`` + ``SmtpTransport`` with 2 workers, and with 4
  workers against a relay that allows 2 connections with ``[smtp] max_connections = 2`` (the
  README's row), where the ledger's two fsynced writes per message overlap another worker's
  sending.
* **memory**: ``Sender.run`` with a ``NullTransport`` (returns an id, keeps nothing) over
  stores of growing size. ``peak KB`` is tracemalloc's peak during ``Sender.run`` alone
  (store created and filled before tracing starts); ``µs/msg`` comes from a separate run
  without tracemalloc (it slows Python down about 3x). Baseline in the same run: the peak of
  only reading the same list into memory (``list(store.iter_subscribers("active"))``), i.e.
  what a send loop that did not stream would hold. tracemalloc sees Python allocations only:
  SQLite's own page cache (C memory, bounded by its ``cache_size``) is not in the figures.

Subscribers are inserted with one ``executemany`` on a second connection to the migrated
file: ``SqliteStore.add`` validates and fsyncs each address (about a minute per 10,000),
and the store offers no bulk insert. Their layouts cycle through the four.

Sizes: the defaults fit about three minutes on a 2-core machine, and the sizes used are
printed. The issue's figures (10,000 recipients, lists of 10,000 / 50,000 / 100,000) take
about 20 minutes: ``--recipients 10000 --memory-sizes 10000,50000,100000``.

Run: ``make bench`` or ``.venv/bin/python bench/bench_send.py [--parts
build,smtp,starttls,memory] [--runs N] [--build-recipients N] [--recipients N] [--concurrency
1,4] [--tls-recipients N] [--tls-runs N] [--memory-sizes ...]``.
Nothing here asserts on time: it is a measurement, not a test. It does stop when a run
delivers a different number of messages than it should, since its figures would be wrong.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import platform
import smtplib
import socket
import sqlite3
import ssl
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench_build import table

from pipeline.config import Settings, SmtpSettings, load
from pipeline.core.email.message import Messages
from pipeline.core.email.render import PREFERENCES_PLACEHOLDER, UNSUBSCRIBE_PLACEHOLDER
from pipeline.model import LAYOUTS
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from pipeline.stages.send import Sender, SendOptions
from pipeline.stages.send_report import SendReport
from pipeline.transport import Outgoing, Transport
from pipeline.transport.smtp import SmtpTransport
from subscribers.model import email_key, new_subscriber_id
from subscribers.store.sqlite import SqliteStore
from subscribers.tokens import Keys

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
WEEK_ID = "2026-W48"
HOST = "127.0.0.1"
#: Signs the links of these benchmark messages only (real-length tokens, never mailed).
BENCH_KEY = "bench-only-signing-key-never-used-for-mail"
PARTS = ("build", "smtp", "starttls", "memory")
RUNS = 5
BUILD_RECIPIENTS = 200
RECIPIENTS = 3_000
CONCURRENCY = (1, 4)
TLS_RECIPIENTS = 1_000
TLS_RUNS = 3
MEMORY_SIZES = (1_000, 5_000, 10_000)
BASELINE_LAYOUT = "zh-en"
CONTENT_LANGUAGE = {"zh-en": "zh-CN, en", "en-zh": "zh-CN, en", "zh": "zh-CN", "en": "en"}
_INSERT = """
    INSERT INTO subscribers (id, email, email_key, status, layout, consent_at, consent_source,
                             created_at, confirmed_at, updated_at)
    VALUES (?, ?, ?, 'active', ?, ?, 'bench', ?, ?, ?)"""


@dataclass(frozen=True)
class Setup:
    """The built sample issue and what every part needs to send it."""

    folder: Path
    settings: Settings
    built: BuiltIssue
    messages: Messages
    now: datetime


@dataclass(frozen=True)
class BuildResult:
    layout: str
    ours_us: float
    seven_bit_us: float
    baseline_us: float
    ours_bytes: int
    baseline_bytes: int


@dataclass
class Stopwatch:
    """Wall and CPU seconds of this process (every thread of it; not the sink's)."""

    wall: float = 0.0
    cpu: float = 0.0


@dataclass(frozen=True)
class SmtpResult:
    path: str
    concurrency: int
    sent: int
    received: int
    seconds: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds


@dataclass(frozen=True)
class MemoryResult:
    size: int
    sent: int
    us_per_message: float
    peak_bytes: int
    list_peak_bytes: int


# -- the issue and its subscribers -------------------------------------------------------------


def prepare(folder: Path) -> Setup:
    """Build the sample issue into ``folder`` with the built-in defaults, and read it back."""
    config = folder / "newsletter.toml"
    config.write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
    settings = load(config, {})
    built = load_built(build(settings, week_id=WEEK_ID, out=folder / "issue").out_dir)
    keys = Keys.from_environ({"NEWSLETTER_SECRET": BENCH_KEY})
    messages = Messages(built, settings.site, settings.delivery, keys)
    return Setup(folder, settings, built, messages, datetime.now(UTC))


def address(index: int) -> str:
    return f"reader{index:06d}@example.org"


def fill_store(path: Path, size: int, now: datetime) -> SqliteStore:
    """A migrated store holding ``size`` active subscribers, the four layouts in turn."""
    store = SqliteStore.open(path)
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # the store's format
    rows = ((new_subscriber_id(), address(i), email_key(address(i)), LAYOUTS[i % len(LAYOUTS)],
             stamp, stamp, stamp, stamp) for i in range(size))
    conn = sqlite3.connect(path)
    try:
        with conn:  # one transaction
            conn.executemany(_INSERT, rows)
    finally:
        conn.close()
    active = store.count_by_status()["active"]
    if active != size:
        raise SystemExit(f"{path.name}: {active} active subscribers, expected {size}")
    return store


# -- 1. message build ------------------------------------------------------------------------


def email_message(setup: Setup, layout: str, recipient: str, subscriber_id: str) -> bytes:
    """The message ``Messages.build`` makes, built the obvious way with ``EmailMessage``."""
    m, built = setup.messages, setup.built
    links = m.links(subscriber_id)
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = m.sender
    if m.reply_to:
        msg["Reply-To"] = m.reply_to
    msg["To"] = recipient
    msg["Subject"] = built.issue.subject[layout]
    msg["Date"] = format_datetime(setup.now)
    msg["Message-ID"] = f"<{built.id}.{subscriber_id[:16]}@{m.sender.domain}>"
    msg["List-Id"] = m.list_id
    msg["List-Unsubscribe"] = f"<{links.unsubscribe}>"
    msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Content-Language"] = CONTENT_LANGUAGE[layout]
    msg.set_content(fill(built.text(layout), links.unsubscribe, links.preferences))
    msg.add_alternative(fill(built.html(layout), links.unsubscribe, links.preferences),
                        subtype="html")
    return msg.as_bytes()


def fill(body: str, unsubscribe: str, preferences: str) -> str:
    return body.replace(UNSUBSCRIBE_PLACEHOLDER, unsubscribe).replace(
        PREFERENCES_PLACEHOLDER, preferences)


def median_us_per_item(fn: Callable[[str, str], object], people: Sequence[tuple[str, str]],
                       runs: int) -> float:
    """Median over ``runs`` passes of µs per call of ``fn(email, id)``, after a warm-up."""
    for person in people[:20]:
        fn(*person)
    samples = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        for person in people:
            fn(*person)
        samples.append((time.perf_counter() - start) / len(people))
    return statistics.median(samples) * 1e6


def bench_build(setup: Setup, count: int, runs: int) -> list[BuildResult]:
    people = [(address(i), new_subscriber_id()) for i in range(count)]
    settings = setup.settings
    seven_bit_messages = Messages(setup.built, settings.site,
                                  replace(settings.delivery, eight_bit=False),
                                  Keys.from_environ({"NEWSLETTER_SECRET": BENCH_KEY}))
    results = []
    for layout in LAYOUTS:
        def ours(email: str, sid: str, layout: str = layout) -> bytes:
            return setup.messages.build(email, sid, layout, setup.now).raw

        def seven_bit(email: str, sid: str, layout: str = layout) -> bytes:
            return seven_bit_messages.build(email, sid, layout, setup.now).raw

        def baseline(email: str, sid: str, layout: str = layout) -> bytes:
            return email_message(setup, layout, email, sid)

        results.append(BuildResult(
            layout,
            ours_us=median_us_per_item(ours, people, runs),
            seven_bit_us=median_us_per_item(seven_bit, people, runs),
            baseline_us=median_us_per_item(baseline, people, runs),
            ours_bytes=len(ours(*people[0])),
            baseline_bytes=len(baseline(*people[0])),
        ))
    return results


# -- 2. SMTP to a local sink -------------------------------------------------------------------


class CountingHandler:
    """aiosmtpd handler: count each message's data and answer 250, nothing else."""

    def __init__(self) -> None:
        self.count = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.count += 1
        return "250 OK"


def serve_sink(port: int, pipe: Connection, max_connections: int | None = None,
               certificate: tuple[str, str] | None = None) -> None:
    """The child process: a sink on ``port`` that reports its count on request. With
    ``max_connections``, the connection beyond that many open ones is greeted with ``421
    too many connections`` and closed, as Postfix's ``smtpd_client_connection_count_limit``
    does. With ``certificate`` (PEM files: certificate, key), it offers STARTTLS and takes
    no mail before it."""
    from aiosmtpd.controller import Controller

    handler = CountingHandler()
    tls: dict[str, Any] = {}
    if certificate is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*certificate)
        tls = {"tls_context": context, "require_starttls": True}
    controller = Controller(handler, hostname=HOST, port=port, server_hostname="sink.bench",
                            ready_timeout=10.0, **tls)
    if max_connections is not None:
        limit_connections(controller, max_connections)
    controller.start()
    pipe.send("ready")
    try:
        while pipe.recv() == "count":
            pipe.send(handler.count)
    finally:
        controller.stop()


def limit_connections(controller: Any, most: int) -> None:
    """Refuse, at the greeting, a connection beyond ``most`` open ones."""
    make = controller.factory
    open_now = [0]

    def factory() -> Any:
        smtp = make()
        made, lost = smtp.connection_made, smtp.connection_lost
        greeted = [False]

        def connection_made(transport: Any) -> None:
            if greeted[0]:  # again, for the TLS transport after STARTTLS: the same one
                made(transport)
                return
            greeted[0] = True
            if open_now[0] >= most:
                transport.write(b"421 4.7.0 sink.bench Error: too many connections\r\n")
                transport.close()
                smtp.connection_lost = lambda error: None
                return
            open_now[0] += 1
            made(transport)

        def connection_lost(error: Exception | None) -> None:
            open_now[0] -= 1
            lost(error)

        smtp.connection_made, smtp.connection_lost = connection_made, connection_lost
        return smtp

    controller.factory = factory


def free_port() -> int:
    """A loopback port free right now (aiosmtpd's Controller cannot be given port 0)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Sink:
    """A counting aiosmtpd sink on 127.0.0.1, in a child process."""

    def __init__(self, max_connections: int | None = None,
                 certificate: tuple[str, str] | None = None) -> None:
        self.port = free_port()
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=serve_sink,
                                        args=(self.port, child, max_connections, certificate),
                                        daemon=True)

    def __enter__(self) -> Sink:
        self._process.start()
        if not self._pipe.poll(30) or self._pipe.recv() != "ready":
            raise SystemExit("the SMTP sink did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pipe.send("stop")
        self._process.join(10)

    def count(self) -> int:
        self._pipe.send("count")
        return self._pipe.recv()


@contextmanager
def stopwatch() -> Iterator[Stopwatch]:
    """Times the block: the yielded Stopwatch is filled in when it ends."""
    watch = Stopwatch()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield watch
    finally:
        watch.wall, watch.cpu = time.perf_counter() - wall, time.process_time() - cpu


def smtplib_loop(port: int, sender: str, raw: bytes, count: int) -> Stopwatch:
    """Send ``raw`` ``count`` times over one plain smtplib connection."""
    with stopwatch() as watch, smtplib.SMTP(HOST, port, timeout=30) as client:
        for i in range(count):
            client.sendmail(sender, [address(i)], raw)
    return watch


def timed_send(setup: Setup, store: SqliteStore, transport: Transport,
               concurrency: int) -> tuple[SendReport, Stopwatch]:
    """One ``Sender.run`` over the whole store, unpaced."""
    sender = Sender(setup.built, store, transport, setup.messages, rate=None,
                    concurrency=concurrency)
    with stopwatch() as watch:
        report = sender.run(SendOptions())
    return report, watch


def checked(result: SmtpResult, expected: int) -> SmtpResult:
    if result.sent != expected or result.received != expected:
        raise SystemExit(f"{result.path} (concurrency {result.concurrency}): sent "
                         f"{result.sent}, sink received {result.received}, expected {expected}")
    return result


def bench_smtp(setup: Setup, count: int, concurrencies: Sequence[int]) -> list[SmtpResult]:
    raw = setup.messages.build(address(0), new_subscriber_id(), BASELINE_LAYOUT, setup.now).raw
    sender = setup.messages.envelope_sender
    results = []
    with Sink() as sink:
        watch = smtplib_loop(sink.port, sender, raw, count)
        results.append(checked(SmtpResult("smtplib loop", 1, count, sink.count(), watch.wall,
                                          watch.cpu), count))
        for concurrency in concurrencies:
            before = sink.count()
            store = fill_store(setup.folder / f"smtp-{concurrency}.sqlite3", count, setup.now)
            with store, SmtpTransport(SmtpSettings(host=HOST, port=sink.port, tls="none"),
                                      None) as transport:
                report, watch = timed_send(setup, store, transport, concurrency)
            results.append(checked(SmtpResult("Sender+SmtpTransport", concurrency, report.sent,
                                              sink.count() - before, watch.wall, watch.cpu),
                                   count))
    results.extend(bench_connection_limit(setup, count))
    return results


def bench_connection_limit(setup: Setup, count: int) -> list[SmtpResult]:
    """Four workers against a relay that allows two connections, with ``[smtp]
    max_connections`` unset and set to 2, against two workers and no limit: what a relay's
    limit costs, at best nothing."""
    results = []
    for path, workers, limit, cap in (("2 workers, no limit", 2, None, 0),
                                      ("4 workers, relay allows 2", 4, 2, 0),
                                      ("4 workers, relay allows 2, max_connections 2", 4, 2, 2)):
        with Sink(max_connections=limit) as sink:
            store = fill_store(setup.folder / f"limit-{workers}-{cap}.sqlite3", count,
                               setup.now)
            settings = SmtpSettings(host=HOST, port=sink.port, tls="none",
                                    max_connections=cap)
            with store, SmtpTransport(settings, None) as transport:
                report, watch = timed_send(setup, store, transport, workers)
            results.append(checked(SmtpResult(path, workers, report.sent, sink.count(),
                                              watch.wall, watch.cpu), count))
    return results


# -- 3. the same over STARTTLS -----------------------------------------------------------------


@dataclass(frozen=True)
class Certificate:
    """A throwaway CA's certificate for 127.0.0.1, as files for the sink, and the client's
    context that trusts only that CA."""

    files: tuple[str, str]
    client: ssl.SSLContext


def certificate(folder: Path) -> Certificate:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.servers import make_certificates

    (cert, key), _, ca = make_certificates()
    (folder / "sink.pem").write_bytes(cert)
    (folder / "sink.key").write_bytes(key)
    return Certificate((str(folder / "sink.pem"), str(folder / "sink.key")),
                       ssl.create_default_context(cadata=ca.decode("ascii")))


def smtplib_starttls(port: int, sender: str, raw: bytes, count: int, context: ssl.SSLContext,
                     *, connections: int, nodelay: bool) -> Stopwatch:
    """Send ``raw`` ``count`` times over ``connections`` STARTTLS connections, one thread
    each, opened before the clock starts (as the transport's pool holds them)."""
    clients = []
    for _ in range(connections):
        client = smtplib.SMTP(HOST, port, timeout=30)
        client.starttls(context=context)
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(nodelay))
        clients.append(client)

    def work(client: smtplib.SMTP, share: range) -> None:
        for i in share:
            client.sendmail(sender, [address(i)], raw)

    threads = [threading.Thread(target=work, args=(client, range(n, count, connections)))
               for n, client in enumerate(clients)]
    with stopwatch() as watch:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for client in clients:
        client.quit()
    return watch


def transport_alone(port: int, sender: str, raw: bytes, count: int, context: ssl.SSLContext,
                    *, threads: int) -> Stopwatch:
    """``SmtpTransport.send`` of ``raw`` ``count`` times from ``threads`` threads, its
    connections opened before the clock starts: the transport without the ledger."""
    settings = SmtpSettings(host=HOST, port=port, tls="starttls")
    with SmtpTransport(settings, None, ssl_context=context) as transport:
        def work(share: range) -> None:
            for i in share:
                transport.send(Outgoing(recipient=address(i), sender=sender, raw=raw,
                                        key=str(i), tags={}))

        warm = [threading.Thread(target=work, args=(range(n, n + 1),)) for n in range(threads)]
        for thread in warm:
            thread.start()
        for thread in warm:
            thread.join()
        workers = [threading.Thread(target=work, args=(range(threads + n, count + threads,
                                                             threads),))
                   for n in range(threads)]
        with stopwatch() as watch:
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
    return watch


def bench_starttls(setup: Setup, count: int, runs: int) -> list[SmtpResult]:
    """Each row the median of ``runs`` runs, the relay's own capacity over two connections
    (smtplib with TCP_NODELAY) first, as the baseline."""
    raw = setup.messages.build(address(0), new_subscriber_id(), BASELINE_LAYOUT, setup.now).raw
    sender = setup.messages.envelope_sender
    cert = certificate(setup.folder)
    samples: dict[tuple[str, int], list[SmtpResult]] = {}

    def keep(result: SmtpResult) -> None:
        samples.setdefault((result.path, result.concurrency), []).append(checked(result, count))

    for run in range(runs):
        for path, nodelay in (("smtplib, TCP_NODELAY (the relay's capacity)", True),
                              ("smtplib as it ships (Nagle on)", False)):
            with Sink(certificate=cert.files) as sink:
                watch = smtplib_starttls(sink.port, sender, raw, count, cert.client,
                                         connections=2, nodelay=nodelay)
                keep(SmtpResult(path, 2, count, sink.count(), watch.wall, watch.cpu))
        with Sink(certificate=cert.files) as sink:
            watch = transport_alone(sink.port, sender, raw, count, cert.client, threads=2)
            keep(SmtpResult("SmtpTransport alone (no ledger)", 2, count,
                            sink.count() - 2, watch.wall, watch.cpu))
        for path, workers, limit in (("Sender+SmtpTransport", 2, None),
                                     ("Sender+SmtpTransport, relay allows 2, "
                                      "max_connections 2", 4, 2)):
            with Sink(max_connections=limit, certificate=cert.files) as sink:
                store = fill_store(setup.folder / f"tls-{workers}-{run}.sqlite3", count,
                                   setup.now)
                settings = SmtpSettings(host=HOST, port=sink.port, tls="starttls",
                                        max_connections=limit or 0)
                with store, SmtpTransport(settings, None, ssl_context=cert.client) as transport:
                    report, watch = timed_send(setup, store, transport, workers)
                keep(SmtpResult(path, workers, report.sent, sink.count(), watch.wall,
                                watch.cpu))
    return [SmtpResult(path, workers, count, count,
                       statistics.median(r.seconds for r in results),
                       statistics.median(r.cpu_seconds for r in results))
            for (path, workers), results in samples.items()]


# -- 4. memory against the list's size -------------------------------------------------------


class NullTransport:
    """The Transport protocol at no cost: returns an id, keeps nothing."""

    name = "null"

    def send(self, message: Outgoing) -> str:
        return "null"

    def probe(self) -> float | None:
        return None

    def close(self) -> None:
        pass


@contextmanager
def traced_peak() -> Iterator[list[int]]:
    """tracemalloc around the block; the list it yields receives the peak, in bytes."""
    peak: list[int] = []
    gc.collect()
    tracemalloc.start()
    try:
        yield peak
        peak.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def bench_memory_size(setup: Setup, size: int, concurrency: int) -> MemoryResult:
    path = setup.folder / f"memory-{size}"
    with fill_store(path.with_suffix(".timed.sqlite3"), size, setup.now) as store:
        report, watch = timed_send(setup, store, NullTransport(), concurrency)
    with fill_store(path.with_suffix(".traced.sqlite3"), size, setup.now) as store:
        with traced_peak() as peak:
            traced, _ = timed_send(setup, store, NullTransport(), concurrency)
        with traced_peak() as list_peak:
            everyone = list(store.iter_subscribers("active"))
        del everyone
    for sent in (report.sent, traced.sent):
        if sent != size:
            raise SystemExit(f"memory, {size} subscribers: sent {sent}")
    return MemoryResult(size, report.sent, watch.wall / size * 1e6, peak[0], list_peak[0])


def bench_memory(setup: Setup, sizes: Sequence[int]) -> list[MemoryResult]:
    concurrency = setup.settings.delivery.concurrency
    return [bench_memory_size(setup, size, concurrency) for size in sizes]


# -- reporting -------------------------------------------------------------------------------


def kb(size: float) -> str:
    return f"{size / 1000:,.1f}"


def build_rows(results: Sequence[BuildResult]) -> list[list[str]]:
    return [[r.layout, kb(r.ours_bytes), f"{r.ours_us:,.0f}", f"{r.seven_bit_us:,.0f}",
             kb(r.baseline_bytes), f"{r.baseline_us:,.0f}",
             f"{r.baseline_us / r.ours_us:.1f}x"] for r in results]


def smtp_rows(results: Sequence[SmtpResult]) -> list[list[str]]:
    baseline = results[0].rate
    return [[r.path, str(r.concurrency), f"{r.sent:,}", f"{r.received:,}", f"{r.seconds:.1f}",
             f"{r.rate:,.0f}", f"{1e6 / r.rate:,.0f}", f"{r.cpu_seconds / r.sent * 1e6:,.0f}",
             f"{r.rate / baseline:.2f}x"]
            for r in results]


def memory_rows(results: Sequence[MemoryResult], message_bytes: int) -> list[list[str]]:
    first = results[0].peak_bytes
    return [[f"{r.size:,}", f"{r.sent:,}", f"{r.us_per_message:,.0f}", kb(r.peak_bytes),
             f"{r.peak_bytes / message_bytes:.1f}", f"{r.peak_bytes / first:.2f}x",
             kb(r.list_peak_bytes)] for r in results]


def header(ns: argparse.Namespace, setup: Setup) -> str:
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("aiosmtpd",))
    lines = [
        "vLLM PR Weekly: send benchmark",
        f"machine: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; {versions}, "
        f"SQLite {sqlite3.sqlite_version}",
        f"issue: sample feed, week {WEEK_ID}, built into a temp folder; KB = 1,000 bytes",
    ]
    if "build" in ns.parts:
        lines.append(f"build: median of {ns.runs} passes over {ns.build_recipients:,} "
                     "recipients per layout, after a warm-up")
    if "smtp" in ns.parts:
        lines.append(f"smtp: {ns.recipients:,} recipients per path, one run each, sink on "
                     f"{HOST} in a child process")
    if "starttls" in ns.parts:
        lines.append(f"starttls: {ns.tls_recipients:,} recipients per row, median of "
                     f"{ns.tls_runs} runs, a STARTTLS sink on {HOST} in a child process, "
                     "two connections")
    if "memory" in ns.parts:
        lines.append(f"memory: lists of {', '.join(f'{s:,}' for s in ns.memory_sizes)} "
                     f"subscribers, concurrency {setup.settings.delivery.concurrency} "
                     "(the default), NullTransport")
    return "\n".join(lines)


def report(ns: argparse.Namespace, setup: Setup, built: Sequence[BuildResult],
           smtp: Sequence[SmtpResult], tls: Sequence[SmtpResult],
           memory: Sequence[MemoryResult]) -> str:
    sections = [header(ns, setup)]
    if built:
        sections.append(table(["layout", "msg KB", "8bit µs/rcpt", "7bit µs/rcpt",
                               "EmailMessage KB", "EmailMessage µs/rcpt",
                               "vs EmailMessage"], build_rows(built)))
    if smtp:
        sections.append(table(["path", "concurrency", "sent", "sink got", "s", "msg/s",
                               "µs/msg", "client CPU µs/msg", "vs smtplib"], smtp_rows(smtp)))
        sections.append("client CPU = this process's CPU time (all its threads) per message; "
                        "the sink's is not in it.")
    if tls:
        sections.append(table(["over STARTTLS", "workers", "sent", "sink got", "s", "msg/s",
                               "µs/msg", "client CPU µs/msg", "vs capacity"],
                              smtp_rows(tls)))
        sections.append("vs capacity = msg/s over the relay's own, measured by smtplib over "
                        "two connections with TCP_NODELAY in the same run.")
    if memory:
        message = len(setup.messages.build(address(0), new_subscriber_id(), BASELINE_LAYOUT,
                                           setup.now).raw)
        sections.append(table(["subscribers", "sent", "µs/msg", "peak KB", "peak in msgs",
                               f"vs {memory[0].size:,}", "whole list KB"],
                              memory_rows(memory, message)))
        sections.append(
            f"peak KB = tracemalloc peak during Sender.run; peak in msgs = peak / one "
            f"{BASELINE_LAYOUT} message ({kb(message)} KB);\nµs/msg from a run without "
            "tracemalloc; whole list KB = the peak of list(iter_subscribers()) on the same "
            "store,\ni.e. what a send loop that did not stream would hold.")
    return "\n\n".join(sections)


def numbers(text: str) -> tuple[int, ...]:
    return tuple(int(s.replace("_", "")) for s in text.split(",") if s.strip())


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {','.join(PARTS)} (all)")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"build passes ({RUNS})")
    parser.add_argument("--build-recipients", type=int, default=BUILD_RECIPIENTS,
                        help=f"recipients per build pass ({BUILD_RECIPIENTS})")
    parser.add_argument("--recipients", type=int, default=RECIPIENTS,
                        help=f"recipients per SMTP path ({RECIPIENTS})")
    parser.add_argument("--concurrency", type=numbers, default=CONCURRENCY,
                        help="comma-separated Sender concurrencies for SMTP (1,4)")
    parser.add_argument("--tls-recipients", type=int, default=TLS_RECIPIENTS,
                        help=f"recipients per STARTTLS row ({TLS_RECIPIENTS})")
    parser.add_argument("--tls-runs", type=int, default=TLS_RUNS,
                        help=f"runs per STARTTLS row, the median kept ({TLS_RUNS})")
    parser.add_argument("--memory-sizes", type=numbers, default=MEMORY_SIZES,
                        help="comma-separated list sizes ("
                             f"{','.join(map(str, MEMORY_SIZES))})")
    ns = parser.parse_args(argv)
    ns.parts = tuple(p.strip() for p in ns.parts.split(",") if p.strip())
    if not ns.parts or set(ns.parts) - set(PARTS):
        parser.error(f"--parts takes some of {','.join(PARTS)}")
    counts = (ns.runs, ns.build_recipients, ns.recipients, ns.tls_recipients, ns.tls_runs,
              *ns.concurrency, *ns.memory_sizes)
    if min(counts) < 1 or not ns.concurrency or not ns.memory_sizes:
        parser.error("every count, concurrency and size must be at least 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="bench-send-") as tmp:
        setup = prepare(Path(tmp))
        built = bench_build(setup, ns.build_recipients, ns.runs) if "build" in ns.parts else []
        smtp = bench_smtp(setup, ns.recipients, ns.concurrency) if "smtp" in ns.parts else []
        tls = (bench_starttls(setup, ns.tls_recipients, ns.tls_runs)
               if "starttls" in ns.parts else [])
        memory = bench_memory(setup, ns.memory_sizes) if "memory" in ns.parts else []
        print(report(ns, setup, built, smtp, tls, memory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
