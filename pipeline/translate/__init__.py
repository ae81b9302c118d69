"""Machine translation: one :class:`Translator` interface, two adapters, a memory, the guard.

Off by default (``[translate] backend = "none"``). DESIGN.md puts machine translation last in
the precedence of texts (editor, feed, GitHub title, machine); this module only turns one text
into another language, safely:

    protect (translate_guard) → memory lookup → Translator.translate → restore → clean_html
                                   hit: no call                      GuardError: rejected,
                                                                     not remembered

Adapters, each converting its own errors at its edge into :class:`TranslateError` (keeping the
cause) and letting anything unexpected through:

- ``openai`` (:class:`OpenAITranslator`): any OpenAI-compatible ``/v1/chat/completions``
  endpoint (a vLLM server is the natural one), over the standard library's urllib. Retries with
  exponential backoff on 429, 5xx, timeouts and refused connections, honouring
  ``Retry-After``; other 4xx fail at once (a wrong key or model does not get better).
- ``aws`` (:class:`AwsTranslator`): Amazon Translate ``TranslateText`` through boto3. Region,
  endpoint and credentials are AWS's own settings. botocore's standard retry mode handles
  throttling (the call is a pure function: repeating it is harmless).

The memory (:class:`TranslationMemory`, SQLite in the data folder) keys each result by the
sha256 of the source text, the backend, the model and the target language: a re-run makes no
call and yields identical text, and changing the model translates afresh.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.aws import aws_client
from pipeline.config import Settings, TranslateSettings
from pipeline.core.sanitize import clean_html, letter_counts, one_line
from pipeline.core.translate_guard import OPEN, GuardError, protect, restore
from pipeline.errors import ConfigError, OutputError, TranslateError
from pipeline.week import now

if TYPE_CHECKING:
    from mypy_boto3_translate import TranslateClient

__all__ = [
    "API_KEY_VARIABLE",
    "MEMORY_FILE",
    "AwsTranslator",
    "OpenAITranslator",
    "Translation",
    "TranslationMemory",
    "Translator",
    "memory_path",
    "open_translator",
    "system_prompt",
    "translate_html",
]

#: The one secret of this module, read from the environment only.
API_KEY_VARIABLE = "NEWSLETTER_TRANSLATE_API_KEY"
#: The memory's file name inside ``[paths] data_dir``.
MEMORY_FILE = "translations.sqlite3"

#: How prompts name the languages.
LANGUAGE_NAMES = {"zh": "Simplified Chinese", "en": "English"}
#: Amazon Translate's codes ("zh" is Simplified Chinese).
AWS_LANGUAGE_CODES = {"zh": "zh", "en": "en"}
#: TranslateText's limit on ``Text``, in UTF-8 bytes (Amazon Translate quotas, 2022-12 on).
AWS_MAX_BYTES = 10_000


class Translator(Protocol):
    """Turns one text into another language in one call.

    ``text`` holds ``⟦n⟧`` placeholders that must come back unchanged (the guard checks).
    ``source`` and ``target`` are ``zh`` or ``en``. Raises :class:`TranslateError` and nothing
    else for a failure of the service; safe to call from several threads.
    """

    #: ``openai`` or ``aws``: recorded as ``machine:<name>``.
    name: str
    #: The model (``amazon-translate`` for aws); part of the memory's key.
    model: str

    def translate(self, text: str, source: str, target: str) -> str: ...


@dataclass(frozen=True)
class Translation:
    """The outcome of translating one text."""

    #: Restored, sanitized HTML (a one-line plain title for titles); None when rejected.
    text: str | None
    #: Provenance for ``issue.json``: ``machine:<backend>``.
    source: str
    #: Why the translation was refused (for the proof report); None when accepted.
    rejected: str | None
    #: Whether it came from the translation memory (no call was made).
    cached: bool


# -- the prompt ------------------------------------------------------------------------------


def system_prompt(source: str, target: str) -> str:
    """The instructions sent with every text to an LLM backend."""
    src, tgt = LANGUAGE_NAMES[source], LANGUAGE_NAMES[target]
    return (
        f"You translate {src} into {tgt} for \"vLLM PR Weekly\", a technical newsletter in "
        "which senior engineers review pull requests of vLLM, the LLM inference and serving "
        f"engine. Write as a senior engineer writes for peers: precise, concise, idiomatic "
        f"{tgt}, the field's usual terms (KV cache, prefill, decode, kernel, CUDA graph, "
        "speculative decoding), no marketing tone, no softening of the reviewer's verdict.\n"
        "Rules:\n"
        f"1. The text contains placeholders written {OPEN}1⟧, {OPEN}2⟧ and so on. Each stands "
        "for code, markup, a path, a number, a reference or a link. Keep every placeholder "
        "exactly once and unchanged: same number, same brackets, no spaces inside. You may "
        f"move a placeholder where {tgt} word order needs it.\n"
        "2. Translate only the prose. Never translate, explain, expand, merge or drop "
        "anything a placeholder stands for.\n"
        "3. Add nothing: no notes, no preface, no explanation, no quotation marks or code "
        "fences around the answer.\n"
        "4. Answer with the translation only."
    )


# -- openai ----------------------------------------------------------------------------------


class _Retryable(Exception):
    """A failure worth another attempt (429, 5xx, timeout, refused connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\n(.*)\n```$", re.S)
_QUOTES = {'"': '"', "“": "”", "「": "」", "'": "'"}


class OpenAITranslator:
    """An OpenAI-compatible chat-completions endpoint (vLLM, OpenAI, any compatible server).

    ``base_url`` may end in ``/v1`` or not. ``api_key`` None sends no ``Authorization`` (a
    local vLLM server needs none). ``retries`` is the number of attempts after the first;
    waits start at ``backoff`` seconds and double, unless the server says ``Retry-After``
    (a wait longer than ``max_wait`` gives up at once rather than sleep through the build).
    """

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 max_wait: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not re.match(r"^https?://[^\s/]+", base_url):
            raise ConfigError(f"expected an http(s) URL, got {base_url!r}",
                              key="[translate] base_url")
        if not model:
            raise ConfigError("the openai backend needs a model name", key="[translate] model")
        base = base_url.rstrip("/")
        self.url = (base if base.endswith("/v1") else base + "/v1") + "/chat/completions"
        self.model = model
        self._api_key = api_key or None
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_wait = max_wait
        self._sleep = sleep

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAITranslator({self.url!r}, model={self.model!r})"

    def translate(self, text: str, source: str, target: str) -> str:
        """One chat completion; retried on 429/5xx/timeouts, then :class:`TranslateError`."""
        body = json.dumps({
            "model": self.model,
            "temperature": 0.1,
            "messages": [
                {"role": "system", "content": system_prompt(source, target)},
                {"role": "user", "content": text},
            ],
        }, ensure_ascii=False).encode("utf-8")
        attempts = self.retries + 1
        for attempt in range(attempts):
            try:
                answer = self._post(body)
            except _Retryable as exc:
                wait = exc.retry_after
                if wait is not None and wait > self.max_wait:
                    raise self._error(f"{exc.message}; the server asks to wait {wait:.0f}s, "
                                      f"more than {self.max_wait:.0f}s") from exc
                if attempt + 1 == attempts:
                    raise self._error(f"gave up after {attempts} attempts: "
                                      f"{exc.message}") from exc
                self._sleep(min(self.max_wait, wait if wait is not None
                                else self.backoff * 2 ** attempt))
                continue
            return _clean_answer(self._content(answer), text)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Nothing to release: each call opens its own connection."""

    def _error(self, message: str) -> TranslateError:
        return TranslateError(f"{self.url}: {message}", backend=self.name)

    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json; charset=utf-8",
                   "Accept": "application/json", "User-Agent": "vllm-pr-weekly"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        # The scheme was checked to be http(s) in __init__.
        request = urllib.request.Request(self.url, data=body, headers=headers,  # noqa: S310
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                answer: bytes = response.read()
                return answer
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            said = f"HTTP {exc.code}{detail}"
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(said, _retry_after(exc.headers.get("Retry-After"))) from exc
            hint = {401: f" (check {API_KEY_VARIABLE})", 403: f" (check {API_KEY_VARIABLE})",
                    404: " (check [translate] base_url and model)"}.get(exc.code, "")
            raise self._error(said + hint) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | ConnectionError):
                raise _Retryable(f"cannot reach the server: {exc.reason}") from exc
            raise self._error(f"cannot reach the server: {exc.reason}") from exc
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            raise _Retryable(f"no complete answer: {exc!r}") from exc

    def _content(self, answer: bytes) -> str:
        try:
            payload = json.loads(answer)
            choice = payload["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise self._error(f"not a chat completion: {answer[:200]!r}") from exc
        if choice.get("finish_reason") == "length":
            raise self._error("the answer was cut off (finish_reason=length)")
        if not isinstance(content, str):
            raise self._error(f"the answer has no text: {content!r}")
        return content


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """``: <message>`` from an error body (OpenAI's ``{"error": {"message": …}}`` or text);
    the body is read and closed."""
    body = getattr(exc, "fp", None)
    if body is None:
        return ""
    try:
        raw = body.read(2000)
    except (OSError, http.client.HTTPException):
        return ""
    finally:
        body.close()
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message") if isinstance(error, dict) else error
    except ValueError:
        message = raw.decode("utf-8", "replace")
    text = " ".join(str(message or "").split())[:200]
    return f": {text}" if text else ""


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now()).total_seconds())


def _clean_answer(content: str, source_text: str) -> str:
    """The translation without what some models wrap around it: a leading ``<think>`` block
    (reasoning models served without a reasoning parser), a code fence, enclosing quotes."""
    text = _THINK.sub("", content).strip()
    fenced = _FENCE.match(text)
    if fenced and not source_text.lstrip().startswith("```"):
        text = fenced[1].strip()
    if (len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]
            and not source_text.lstrip().startswith(text[0])):
        text = text[1:-1].strip()
    return text


