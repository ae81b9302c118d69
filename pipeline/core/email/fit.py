"""Fitting the size budget from measured sizes: which items shrink, without re-rendering.

Pure. A week of 200 reviews used to be fitted by bisection, each step a full render (as much
as 33 Jinja renders at 200 items). A rendering is *measured* instead: templates call ``fit(kind,
key)`` where a piece of the email begins, and while measuring that call prints a mark (an
HTML comment with a nonce no feed can guess); otherwise it prints nothing. Cutting the
rendered part at its marks gives the weight of each piece: an item's contents entry (``e``),
its card (``c``), its brief entry (``b``), a tier's heading in the contents (``g``) and over
the cards (``h``); ``z`` closes a list, so what follows it is counted with the frame (the
masthead, the footer, the brief list's box). The marks are stripped: the part is byte for
byte what an unmarked rendering gives.

Sizes add up: a plan's part weighs its frame plus the pieces the plan shows, each taken from
a rendering where it was shown the same way. Two units are kept per piece, UTF-8 bytes (from
which base64 is exact: it depends on the length only) and quoted-printable bytes, which are
not additive byte for byte (a soft line break depends on where a piece starts in its line,
a ``.`` or a space on where it ends). So an estimate is never trusted on its own: the
chosen plan is rendered and weighed as sent, the error seen there corrects the estimates
of its neighbours, and :func:`first_fitting` stops only when the plan it holds fits and the
plan before it is over budget even with :data:`SLACK` bytes of doubt, rendering the
neighbour when the estimate cannot tell. After :data:`GUIDED_STEPS` guided renderings
(never reached on the built-in templates; an operator's template without marks gets
there) it bisects between what it knows, as the old search did.
"""

from __future__ import annotations

import binascii
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from markupsafe import Markup

from pipeline.core.email.eightbit import eight_bit_body

#: Kinds of piece a template marks (see the module docstring).
ENTRY, CARD, BRIEF, CONTENTS_TIER, CARD_TIER, END = "e", "c", "b", "g", "h", "z"
#: Bytes by which the corrected estimate of a plan may still be off (quoted-printable soft
#: breaks at a piece's two ends, digits of counts that change from plan to plan).
SLACK = 96
#: Renderings guided by estimates before falling back to bisection.
GUIDED_STEPS = 3


@dataclass(frozen=True)
class Size:
    """What a piece weighs: UTF-8 bytes, quoted-printable bytes (CRLF line ends), and 8bit
    bytes (UTF-8 with CRLF line ends; for a whole part exact, folds included, or
    :data:`NOT_8BIT` when it cannot be 8bit data; for a piece its bytes and line ends, the
    folds, one byte in about a thousand, left to the check)."""

    raw: int = 0
    qp: int = 0
    eight: int = 0

    def __add__(self, other: Size) -> Size:
        return Size(self.raw + other.raw, self.qp + other.qp, self.eight + other.eight)

    def __sub__(self, other: Size) -> Size:
        return Size(self.raw - other.raw, self.qp - other.qp, self.eight - other.eight)

    def sent(self, eight_bit: bool = False) -> int:
        """The part's weight as sent: the smallest of its encodings (``mime.sent_size``),
        8bit among them when the transport carries it."""
        sent = min(self.qp, base64_size(self.raw))
        return min(sent, self.eight) if eight_bit else sent


#: What a whole part that cannot be 8bit data weighs in 8bit: more than any budget, so a
#: plan whose frame carries it is weighed in its other encodings (and checked for real).
NOT_8BIT = 10**9


def size_of(text: str, *, whole: bool = True, exact: bool = True, eight_bit: bool = False,
            html: bool = False) -> Size:
    """``text`` weighed in each unit as ``mime.encode_body`` encodes a part body: exactly
    for a ``whole`` part, without the line end it adds at the end of one for a piece. Not
    ``exact``, quoted-printable is only bounded from below (every byte above ASCII costs
    three): enough where base64 wins anyway, and three times cheaper on Chinese. 8bit is
    weighed only when ``eight_bit`` (a whole ``html`` part folded, as it would be sent)."""
    data = text.replace("\r\n", "\n").encode("utf-8")
    eight = 0
    if eight_bit:
        if whole:
            body = eight_bit_body(text, html=html)
            eight = NOT_8BIT if body is None else len(body)
        else:
            eight = len(data) + data.count(b"\n")
    if not exact:
        return Size(len(data), len(data) + 2 * len(data.translate(None, _ASCII))
                    + data.count(b"\n"), eight)
    qp = binascii.b2a_qp(data, quotetabs=False, istext=True, header=False)
    ending = 1 if whole and qp and not qp.endswith(b"\n") else 0
    return Size(len(data), len(qp) + ending + qp.count(b"\n") + ending, eight)


_ASCII = bytes(range(128))


