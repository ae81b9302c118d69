"""The subscription app speaks the reader's language, over real HTTP (the app on 127.0.0.1, the
real store and outbox): every page and mail carries both languages, the reader's first; areas
show by their display name; the unsubscribe page names the address, masked, and offers the
preferences before its button."""

from __future__ import annotations

import html
import logging
import re
from email.message import EmailMessage

import pytest
from support.app_server import free_port, project_settings, request, serve_app
from test_app import link, reader

from pipeline.core.issue.area_display import display_name
from pipeline.web.pages import accepted_order, masked_address

FROM_ARCHIVE = {"Origin": "http://127.0.0.1:8000"}
EN_BROWSER = "en-GB,en;q=0.9,zh-CN;q=0.5"
BROKEN_LINKS = [(method, f"{path}?token=broken") for method in ("GET", "POST")
                for path in ("/confirm", "/unsubscribe", "/preferences")
                ] + [("POST", "/confirm/resend?token=broken")]
ORDER = {"zh-en": ("zh", "en"), "en-zh": ("en", "zh"), "zh": ("zh", "en"), "en": ("en", "zh")}


@pytest.fixture
def app(tmp_path):
    with serve_app(project_settings(tmp_path, free_port())) as served:
        yield served


def order_of(body: str) -> tuple[str, str]:
    """The languages of a page in the order it shows them: the page's ``lang``, its
    heading's first half, and its paragraphs (all three must agree)."""
    page_lang = re.search(r'<html lang="([^"]+)">', body)
    heading = re.findall(r'<h1><span lang="([^"]+)">[^<]*</span> <span lang="([^"]+)"', body)
    assert page_lang is not None and len(heading) == 1, body
    first, second = (tag.split("-")[0] for tag in heading[0])
    assert page_lang.group(1).split("-")[0] == first
    paragraphs = [tag.split("-")[0] for tag in re.findall(r'<p lang="([^"]+)"', body)]
    assert paragraphs in ([], [first, second]), paragraphs
    return first, second


# -- the reader's language first ------------------------------------------------------------------

@pytest.mark.parametrize("layout", ORDER)
def test_pages_reached_by_a_link_follow_the_subscribers_layout(app, layout):
    sub = reader(app, f"{layout}@example.org", layout=layout)
    unsubscribe = app.request("GET", link(app, "unsubscribe", sub.id),
                              headers={"Accept-Language": "zh-CN"})  # the layout wins
    assert unsubscribe.status == 200 and order_of(unsubscribe.body) == ORDER[layout]
    preferences = link(app, "preferences", sub.id)
    assert order_of(app.request("GET", preferences).body) == ORDER[layout]
    # After a change, the page reads as the layout just chosen.
    other = "en" if ORDER[layout][0] == "zh" else "zh"
    saved = app.request("POST", preferences, form={"action": "layout", "layout": other})
    assert saved.status == 200 and order_of(saved.body) == ORDER[other]
    gone = app.request("POST", preferences, form={"action": "unsubscribe"})
    assert gone.status == 200 and order_of(gone.body) == ORDER[other]


def test_the_one_click_answer_follows_the_layout(app):
    sub = reader(app, "oneclick@example.org", layout="en")
    gone = app.request("POST", link(app, "unsubscribe", sub.id),
                       form={"List-Unsubscribe": "One-Click"})
    assert gone.status == 200 and order_of(gone.body) == ("en", "zh")
    assert gone.body.index("You are unsubscribed") < gone.body.index("已退订")


@pytest.mark.parametrize(("accept", "first", "preset"), [
    (None, "zh", "zh-en"), (EN_BROWSER, "en", "en-zh"), ("zh-CN,zh;q=0.9,en;q=0.8", "zh", "zh-en")])
def test_without_a_layout_the_browsers_language_decides(app, accept, first, preset):
    headers = {"Accept-Language": accept} if accept else {}
    form = app.request("GET", "/subscribe", headers=headers)
    assert order_of(form.body)[0] == first
    assert f'<option value="{preset}" selected>' in form.body  # the form agrees with its page
    # A link that names the layout is the layout's, whatever the browser says.
    assert order_of(app.request("GET", "/subscribe?layout=zh", headers=headers).body)[0] == "zh"
    # So is every answer to a link that does not work, on each route that takes one.
    for method, path in (*BROKEN_LINKS, ("GET", "/nowhere")):
        assert order_of(app.request(method, path, headers=headers).body)[0] == first


@pytest.mark.parametrize(("header", "first"), [
    (None, "zh"), ("", "zh"), ("en", "en"), ("EN-gb", "en"), ("zh-TW, en", "zh"),
    ("fr, en;q=0.5", "en"), ("fr, de", "zh"), ("zh;q=0.5, en;q=0.8", "en"),
    ("en;q=0.8, zh;q=0.8", "en"), ("zh;q=0.8, en;q=0.8", "zh"), ("en;q=0, zh;q=0.1", "zh"),
    ("en;q=nan, zh;q=0.1", "zh"), ("en;q=abc, zh;q=0.1", "zh"), ("en;q=2, zh;q=0.1", "zh"),
    (";;,,en-;q=", "zh"), ("*", "zh"),
])
def test_accept_language_orders_chinese_and_english(header, first):
    assert accepted_order(header)[0] == first
    assert sorted(accepted_order(header)) == ["en", "zh"]


# -- the confirmation mail ------------------------------------------------------------------------

def parts(mail: EmailMessage) -> tuple[str, str]:
    plain, rich = mail.get_body(("plain",)), mail.get_body(("html",))
    assert plain is not None and rich is not None
    return plain.get_content(), rich.get_content()