# -- aws -------------------------------------------------------------------------------------


def translate_client(region: str | None = None, *, connect_timeout: float = 10.0,
                     read_timeout: float = 60.0, max_attempts: int = 4) -> TranslateClient:
    """An Amazon Translate client, on a fresh boto3 session (see
    :func:`pipeline.transport.ses.ses_client` for why), with botocore's standard retries:
    TranslateText has no side effect, so throttling and 5xx answers are safely
    repeated with backoff."""
    return aws_client("translate", region=region, what="the aws backend",
                      key="[translate] backend",
                      retries={"total_max_attempts": max_attempts, "mode": "standard"},
                      connect_timeout=connect_timeout, read_timeout=read_timeout)


class AwsTranslator:
    """Amazon Translate's ``TranslateText`` (zh ↔ en); ``client`` lets a caller pass a client it
    built (and owns), e.g. one under botocore's ``Stubber``."""

    name = "aws"
    model = "amazon-translate"

    def __init__(self, region: str | None = None,
                 client: TranslateClient | None = None) -> None:
        self._owns_client = client is None
        self._client = client if client is not None else translate_client(region)

    @property
    def client(self) -> TranslateClient:
        return self._client

    def translate(self, text: str, source: str, target: str) -> str:
        """One ``TranslateText`` call; botocore errors become :class:`TranslateError`."""
        from botocore.exceptions import (
            ClientError,
            HTTPClientError,
            NoCredentialsError,
            PartialCredentialsError,
        )
        from botocore.exceptions import ConnectionError as NeverConnected

        size = len(text.encode("utf-8"))
        if size > AWS_MAX_BYTES:
            raise TranslateError(f"the text is {size:,} bytes; TranslateText takes at most "
                                 f"{AWS_MAX_BYTES:,}", backend=self.name)
        try:
            response = self._client.translate_text(
                Text=text,
                SourceLanguageCode=AWS_LANGUAGE_CODES[source],
                TargetLanguageCode=AWS_LANGUAGE_CODES[target],
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "")) or str(
                exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            message = " ".join(str(error.get("Message", "")).split())
            raise TranslateError(f"{code}: {message}" if message else code,
                                 backend=self.name) from exc
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise TranslateError(f"no usable AWS credentials ({exc}); set AWS_ACCESS_KEY_ID/"
                                 "AWS_SECRET_ACCESS_KEY or a profile", backend=self.name) from exc
        except (NeverConnected, HTTPClientError) as exc:  # endpoint unreachable, timeouts
            raise TranslateError(f"cannot reach Amazon Translate: {exc}",
                                 backend=self.name) from exc
        return str(response["TranslatedText"]).strip()

    def close(self) -> None:
        """Close the client this translator built (a client passed in stays its owner's)."""
        if self._owns_client:
            self._client.close()


# -- choosing a backend ----------------------------------------------------------------------


def open_translator(settings: Settings | TranslateSettings,
                    environ: Mapping[str, str]) -> Translator | None:
    """The configured backend, or None when ``[translate] backend = "none"``.

    ``openai`` needs ``base_url`` and ``model``; its key comes from
    ``NEWSLETTER_TRANSLATE_API_KEY`` only (optional: a local vLLM server needs none).
    ``aws`` needs an AWS region from AWS's own settings.
    """
    conf = settings.translate if isinstance(settings, Settings) else settings
    if conf.backend == "none":
        return None
    if conf.backend == "openai":
        if not conf.base_url:
            raise ConfigError("the openai backend needs the server's URL "
                              "(e.g. http://127.0.0.1:8000/v1)", key="[translate] base_url")
        if not conf.model:
            raise ConfigError("the openai backend needs a model name", key="[translate] model")
        return OpenAITranslator(conf.base_url, conf.model, environ.get(API_KEY_VARIABLE) or None)
    if conf.backend == "aws":
        return AwsTranslator()
    raise ConfigError(f"expected one of none, openai, aws, got {conf.backend!r}",
                      key="[translate] backend")


# -- the memory ------------------------------------------------------------------------------


def memory_path(settings: Settings) -> Path:
    """``<[paths] data_dir>/translations.sqlite3``."""
    return settings.resolve(settings.paths.data_dir) / MEMORY_FILE


_SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    source_sha256 TEXT NOT NULL,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    target TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (source_sha256, backend, model, target)
) WITHOUT ROWID
"""


class TranslationMemory:
    """Accepted translations in one SQLite file (WAL), keyed by (sha256 of the source text,
    backend, model, target language). One connection behind a lock: safe across threads;
    other processes wait for each other through ``busy_timeout``. Storage failures raise
    :class:`OutputError` naming the file."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        """Use :meth:`open`."""
        self.path = path
        self._conn = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str, *, timeout: float = 10.0) -> TranslationMemory:
        """Open, creating the folder, the file and the table if needed."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise OutputError(f"translation memory {path}: cannot open: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise OutputError(f"translation memory {path}: {exc}") from exc
        return cls(path, conn)

    def close(self) -> None:
        """Close the connection (idempotent); every put is already committed."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> TranslationMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TranslationMemory({str(self.path)!r})"

    @staticmethod
    def key(source_text: str) -> str:
        """The sha256 (hex) of the source text, as the memory keys it."""
        return hashlib.sha256(source_text.encode("utf-8")).hexdigest()

    def get(self, source_text: str, *, backend: str, model: str, target: str) -> str | None:
        """The remembered translation, or None."""
        rows = self._run("SELECT text FROM translations WHERE source_sha256 = ? "
                         "AND backend = ? AND model = ? AND target = ?",
                         (self.key(source_text), backend, model, target))
        return str(rows[0][0]) if rows else None

    def put(self, source_text: str, text: str, *, backend: str, model: str,
            target: str) -> None:
        """Remember a translation (replacing what was there for the same key)."""
        self._run("INSERT INTO translations (source_sha256, backend, model, target, text) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_sha256, backend, model, target) "
                  "DO UPDATE SET text = excluded.text",
                  (self.key(source_text), backend, model, target, text))

    def __len__(self) -> int:
        return int(self._run("SELECT count(*) FROM translations", ())[0][0])

    def _run(self, sql: str, params: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """One statement under the lock (autocommit), its rows fetched."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise OutputError(f"translation memory {self.path}: {exc}") from exc


