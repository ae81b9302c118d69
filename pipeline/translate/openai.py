"""The ``openai`` translator: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

A vLLM server is the natural one. Retries with exponential backoff on 429, 5xx, timeouts and
refused connections, honouring ``Retry-After``; other 4xx fail at once (a wrong key or model
does not get better).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from pipeline import retry
from pipeline.core.issue.translate_guard import OPEN
from pipeline.errors import ConfigError, TranslateError
from pipeline.http import HttpError, post_json, retry_after
from pipeline.translate import API_KEY_VARIABLE, LANGUAGE_NAMES, Translator
from pipeline.week import now

__all__ = ["OpenAITranslator", "system_prompt"]

#: The most a chat completion may answer, in bytes (one translated text is far less).
MAX_ANSWER_BYTES = 10_000_000


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


class _Retryable(Exception):
    """A failure worth another attempt (429, 5xx, timeout, refused connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\n(.*)\n```$", re.S)
_QUOTES = {'"': '"', "“": "”", "「": "」", "'": "'"}


class OpenAITranslator(Translator):
    """An OpenAI-compatible chat-completions endpoint (vLLM, OpenAI, any compatible server).

    ``api_key`` None sends no ``Authorization`` (a local vLLM needs none). A ``Retry-After``
    longer than ``max_wait`` gives up at once rather than sleep through the build.
    """

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 max_wait: float = 60.0, sleep: Callable[[float], None] = time.sleep) -> None:
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
        try:
            answer = retry.call(lambda: self._post(body), retry_on=_Retryable,
                                attempts=self.retries + 1, wait=self._wait,
                                max_wait=self.max_wait, sleep=self._sleep)
        except retry.GaveUp as exc:
            if exc.why == "too long":
                raise self._error(f"{exc.last}; the server asks to wait {exc.wait:.0f}s, "
                                  f"more than {self.max_wait:.0f}s") from exc.last
            raise self._error(f"gave up after {exc.attempts} attempts: "
                              f"{exc.last}") from exc.last
        return _clean_answer(self._content(answer), text)

    def _wait(self, attempt: int, failure: _Retryable) -> float:
        """The server's ``Retry-After``, else ``backoff`` doubling up to ``max_wait``."""
        if failure.retry_after is not None:
            return failure.retry_after
        return retry.backoff(attempt, base=self.backoff, cap=self.max_wait, jitter="none")

    def close(self) -> None:
        """Nothing to release: each call opens its own connection."""

    def _error(self, message: str) -> TranslateError:
        return TranslateError(f"{self.url}: {message}", backend=self.name)

    def _post(self, body: bytes) -> bytes:
        headers = {"User-Agent": "vllm-pr-weekly"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            response = post_json(self.url, body, headers, timeout=self.timeout,
                                 max_bytes=MAX_ANSWER_BYTES)
        except HttpError as exc:
            if exc.kind == "too large":
                raise self._error(f"the answer is larger than {MAX_ANSWER_BYTES:,} bytes"
                                  ) from exc
            said = (f"cannot reach the server: {exc.reason}" if exc.kind == "unreachable"
                    else f"no complete answer: {exc.reason!r}")
            if exc.transient:
                raise _Retryable(said) from exc
            raise self._error(said) from exc
        if 200 <= response.status < 300:
            return response.body
        said = f"HTTP {response.status}{_error_detail(response.body)}"
        if response.status == 429 or response.status >= 500:
            raise _Retryable(said, retry_after(response.headers.get("retry-after"), now()))
        hint = {401: f" (check {API_KEY_VARIABLE})", 403: f" (check {API_KEY_VARIABLE})",
                404: " (check [translate] base_url and model)"}.get(response.status, "")
        raise self._error(said + hint)

    def _content(self, answer: bytes) -> str:
        try:
            choice = json.loads(answer)["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise self._error(f"not a chat completion: {answer[:200]!r}") from exc
        if choice.get("finish_reason") == "length":
            raise self._error("the answer was cut off (finish_reason=length)")
        if not isinstance(content, str):
            raise self._error(f"the answer has no text: {content!r}")
        return content


def _error_detail(raw: bytes) -> str:
    """``: <message>`` from an error body (OpenAI's ``{"error": {"message": …}}`` or text)."""
    raw = raw[:2000]
    try:  # an empty body is no JSON either: no detail
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message") if isinstance(error, dict) else error
    except ValueError:
        message = raw.decode("utf-8", "replace")
    text = " ".join(str(message or "").split())[:200]
    return f": {text}" if text else ""


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
