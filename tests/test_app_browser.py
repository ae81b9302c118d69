"""The subscription app's pages in headless Chromium: the form works with JavaScript off,
the strict Content-Security-Policy lets the one stylesheet through and nothing else, the
pages fit a phone, and axe-core finds no critical or serious problem."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, ConsoleMessage, Page
from support.app_server import App, free_port, project_settings, serve_app
from test_app import confirm_url, link, reader

SERIOUS = ("critical", "serious")


@pytest.fixture
def app(tmp_path):
    with serve_app(project_settings(tmp_path, free_port())) as served:
        yield served


@pytest.fixture
def page(browser: Browser):
    context = browser.new_context(viewport={"width": 375, "height": 720}, is_mobile=True,
                                  java_script_enabled=False)
    opened = context.new_page()
    problems: list[str] = []
    opened.problems = problems  # type: ignore[attr-defined]

    def note(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(message.text)

    opened.on("console", note)
    try:
        yield opened
    finally:
        context.close()


def check_page(page: Page) -> None:
    """No console error (a CSP refusal is one), styles applied, no sideways scrolling."""
    assert page.problems == []  # type: ignore[attr-defined]
    assert page.evaluate("getComputedStyle(document.querySelector('main')).maxWidth") == "560px"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def axe_clean(browser: Browser, url: str) -> None:
    context = browser.new_context(viewport={"width": 375, "height": 720})
    try:
        page = context.new_page()
        page.goto(url)
        results = Axe().run(page)
        serious = [v["id"] for v in results.response["violations"] if v["impact"] in SERIOUS]
        assert serious == [], serious
    finally:
        context.close()


@pytest.mark.slow  # the app on loopback, walked through in Chromium, then axe on its pages
def test_subscribe_and_confirm_in_a_browser_without_javascript(app: App, page: Page,
                                                               browser: Browser):
    page.goto(app.url + "/subscribe")
    check_page(page)
    page.fill("#email", "browser@example.org")
    page.select_option("#layout", "en")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "Check your inbox" in page.content()  # Chromium's own Origin passed the check
    check_page(page)

    [mail] = app.outbox()
    link = confirm_url(mail)
    page.goto(link)
    check_page(page)
    assert app.store.find("browser@example.org").status == "pending"
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "Thank you for confirming" in page.content()
    check_page(page)
    subscriber = app.store.find("browser@example.org")
    assert subscriber.status == "active" and subscriber.layout == "en"

    # The preferences link every issue carries (the confirmed page names none).
    page.goto(app.subscriptions.link("preferences", "preferences", subscriber.id,
                                     datetime.now(UTC)))
    page.wait_for_load_state()
    check_page(page)
    page.check("input[value=zh]")
    page.click("text=Save")
    page.wait_for_load_state()
    assert app.store.find("browser@example.org").layout == "zh"

    for path in ("/subscribe", link.removeprefix(app.url)):
        axe_clean(browser, app.url + path)


@pytest.mark.slow  # the app on loopback, the form at phone width, then axe on its pages
def test_area_boxes_fit_a_phone_work_without_javascript_and_pass_axe(app: App, page: Page,
                                                                    browser: Browser):
    long_name = "very-long-area-name-" + "x" * 40  # the longest a name may be (60)
    app.store.note_areas(["kv-connector", "rocm", "multimodal", "多模态", long_name,
                          *[f"area-{n}" for n in range(20)]])
    page.goto(app.url + "/subscribe")
    check_page(page)
    # Both languages, the browser's first (whichever that is).
    legend = page.locator("fieldset.areas legend").inner_text()
    assert sorted(legend.split(" · ")) == ["Areas you follow", "关注的领域"]
    page.fill("#email", "areas@example.org")
    page.click("label:has-text('rocm')")  # the label is the target, as a thumb would hit it
    page.check(f"input[value='{long_name}']")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "Check your inbox" in page.content()
    app.settle()
    assert app.store.find("areas@example.org").areas == ("rocm", long_name)

    sub = app.store.find("areas@example.org")
    preferences = app.url + link(app, "preferences", sub.id)
    page.goto(preferences)
    check_page(page)
    assert page.is_checked("input[value=rocm]")
    page.uncheck("input[value=rocm]")
    page.check("input[value=multimodal]")
    page.click("text=Save")
    page.wait_for_load_state()
    check_page(page)
    assert app.store.get(sub.id).areas == ("multimodal", long_name)

    for url in (app.url + "/subscribe", preferences):
        axe_clean(browser, url)


@pytest.mark.slow  # the app on loopback, an English reader's pages in Chromium, then axe
def test_an_english_readers_unsubscribe_page_reads_english_first_and_offers_preferences(
        app: App, page: Page, browser: Browser):
    """It names the address it unsubscribes, offers preferences instead, and shows areas by name."""
    app.store.note_areas(["pd-disaggregation", "kv-connector", "rocm"])
    sub = reader(app, "alice.liddell@example.org", layout="en", areas=["rocm"])
    unsubscribe = app.url + link(app, "unsubscribe", sub.id)
    page.goto(unsubscribe)
    check_page(page)
    assert page.evaluate("document.documentElement.lang") == "en"
    assert page.locator("h1").inner_text().splitlines() == [
        "Unsubscribe from vLLM PR Weekly", "退订 vLLM PR 周报"]
    card = page.locator(".card").inner_text()
    assert card.index("Press the button") < card.index("点击下面的按钮")
    assert page.locator(".address strong").inner_text() == "a•••@example.org"
    assert "alice" not in page.content()
    instead, button = page.locator(".instead a"), page.locator("button[type=submit]")
    above, below = instead.bounding_box(), button.bounding_box()
    assert above is not None and below is not None and above["y"] < below["y"]
    assert instead.inner_text().startswith("Rather stay?")

    instead.click()
    page.wait_for_load_state()
    check_page(page)
    assert page.locator("h1").inner_text().startswith("Your preferences")
    labels = [label.strip() for label in
              page.locator("fieldset.areas .boxes label").all_inner_texts()]
    assert labels == ["KV connector", "PD disaggregation", "ROCm"]
    assert "pd-disaggregation" not in page.locator("main").inner_text()
    page.click("label:has-text('PD disaggregation')")
    page.click("text=Save")
    page.wait_for_load_state()
    saved = app.store.get(sub.id)
    assert (saved.status, saved.areas) == ("active", ("pd-disaggregation", "rocm"))

    axe_clean(browser, unsubscribe)


@pytest.mark.slow  # the app on loopback, the form in an English Chromium
def test_an_english_browser_gets_the_form_and_its_answer_english_first(app: App,
                                                                       browser: Browser):
    context = browser.new_context(locale="en-US", java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(app.url + "/subscribe")
        assert page.locator("h1").inner_text().startswith("Subscribe to vLLM PR Weekly")
        assert page.locator("#layout").input_value() == "en-zh"
        page.fill("#email", "english@example.org")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert page.locator("h1").inner_text().startswith("Check your inbox")
    finally:
        context.close()
    [mail] = app.outbox()
    assert str(mail["Subject"]).startswith("Confirm your subscription")
    assert app.store.find("english@example.org").layout == "en-zh"