def base64_size(raw: int) -> int:
    """Bytes of ``raw`` bytes in base64 as ``mime.encode_body`` writes it: lines of 76
    characters, each ended by CRLF."""
    chars = 4 * -(-raw // 3)
    return chars + 2 * -(-chars // 76)


@dataclass(frozen=True)
class Marks:
    """The marks of one rendering: a nonce, and what a template's ``fit()`` prints."""

    nonce: str = field(default_factory=lambda: secrets.token_hex(6))

    def __call__(self, kind: str, key: object = "") -> Markup:
        return Markup(f"<!--fit:{self.nonce}:{kind}:{key}-->")  # noqa: S704 - our own text

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(rf"<!--fit:{self.nonce}:([a-z]):([^<>]*?)-->")


def no_mark(kind: str, key: object = "") -> str:
    """``fit()`` outside a measurement: prints nothing."""
    return ""


@dataclass(frozen=True)
class Measured:
    """One part of one rendering, cut at its marks."""

    #: The part without its marks: what is sent.
    text: str
    #: The whole part as sent (exact: ``total.sent()`` is ``render.weight(text)``).
    total: Size
    #: Everything outside the marked pieces (with placeholders weighed as real links).
    frame: Size
    #: (kind, key) → the piece's size.
    pieces: dict[tuple[str, str], Size]

    def get(self, kind: str, key: object) -> Size:
        return self.pieces.get((kind, str(key)), _ZERO)


_ZERO = Size()


def measure(marked: str, marks: Marks | None, finish: Callable[[str], str],
            as_sent: Callable[[str], str], *, eight_bit: bool = False,
            html: bool = False) -> Measured:
    """Cut ``marked`` at its marks. ``finish`` turns mark-free text into the part (the text
    part's wrapping, which works line by line); ``as_sent`` is the part as one recipient
    gets it (placeholders become links as long as real ones); ``eight_bit`` weighs 8bit
    too (``html``: the part is HTML, folded as sent). Without ``marks`` (a rendering drawn
    only to be weighed) the part is weighed whole and has no pieces."""
    if marks is None:
        part = finish(marked)
        total = size_of(as_sent(part), eight_bit=eight_bit, html=html)
        return Measured(part, total, total, {})
    pattern = marks.pattern
    found = list(pattern.finditer(marked))
    part = finish(pattern.sub("", marked))
    total = size_of(as_sent(part), eight_bit=eight_bit, html=html)
    # Where quoted-printable loses by far (Chinese), its exact size does not matter.
    exact = total.qp < 1.2 * base64_size(total.raw)
    pieces: dict[tuple[str, str], Size] = {}
    for at, here in enumerate(found):
        kind, key = here.group(1), here.group(2)
        if kind == END:
            continue
        end = found[at + 1].start() if at + 1 < len(found) else len(marked)
        size = size_of(as_sent(finish(marked[here.end():end])), whole=False, exact=exact,
                       eight_bit=eight_bit)
        pieces[(kind, key)] = pieces.get((kind, key), _ZERO) + size
    return Measured(part, total, total - sum(pieces.values(), _ZERO), pieces)


def first_fitting(count: int, estimate: Callable[[int], tuple[int, int]],
                  draw: Callable[[int], tuple[int, int]], budget: int,
                  known: Iterable[tuple[int, tuple[int, int]]] = (), *,
                  guided: bool = True) -> int | None:
    """The first of ``count`` plans (best first: the most shown in full) that fits.

    ``estimate(j)`` is (html, text) as sent by the measurements, ``draw(j)`` renders plan
    ``j`` and returns its real (html, text) as sent; ``known`` are plans already drawn.
    Returns None when not even the last plan fits. Plan -1 is taken to be over budget.
    Not ``guided`` (the rendering carried no marks, so the estimates know nothing), it
    bisects from the start.
    """
    state = _Search()
    for j, real in known:
        state.note(j, real, estimate(j), budget)
    steps = 0 if guided else GUIDED_STEPS
    while not state.done(count):
        end = count if state.fits is None else state.fits
        if steps < GUIDED_STEPS:
            pick = next((j for j in range(state.over + 1, end)
                         if max(e + d for e, d in zip(estimate(j), state.error, strict=True))
                         - SLACK <= budget), None)
            if pick is None:
                if state.fits is not None and state.error == (0, 0):
                    break  # the estimates were exact: everything before the fit is over
                # Nothing before the plan that fits is estimated to, but the estimates were
                # off: the plan just before it is drawn all the same, and the search ends
                # once a drawn plan is over.
                pick = count - 1 if state.fits is None else state.fits - 1
        else:
            pick = (state.over + end) // 2  # bisection, as the old search
        steps += 1
        state.note(pick, draw(pick), estimate(pick), budget)
    return state.fits


@dataclass
class _Search:
    """What the renderings drawn so far have shown."""

    #: The last plan known to be over budget (-1: the one before the first).
    over: int = -1
    #: The first plan known to fit.
    fits: int | None = None
    #: (html, text): how far the last rendering was from its estimate.
    error: tuple[int, int] = (0, 0)

    def note(self, j: int, real: tuple[int, int], guess: tuple[int, int], budget: int
             ) -> None:
        self.error = (real[0] - guess[0], real[1] - guess[1])
        if max(real) <= budget:
            self.fits = j if self.fits is None else min(self.fits, j)
        else:
            self.over = max(self.over, j)

    def done(self, count: int) -> bool:
        if self.fits is None:
            return self.over >= count - 1
        return self.fits <= self.over + 1