# -- translating one text --------------------------------------------------------------------

_LETTER = re.compile(r"[^\W\d_]")
_PLACEHOLDERS = re.compile(r"⟦[^⟦⟧]*⟧")
_BLOCK_SPACE = re.compile(r"\s*(</?(?:p|ul|ol|li|blockquote)\b[^>]*>)\s*")
#: Above this share of Chinese characters among the letters, a text is not English.
_MAX_CJK_IN_ENGLISH = 0.1


def translate_html(translator: Translator, memory: TranslationMemory | None, html: str,
                   source: str, target: str, *, title: bool = False) -> Translation:
    """Translate one sanitized HTML body (or, with ``title``, one plain headline).

    A hit in ``memory`` makes no call and returns exactly the text remembered. A translation
    the guard refuses, or that is empty or not in the target language, comes back
    ``rejected`` (text None) and is not remembered. :class:`TranslateError` from the backend
    propagates: the caller decides whether one failure stops the build.
    """
    if source not in LANGUAGE_NAMES or target not in LANGUAGE_NAMES or source == target:
        raise ValueError(f"cannot translate {source!r} into {target!r}")
    origin = f"machine:{translator.name}"
    key = {"backend": translator.name, "model": translator.model, "target": target}
    if memory is not None:
        remembered = memory.get(html, **key)
        if remembered is not None:
            return Translation(remembered, origin, None, cached=True)
    guarded = protect(html)
    prose = _PLACEHOLDERS.sub(" ", guarded.text)
    if not _LETTER.search(prose):  # nothing but code, figures and markup: nothing to call for
        return Translation(_finish(html, title), origin, None, cached=False)
    answer = translator.translate(guarded.text, source, target)
    try:
        restored = restore(guarded, answer)
    except GuardError as exc:
        return Translation(None, origin, f"code or markup not kept: {exc.reason}",
                           cached=False)
    problem = _language_problem(_PLACEHOLDERS.sub(" ", answer), target)
    if problem:
        return Translation(None, origin, problem, cached=False)
    text = _finish(restored, title)
    if not text:
        return Translation(None, origin, "the translation is empty", cached=False)
    if memory is not None:
        memory.put(html, text, **key)
    return Translation(text, origin, None, cached=False)


def _finish(text: str, title: bool) -> str:
    """A title as one plain line; a body tidied around block tags and sanitized again."""
    if title:
        return one_line(text)
    return clean_html(_BLOCK_SPACE.sub(r"\1", text))


def _language_problem(prose: str, target: str) -> str | None:
    """Why the prose of an answer is not in ``target`` (a model that echoed its input), or
    None. English may quote no Chinese to speak of; Chinese must hold some Chinese."""
    cjk, latin = letter_counts(prose)
    if target == "en" and cjk and cjk > _MAX_CJK_IN_ENGLISH * (cjk + latin):
        return (f"the translation is not in English ({cjk} of {cjk + latin} letters are "
                "Chinese)")
    if target == "zh" and cjk == 0 and latin:
        return "the translation is not in Chinese (no Chinese character in it)"
    return None