@pytest.mark.parametrize("layout", ORDER)
def test_the_answer_and_the_confirmation_mail_put_the_chosen_language_first(app, layout):
    sent = app.request("POST", "/subscribe", form={"email": "mail@example.org", "layout": layout},
                       headers=FROM_ARCHIVE)
    assert sent.status == 200 and order_of(sent.body) == ORDER[layout]
    [mail] = app.outbox()
    zh_first = ORDER[layout][0] == "zh"
    subject = str(mail["Subject"])
    assert subject.startswith("请确认订阅" if zh_first else "Confirm your subscription")
    assert "Confirm your subscription" in subject and "请确认订阅" in subject
    text, rich = parts(mail)
    assert (text.index("你好") < text.index("Hello")) == zh_first
    blocks = re.findall(r'<div lang="([^"]+)"', rich)
    assert blocks == (["zh-CN", "en"] if zh_first else ["en", "zh-CN"])
    brand = re.search(r'font-weight:600"><span lang="([^"]+)"', rich)
    assert brand is not None and brand.group(1) == ("zh-CN" if zh_first else "en")
    assert re.search(r'<html lang="([^"]+)"', rich).group(1) == blocks[0]  # type: ignore[union-attr]
    invalid = app.request("POST", "/subscribe", form={"email": "nope", "layout": layout},
                          headers=FROM_ARCHIVE)
    assert invalid.status == 400 and order_of(invalid.body) == ORDER[layout]


def test_a_known_address_is_reminded_in_its_own_layout_not_the_forms(app):
    reader(app, "known@example.org", layout="en")
    app.request("POST", "/subscribe", form={"email": "known@example.org", "layout": "zh"},
                headers=FROM_ARCHIVE)
    [mail] = app.outbox()
    assert str(mail["Subject"]).startswith("You are subscribed")


def test_each_mail_is_logged_with_its_outbox_file_never_its_token_or_address(app, caplog):
    caplog.set_level(logging.INFO, logger="newsletter")
    app.request("POST", "/subscribe", form={"email": "logged@example.org", "layout": "en"},
                headers=FROM_ARCHIVE)
    folder = app.settings.resolve(app.settings.paths.build_dir) / "outbox"
    [written] = folder.glob("*.eml")
    text, _ = parts(app.outbox()[0])
    token = re.search(r"token=([a-z2-7]{56})", text).group(1)  # type: ignore[union-attr]
    lines = [r.getMessage() for r in caplog.records]
    assert f"confirm mail: {written}" in lines, lines
    assert not any(token in line or "logged@" in line for line in lines)


# -- areas by display name ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "shown"), [
    ("pd-disaggregation", "PD disaggregation"), ("kv-connector", "KV connector"),
    ("rocm", "ROCm"), ("multimodal", "Multimodal"), ("rust-frontend", "Rust frontend"),
    ("nixl", "NIXL"), ("spec-decode", "Spec decode"), ("多模态", "多模态"),
    ("deepseek-v1", "DeepSeek V1"), ("a--b-", "A b"), ("-", "-"), ("<b>x</b>", "<b>x</b>"),
])
def test_display_name(name, shown):
    assert display_name(name) == shown


def boxes(body: str) -> dict[str, str]:
    """The area boxes of a page: the value each posts → the label a reader reads."""
    return {html.unescape(value): html.unescape(label) for value, label in re.findall(
        r'<input type="checkbox" name="areas" value="([^"]*)"(?: checked)?> <span>([^<]*)</span>',
        body)}


def test_the_forms_label_each_area_by_its_display_name_and_post_its_name(app):
    app.store.note_areas(["pd-disaggregation", "rocm", "kv-connector", "<b>x</b>"])
    expected = {"pd-disaggregation": "PD disaggregation", "rocm": "ROCm",
                "kv-connector": "KV connector", "<b>x</b>": "<b>x</b>"}
    form = app.request("GET", "/subscribe")
    assert boxes(form.body) == expected
    assert "<b>x</b>" not in form.body  # outside text, escaped
    sub = reader(app, "areas@example.org", layout="en", areas=["pd-disaggregation"])
    page = app.request("GET", link(app, "preferences", sub.id))
    assert boxes(page.body) == expected


# -- the unsubscribe page -------------------------------------------------------------------------

@pytest.mark.parametrize(("email", "masked"), [
    ("alice.liddell@example.org", "a•••@example.org"), ("ab@example.org", "•••@example.org"),
    ("a@example.org", "•••@example.org"), ("张三丰@例子.中国", "张•••@例子.中国"),
    ("not an address", "•••"),
])
def test_masked_address(email, masked):
    assert masked_address(email) == masked


@pytest.mark.parametrize(("email", "shown", "hidden"), [
    ("alice.liddell@example.org", "a•••@example.org", "alice"),
    ("&bob@example.org", "&amp;•••@example.org", "bob"),  # escaped
], ids=["plain", "escaped"])
def test_the_unsubscribe_page_names_the_address_masked_and_offers_the_preferences_first(
        app, email, shown, hidden):
    sub = reader(app, email, layout="en")
    page = app.request("GET", link(app, "unsubscribe", sub.id))
    assert shown in page.body and hidden not in page.body
    preferences = re.search(r'<a href="([^"]+/preferences\?token=[^"]+)"', page.body)
    assert preferences is not None, page.body
    assert page.body.index(preferences.group(0)) < page.body.index('<form method="post"')
    assert order_of(request("GET", html.unescape(preferences.group(1))).body)[0] == "en"
    assert app.store.get(sub.id).status == "active"  # opening either page changes nothing
