"""Machine translation (pipeline/translate/): the openai backend against an OpenAI-compatible
server on 127.0.0.1, the aws backend through botocore's Stubber (moto has no Translate), the
translation memory, and choosing a backend from the settings."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from support.http_server import Answer, HttpServer, Reply, Request
from support.project import seed_reviews
from support.servers import aws_environment

from pipeline.config import Settings, TranslateSettings, load
from pipeline.core.issue.sanitize import clean_html, text_to_html
from pipeline.core.issue.translate_guard import protect
from pipeline.errors import ConfigError, NewsletterError, TranslateError
from pipeline.stages.machine_translation import translate_html
from pipeline.translate import API_KEY_VARIABLE, Translation
from pipeline.translate.aws import AwsTranslator, translate_client
from pipeline.translate.memory import TranslationMemory, memory_path
from pipeline.translate.openai import OpenAITranslator
from pipeline.wiring import open_translator

PLACEHOLDER = re.compile(r"(⟦\d+⟧)")
CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
MODEL = "Qwen/Qwen3-30B-A3B-Instruct"


REVIEWS = seed_reviews()
BODY = clean_html(text_to_html(REVIEWS[0][1]))


def fake_translation(text: str, target: str) -> str:
    """The fake server's deterministic 'translation': placeholders kept as they are; into
    English, each run of Chinese characters becomes "zh" and all prose is upper-cased; into
    Chinese, each Latin word becomes 中文."""
    out = []
    for part in PLACEHOLDER.split(text):
        if PLACEHOLDER.fullmatch(part):
            out.append(part)
        elif target == "en":
            out.append(CJK_RUN.sub("zh", part).upper())
        else:
            out.append(re.sub(r"[A-Za-z]+", "中文", part))
    return "".join(out)


def drop_first_placeholder(text: str, target: str) -> str:
    return fake_translation(PLACEHOLDER.sub("", text, count=1), target)


@dataclass
class FakeLLM:
    """An OpenAI-compatible ``/v1/chat/completions`` on loopback, recording each request.

    ``script`` holds answers given before translating again; ``answer`` is the translation
    rule; ``finish_reason`` what each completion reports."""

    server: HttpServer = field(init=False)
    script: deque[Reply] = field(default_factory=deque)
    answer: Callable[[str, str], str] = fake_translation
    finish_reason: str = "stop"

    @property
    def url(self) -> str:
        return self.server.url()

    @property
    def requests(self) -> list[Request]:
        return self.server.requests

    def fail(self, status: int, times: int = 1, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": {"message": f"fake failure {status}",
                                     "type": "server_error"}}).encode()
        self.script.extend([Reply(status, body, headers or {})] * times)

    def reply(self, request: Request) -> Reply:
        if self.script:
            return self.script.popleft()
        asked = request.json()
        messages = asked["messages"]
        target = "en" if "into English" in messages[0]["content"] else "zh"
        content = self.answer(messages[1]["content"], target)
        completion = {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
            "model": asked["model"],
            "choices": [{"index": 0, "finish_reason": self.finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return Reply(200, json.dumps(completion).encode(), {"Content-Type": "application/json"})


@pytest.fixture
def llm(serve_http: Callable[[Answer], HttpServer]) -> FakeLLM:
    fake = FakeLLM()
    fake.server = serve_http(fake.reply)
    return fake


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[TranslationMemory]:
    with TranslationMemory.open(tmp_path / "data" / "translations.sqlite3") as mem:
        yield mem


def openai(llm: FakeLLM, **kw: Any) -> tuple[OpenAITranslator, list[float]]:
    waits: list[float] = []
    kw.setdefault("backoff", 0.5)
    return OpenAITranslator(llm.url, MODEL, kw.pop("api_key", None), sleep=waits.append,
                            **kw), waits


def code_spans(html: str) -> list[str]:
    return re.findall(r"<code>.*?</code>", html)


# -- openai ----------------------------------------------------------------------------------


def test_openai_request_carries_model_temperature_prompt_direction_and_key(
        llm: FakeLLM) -> None:
    translator, _ = openai(llm, api_key="sk-test")
    result = translate_html(translator, None, BODY, "zh", "en")

    assert len(llm.requests) == 1
    seen = llm.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.headers["content-type"].startswith("application/json")
    assert seen.json()["model"] == MODEL
    assert seen.json()["temperature"] == 0.1
    system, user = seen.json()["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    assert "placeholder" in system["content"] and "⟦1⟧" in system["content"]
    assert "exactly once" in system["content"]
    assert "Simplified Chinese into English" in system["content"]
    assert "newsletter" in system["content"] and "vLLM" in system["content"]
    assert user["content"] == protect(BODY).text

    assert result == Translation(result.text, "machine:openai", None, cached=False)
    assert result.text is not None
    assert code_spans(result.text) == code_spans(BODY)
    assert "FAIL CLOSED" in result.text and "值得" not in result.text
    assert clean_html(result.text) == result.text
    into_chinese = translate_html(translator, None, "<p>Worth a close read: <code>flush()</code> "
                                  "now drains.</p>", "en", "zh")
    assert into_chinese.text == "<p>中文 中文 中文 中文: <code>flush()</code> 中文 中文.</p>"
    assert "English into Simplified Chinese" in llm.requests[1].json()["messages"][0]["content"]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(llm: FakeLLM, suffix: str) -> None:
    translator = OpenAITranslator(llm.url + suffix, MODEL, None)
    assert translator.url == f"{llm.url}/v1/chat/completions"
    assert translator.translate("你好", "zh", "en") == "ZH"


@pytest.mark.parametrize(("status", "times", "headers", "waited"), [
    (429, 1, {"Retry-After": "0"}, [0.0]),  # honouring Retry-After
    (503, 2, {}, [0.25, 0.5]),  # backing off exponentially
])
def test_429_or_5xx_then_200_is_retried(llm: FakeLLM, status: int, times: int,
                                        headers: dict[str, str], waited: list[float]) -> None:
    llm.fail(status, times=times, headers=headers)
    translator, waits = openai(llm, backoff=0.25)
    assert translator.translate("你好", "zh", "en") == "ZH"
    assert waits == waited
    assert len(llm.requests) == times + 1


def test_persistent_500_gives_up_with_a_translate_error(llm: FakeLLM) -> None:
    llm.fail(500, times=10)
    translator, waits = openai(llm, retries=3)
    with pytest.raises(TranslateError) as caught:
        translator.translate("你好", "zh", "en")
    assert len(llm.requests) == 4
    assert len(waits) == 3
    error = caught.value
    assert error.backend == "openai" and error.exit_code == 1
    assert isinstance(error, NewsletterError)
    assert "gave up after 4 attempts" in str(error) and "HTTP 500" in str(error)
    assert "fake failure 500" in str(error)


@pytest.mark.parametrize(("status", "headers", "said"), [
    (429, {"Retry-After": "3600"}, "asks to wait 3600s"),  # beyond the limit
    (401, {}, f"HTTP 401.*{API_KEY_VARIABLE}"),  # unauthorized: names the key's variable
])
def test_a_long_retry_after_or_unauthorized_gives_up_at_once(llm: FakeLLM, status: int,
                                                             headers: dict[str, str],
                                                             said: str) -> None:
    llm.fail(status, times=5, headers=headers)
    translator, waits = openai(llm, api_key="wrong")
    with pytest.raises(TranslateError, match=said) as caught:
        translator.translate("你好", "zh", "en")
    assert len(llm.requests) == 1 and waits == []
    assert "wrong" not in str(caught.value)


@pytest.mark.parametrize(("server", "said"), [("silent_server", "gave up after 3 attempts"),
                                            ("unused_port", "cannot reach the server")])
def test_a_silent_server_times_out_and_a_refused_connection_is_retried_then_reported(
        request: pytest.FixtureRequest, server: str, said: str) -> None:
    found = request.getfixturevalue(server)
    host, port = found if server == "silent_server" else ("127.0.0.1", found)
    waits: list[float] = []
    translator = OpenAITranslator(f"http://{host}:{port}", MODEL, None, timeout=0.2,
                                  retries=2, sleep=waits.append)
    with pytest.raises(TranslateError, match=said):
        translator.translate("你好", "zh", "en")
    assert len(waits) == 2


@pytest.mark.parametrize("said", ["cut off", "not a chat completion"])
def test_a_cut_off_or_non_completion_answer_is_an_error(llm: FakeLLM, said: str) -> None:
    if said == "cut off":
        llm.finish_reason = "length"
    else:
        llm.script.append(Reply(200, b'{"object": "list"}', {"Content-Type": "application/json"}))
    translator, _ = openai(llm)
    with pytest.raises(TranslateError, match=said):
        translator.translate("你好", "zh", "en")


def test_reasoning_fences_and_quotes_around_the_answer_are_removed(llm: FakeLLM) -> None:
    answers = deque(["<think>The user wants English.</think>\n\nHELLO ⟦1⟧",
                     "```\nHELLO ⟦1⟧\n```", "“HELLO ⟦1⟧”"])
    llm.answer = lambda text, target: answers.popleft()
    translator, _ = openai(llm)
    for _ in range(3):
        assert translator.translate("你好 ⟦1⟧", "zh", "en") == "HELLO ⟦1⟧"


def test_an_answer_still_in_the_source_language_is_rejected(
        llm: FakeLLM, memory: TranslationMemory) -> None:
    llm.answer = lambda text, target: text  # echoes its input
    translator, _ = openai(llm)
    result = translate_html(translator, memory, BODY, "zh", "en")
    assert result.text is None and result.rejected is not None
    assert "not in English" in result.rejected
    english = "<p>Worth a close read: the scheduler now drains.</p>"
    result = translate_html(translator, memory, english, "en", "zh")
    assert result.text is None and result.rejected is not None
    assert "not in Chinese" in result.rejected
    assert len(memory) == 0


@pytest.mark.parametrize("index", range(8))
def test_every_seed_review_keeps_its_code_and_figures(llm: FakeLLM, index: int) -> None:
    headline, body = REVIEWS[index]
    source = clean_html(text_to_html(body))
    translator, _ = openai(llm)
    result = translate_html(translator, None, source, "zh", "en")
    assert result.rejected is None and result.text is not None
    assert code_spans(result.text) == code_spans(source)
    for kept in ("6d038df", "#56668", "#54042", "27", "Qwen4Exp", "_remote_agents", "RLock"):
        assert result.text.count(kept) == source.count(kept), kept
    title = translate_html(translator, None, headline, "zh", "en", title=True)
    assert title.text is not None and "\n" not in title.text
    for kept in ("+4.6%", "MoRI-IO", "DeepSeek-V4", "ROCm", "_remote_agents", "81"):
        assert title.text.count(kept) == headline.count(kept), kept


def test_a_title_comes_back_as_one_plain_line(llm: FakeLLM) -> None:
    llm.answer = lambda text, target: "ROCM ⟦1⟧\nGAINS  ⟦2⟧ "
    translator, _ = openai(llm)
    result = translate_html(translator, None, "ROCm 上吞吐最高 +4.6%", "zh", "en", title=True)
    assert result.text == "ROCM ROCm GAINS +4.6%"


def test_a_text_with_nothing_to_translate_makes_no_call(llm: FakeLLM) -> None:
    translator, _ = openai(llm)
    source = "<p><code>flush()</code> +4.6%</p>"
    result = translate_html(translator, None, source, "zh", "en")
    assert result.text == source and result.rejected is None
    assert llm.requests == []


# -- the translation memory ------------------------------------------------------------------


def test_memory_is_keyed_by_backend_model_and_target(
        llm: FakeLLM, memory: TranslationMemory) -> None:
    translator, _ = openai(llm)
    first = translate_html(translator, memory, BODY, "zh", "en")
    again = translate_html(translator, memory, BODY, "zh", "en")
    assert again == Translation(first.text, "machine:openai", None, cached=True)
    assert len(llm.requests) == 1 and not first.cached
    other_model = OpenAITranslator(llm.url, "another-model", None)
    translate_html(other_model, memory, BODY, "zh", "en")
    assert len(llm.requests) == 2
    assert llm.requests[1].json()["model"] == "another-model"
    assert memory.get(BODY, backend="openai", model=MODEL, target="en") is not None
    assert memory.get(BODY, backend="openai", model=MODEL, target="zh") is None
    assert memory.get(BODY, backend="aws", model=MODEL, target="en") is None
    assert memory.get(BODY + " ", backend="openai", model=MODEL, target="en") is None
    assert len(memory) == 2


def test_memory_file_is_sqlite_in_wal_mode_under_the_data_folder(tmp_path: Path) -> None:
    config = tmp_path / "newsletter.toml"
    config.write_text('[paths]\ndata_dir = "state"\n', encoding="utf-8")
    settings = load(config, {})
    path = memory_path(settings)
    assert path == tmp_path / "state" / "translations.sqlite3"
    with TranslationMemory.open(path) as mem:
        mem.put("源", "source", backend="aws", model="amazon-translate", target="en")
        mode = mem._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT source_sha256, backend, model, target, text "
                            "FROM translations").fetchall()
    assert rows == [(TranslationMemory.key("源"), "aws", "amazon-translate", "en", "source")]
    assert len(rows[0][0]) == 64


def test_memory_is_safe_across_threads(memory: TranslationMemory) -> None:
    def work(n: int) -> str | None:
        memory.put(f"text {n}", f"译文 {n}", backend="openai", model="m", target="zh")
        return memory.get(f"text {n}", backend="openai", model="m", target="zh")

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(200)))
    assert results == [f"译文 {n}" for n in range(200)]
    assert len(memory) == 200


def test_a_memory_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "translations.sqlite3"
    path.write_bytes(b"not a database, just bytes " * 100)
    with pytest.raises(NewsletterError, match=r"translation memory .*translations\.sqlite3"):
        TranslationMemory.open(path)


# -- aws -------------------------------------------------------------------------------------


@pytest.fixture
def translate_stub() -> Iterator[tuple[Any, Stubber]]:
    session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="testing",
                                    aws_secret_access_key="testing")
    client = session.client("translate")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()
    client.close()


def test_aws_translates_through_translate_text(translate_stub: tuple[Any, Stubber],
                                               memory: TranslationMemory) -> None:
    client, stubber = translate_stub
    guarded = protect(BODY)
    answer = fake_translation(guarded.text, "en")
    stubber.add_response(
        "translate_text",
        {"TranslatedText": answer, "SourceLanguageCode": "zh", "TargetLanguageCode": "en"},
        expected_params={"Text": guarded.text, "SourceLanguageCode": "zh",
                         "TargetLanguageCode": "en"},
    )
    translator = AwsTranslator(client=client)
    assert (translator.name, translator.model) == ("aws", "amazon-translate")
    result = translate_html(translator, memory, BODY, "zh", "en")
    assert result.rejected is None and result.source == "machine:aws"
    assert result.text is not None and code_spans(result.text) == code_spans(BODY)
    # Cached: a second run needs no stubbed answer (the Stubber would fail on a call).
    again = translate_html(translator, memory, BODY, "zh", "en")
    assert again.cached and again.text == result.text
    assert memory.get(BODY, backend="aws", model="amazon-translate", target="en") == result.text


def test_aws_english_into_chinese_uses_amazon_codes(
        translate_stub: tuple[Any, Stubber]) -> None:
    client, stubber = translate_stub
    stubber.add_response(
        "translate_text",
        {"TranslatedText": "值得精读：⟦1⟧ 现在会排空。", "SourceLanguageCode": "en",
         "TargetLanguageCode": "zh"},
        expected_params={"Text": "Worth a close read: ⟦1⟧ now drains.",
                         "SourceLanguageCode": "en", "TargetLanguageCode": "zh"},
    )
    result = translate_html(AwsTranslator(client=client), None,
                            "Worth a close read: flush() now drains.", "en", "zh", title=True)
    assert result.text == "值得精读：flush() 现在会排空。"


@pytest.mark.parametrize(("code", "status"), [
    ("ThrottlingException", 400), ("TooManyRequestsException", 429),
    ("ServiceUnavailableException", 503), ("UnsupportedLanguagePairException", 400),
])
def test_aws_errors_become_translate_errors_keeping_the_cause(
        translate_stub: tuple[Any, Stubber], code: str, status: int) -> None:
    client, stubber = translate_stub
    stubber.add_client_error("translate_text", service_error_code=code,
                             service_message="Rate exceeded", http_status_code=status)
    with pytest.raises(TranslateError) as caught:
        AwsTranslator(client=client).translate("你好", "zh", "en")
    assert caught.value.backend == "aws"
    assert str(caught.value) == f"translate (aws): {code}: Rate exceeded"
    assert isinstance(caught.value.__cause__, ClientError)


def test_aws_refuses_a_text_over_its_size_limit_without_calling(
        translate_stub: tuple[Any, Stubber]) -> None:
    client, _ = translate_stub
    with pytest.raises(TranslateError, match="10,000"):
        AwsTranslator(client=client).translate("长" * 4000, "zh", "en")  # 12,000 bytes


def test_aws_unreachable_endpoint_is_a_translate_error(
        monkeypatch: pytest.MonkeyPatch, unused_port: int) -> None:
    aws_environment(monkeypatch, f"http://127.0.0.1:{unused_port}")
    translator = AwsTranslator(client=translate_client(max_attempts=1, connect_timeout=2))
    with pytest.raises(TranslateError, match="cannot reach Amazon Translate"):
        translator.translate("你好", "zh", "en")
    translator.client.close()


# -- choosing the backend --------------------------------------------------------------------


def test_backend_none_gives_no_translator() -> None:
    assert open_translator(TranslateSettings(), {}) is None
    assert open_translator(Settings(), {API_KEY_VARIABLE: "sk-x"}) is None


def test_openai_backend_from_settings_and_the_environment(llm: FakeLLM) -> None:
    settings = load(None, {"NEWSLETTER_TRANSLATE_BACKEND": "openai",
                           "NEWSLETTER_TRANSLATE_BASE_URL": llm.url + "/v1",
                           "NEWSLETTER_TRANSLATE_MODEL": MODEL}, cwd=Path("/nonexistent"))
    translator = open_translator(settings, {API_KEY_VARIABLE: "sk-from-env"})
    assert isinstance(translator, OpenAITranslator)
    assert (translator.name, translator.model) == ("openai", MODEL)
    assert "sk-from-env" not in repr(translator)
    translator.translate("你好", "zh", "en")
    assert llm.requests[0].headers["authorization"] == "Bearer sk-from-env"
    keyless = open_translator(settings.translate, {})
    assert isinstance(keyless, OpenAITranslator)
    keyless.translate("你好", "zh", "en")
    assert "authorization" not in llm.requests[1].headers


@pytest.mark.parametrize(("conf", "key"), [
    (TranslateSettings("openai", "", MODEL), "[translate] base_url"),
    (TranslateSettings("openai", "http://127.0.0.1:8000", ""), "[translate] model"),
    (TranslateSettings("openai", "ftp://127.0.0.1/v1", MODEL), "[translate] base_url"),
    (TranslateSettings("openai", "127.0.0.1:8000", MODEL), "[translate] base_url"),
])
def test_openai_backend_config_errors_name_the_key(conf: TranslateSettings, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        open_translator(conf, {})
    assert caught.value.key == key
    assert key in str(caught.value)
    assert caught.value.exit_code == 2


def test_aws_backend_uses_aws_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    aws_environment(monkeypatch, "http://127.0.0.1:9")
    translator = open_translator(TranslateSettings("aws"), {})
    assert isinstance(translator, AwsTranslator)
    assert translator.client.meta.region_name == "us-east-1"
    assert translator.client.meta.service_model.service_name == "translate"
    translator.close()


def test_aws_backend_without_a_region_is_a_config_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(ConfigError, match="AWS region") as caught:
        open_translator(TranslateSettings("aws"), {})
    assert caught.value.key == "[translate] backend"


@pytest.mark.parametrize("target", ["zh", "fr"])
def test_translate_html_refuses_an_unknown_direction(llm: FakeLLM, target: str) -> None:
    translator, _ = openai(llm)
    with pytest.raises(ValueError, match="cannot translate"):
        translate_html(translator, None, BODY, "zh", target)


def test_a_translated_title_or_body_carries_no_bidi_invisible_or_control_character(
        llm: FakeLLM) -> None:
    llm.answer = lambda text, target: "Fix \u202eSECURITY ALERT\u202c\u200b in ⟦1⟧\ufeff"
    translator, _ = openai(llm)
    title = translate_html(translator, None, "修复 ROCm 上的死锁", "zh", "en", title=True)
    assert title.text == "Fix SECURITY ALERT in ROCm"
    llm.answer = lambda text, target: text.replace("修复死锁", "Fix \u2067it\u2069 &#x202E;&#1;now")
    body = translate_html(translator, None, "<p>修复死锁。</p>", "zh", "en")
    assert body.text is not None
    assert not re.search("[\u202e\u2067\u2069\x01]|&#", body.text), body.text
