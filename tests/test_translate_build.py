"""Machine translation inside a real build: provenance, memory, the guard, a dead backend."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from support.commands import newsletter_main
from support.feeds import Entry, built_issue, feed_project
from support.project import SAMPLE_WEEK
from test_translate import FakeLLM, drop_first_placeholder, fake_translation, llm  # noqa: F401

from pipeline import wiring
from pipeline.translate import openai


def project(tmp_path: Path) -> Path:
    return feed_project(tmp_path, [
        Entry(pr=1, title="修复 `foo_bar` 的竞态",
              body="值得精读，修复了 `foo_bar` 的竞态，吞吐 +4.6%。"),
        Entry(pr=2, title="Both", body="Skim, fine.", lang="en", id="en-2"),
        Entry(pr=2, title="两种语言", body="值得一读。", lang="zh-CN", id="zh-2",
              published="2026-11-23T10:00:00+08:00"),
    ])


def build(cwd: Path, url: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = newsletter_main(["build", "--week", SAMPLE_WEEK], cwd,
                             NEWSLETTER_TRANSLATE_BACKEND="openai",
                             NEWSLETTER_TRANSLATE_BASE_URL=url,
                             NEWSLETTER_TRANSLATE_MODEL="test-model")
    return result, built_issue(cwd)


def test_missing_english_is_machine_translated_marked_and_remembered(tmp_path, llm):  # noqa: F811
    cwd = project(tmp_path)
    result, data = build(cwd, llm.url)
    assert result.returncode == 0, result.stderr
    item = next(i for i in data["items"] if i["pr"] == 1)
    assert item["en"]["source"] == "machine:openai"
    assert "<code>foo_bar</code>" in item["en"]["body_html"] and "+4.6%" in item["en"]["body_html"]
    assert not [p for p in data["problems"] if p["code"] == "missing-language"]
    both = next(i for i in data["items"] if i["pr"] == 2)
    assert both["en"]["source"] == "feed" and both["zh"]["source"] == "feed"
    html = (cwd / "build" / "issues" / SAMPLE_WEEK / "email-en.html").read_text()
    assert "Machine-translated" in html
    calls = len(llm.requests)
    assert calls == 2  # a title and a body
    again, same = build(cwd, llm.url)
    assert again.returncode == 0 and len(llm.requests) == calls  # the memory answered
    assert same == data


def test_a_translation_that_breaks_code_is_rejected_stays_missing_and_is_not_remembered(
        tmp_path, llm):  # noqa: F811
    llm.answer = drop_first_placeholder
    result, data = build(project(tmp_path), llm.url)
    assert result.returncode == 0, result.stderr
    codes = {(p["code"], p.get("pr")) for p in data["problems"]}
    assert ("translation-rejected", 1) in codes and ("missing-language", 1) in codes
    said = [p["message"] for p in data["problems"] if p["code"] == "translation-rejected"]
    assert said == ["PR #1: the machine translation into English was rejected: code or markup "
                    "not kept: ⟦1⟧ ('foo_bar') was lost"]
    assert next(i for i in data["items"] if i["pr"] == 1)["en"] is None
    llm.answer = fake_translation  # the next build asks again rather than reuse a rejection
    again, data = build(tmp_path, llm.url)
    assert again.returncode == 0 and len(llm.requests) == 4
    assert next(i for i in data["items"] if i["pr"] == 1)["en"]["source"] == "machine:openai"


def test_a_dead_backend_leaves_the_build_green_and_the_language_missing(tmp_path, unused_port,
                                                                        monkeypatch):
    waits: list[float] = []  # the backoff the build waits through, not slept here
    monkeypatch.setattr(wiring, "OpenAITranslator",
                        functools.partial(openai.OpenAITranslator, sleep=waits.append))
    result, data = build(project(tmp_path), f"http://127.0.0.1:{unused_port}")
    assert waits == [1.0, 2.0, 4.0] * (len(waits) // 3) and waits, waits
    assert result.returncode == 0, result.stderr
    codes = {(p["code"], p.get("pr")) for p in data["problems"]}
    assert ("translation-rejected", 1) in codes and ("missing-language", 1) in codes
