"""Interest variants end to end: rendered once per distinct choice at build time, listed in
issue.json and pinned by its hash, proofed like the layouts, and never rendered again.

The sample feed's issue carries areas such as ``kv-connector``, ``rocm`` and ``cpu``; a reader
following some of them gets those items first within each tier."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email import message_from_bytes, policy
from pathlib import Path

import pytest
from support.commands import newsletter_main, ok
from support.feeds import Entry, atom
from support.markup import unfolded
from support.project import SAMPLE_WEEK, make_project, sample_settings

from pipeline.cli.common import publish_issue
from pipeline.config import Settings
from pipeline.core.assemble import distinct_variants
from pipeline.core.email.message import Messages
from pipeline.core.email.render import Budget, Renderer
from pipeline.core.issue import issue_json
from pipeline.core.issue.interests import Variant, issue_areas
from pipeline.core.proof import proof
from pipeline.core.site.site import Site, public_issue_json
from pipeline.errors import BlockedError, ConfigError
from pipeline.model import LAYOUTS
from pipeline.stages.approve import approve, is_approved
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from pipeline.stages.preview import PageFacts, write_preview
from pipeline.stages.send import Sender, SendOptions, send_tests
from pipeline.stages.send_report import write_report
from pipeline.transport.outbox import OutboxTransport
from pipeline.wiring import archive_lease
from subscribers.store.sqlite import SqliteStore
from subscribers.tokens import Keys

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "variants-test-secret-0123456789-abcdef"})
ROCM = ("zh-en", ("rocm",))
KV = ("en", ("kv-connector", "unrelated-area"))
CPU_NIXL = ("zh", ("cpu", "nixl"))


class CountingRenderer(Renderer):
    """A real renderer that counts the variants it is asked to render."""

    def __init__(self) -> None:
        super().__init__()
        self.variants: list[Variant] = []

    def render_variant(self, issue, variant, base_url, budget, footer=None):
        self.variants.append(variant)
        return super().render_variant(issue, variant, base_url, budget, footer)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return sample_settings(tmp_path, extra='[site]\napp_url = "https://news.example.org/app"\n')


def build_with(settings: Settings, out: Path, choices) -> BuiltIssue:
    return load_built(build(settings, week_id=SAMPLE_WEEK, out=out, choices=choices).out_dir)


@pytest.fixture
def counting(monkeypatch) -> CountingRenderer:
    """The renderer the build's assembly uses, counting its variants."""
    renderer = CountingRenderer()
    monkeypatch.setattr("pipeline.core.assemble.Renderer", lambda: renderer)
    return renderer


@pytest.fixture
def varied(settings: Settings, tmp_path: Path) -> BuiltIssue:
    """The sample week built with three readers' choices: its interest variants (the shared
    ``built`` has none); tests here also change its files."""
    return build_with(settings, tmp_path / "issue", [ROCM, KV, CPU_NIXL])


# -- assemble: cost follows the distinct choices ----------------------------------------------


def test_a_thousand_readers_of_three_choices_cost_three_renderings(settings, tmp_path,
                                                                   counting):
    choices = [(ROCM, KV, CPU_NIXL)[n % 3] for n in range(1000)]
    # Areas outside the issue, or in another order, change nothing.
    choices += [("zh-en", ("rocm", "not-this-week")), ("en", ("unrelated-area", "kv-connector"))]
    varied = build_with(settings, tmp_path / "issue", choices)
    # Each plain layout once, and each distinct interest variant once.
    assert [v for v in counting.variants if not v.areas] == [Variant(x) for x in LAYOUTS]
    assert len([v for v in counting.variants if v.areas]) == 3
    assert sorted(v.key for v in varied.variants) == sorted(
        Variant(*c).key for c in [("zh-en", ("rocm",)), ("en", ("kv-connector",)),
                                  ("zh", ("cpu", "nixl"))])
    for v in varied.variants:
        assert f"email-{v.key}.html" in varied.artifacts
        assert varied.html(v.key) != varied.html(v.variant.layout)


def test_choices_outside_the_issues_areas_are_the_plain_layouts(settings, tmp_path,
                                                                counting):
    varied = build_with(settings, tmp_path / "issue",
                       [("en", ("not-an-area",)), ("zh", ()), ("zh-en", ("ROCm ",)),
                        ("no-such-layout", ("rocm",))])
    assert all(not v.areas for v in counting.variants) and varied.variants == ()
    assert sorted(varied.artifacts) == sorted(f"email-{layout}.{ext}" for layout in LAYOUTS
                                             for ext in ("html", "txt"))
    assert "variants" not in json.loads(varied.source)  # no interests: today's issue.json
    plain = build_with(settings, tmp_path / "plain", [])  # the same bytes as no choices
    assert (plain.source, plain.content_hash) == (varied.source, varied.content_hash)


def test_distinct_variants_are_each_once_sorted_and_never_plain(varied):
    items = varied.issue.items
    found = distinct_variants([("en", ["cpu"]), ("en", ("cpu", "x")), ("zh", ("rocm", "nixl")),
                               ("zh", ()), ("en-zh", ("x",))], items)
    assert found == (Variant("en", ("cpu",)), Variant("zh", ("nixl", "rocm")))


def test_a_variant_puts_its_areas_first_and_marks_them(varied):
    rocm = next(v for v in varied.variants if v.variant.areas == ("rocm",))
    html, plain = varied.html(rocm.key), varied.html("zh-en")
    rocm_prs = [i.pr for i in varied.issue.items if "rocm" in i.areas]
    assert rocm_prs
    first = min(html.find(f"/pull/{pr}") for pr in rocm_prs)
    others = [i.pr for i in varied.issue.items if i.tier == "must-read" and "rocm" not in i.areas]
    assert all(first < html.find(f"/pull/{pr}") for pr in others)
    assert html != plain


# -- issue.json: listed, checked, pinned ------------------------------------------------------


def test_issue_json_lists_the_variants_and_reads_back_to_the_same_bytes(varied):
    data = json.loads(varied.source)
    assert [v["key"] for v in data["variants"]] == [v.key for v in varied.variants]
    for entry in data["variants"]:
        assert entry["key"] == Variant(entry["layout"], tuple(entry["areas"])).key
    again = issue_json.with_hash(varied.issue, varied.content_hash,
                                 [issue_json.variant_data(v.variant, v.brief, v.folded)
                                  for v in varied.variants])
    assert issue_json.dumps(again) == varied.source


def rewrite(varied: BuiltIssue, change) -> None:
    """Edit issue.json's variants and make the hash agree (a tamperer who recomputes it)."""
    data = json.loads(varied.source)
    change(data)
    raw = {path.name: path.read_bytes() for path in varied.folder.glob("email-*")}
    data["content_hash"] = issue_json.content_hash(data, raw)
    (varied.folder / "issue.json").write_bytes(issue_json.dumps(data))


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d["variants"][0].update(areas=["zzz-not-in-issue"]), "areas of the issue"),
    (lambda d: d["variants"][0].update(areas=[]), "areas of the issue"),
    (lambda d: d["variants"][0].update(layout="fr"), "is not a layout"),
    (lambda d: d["variants"].append(dict(d["variants"][0])), "twice"),
    (lambda d: d.update(variants="zh-en.abc"), "variants must be a list"),
    (lambda d: d["variants"][0].update(brief=["1"]), "whole numbers"),
    (lambda d: d["variants"][0].update(brief=[424242]), "brief must name the issue's PRs"),
    (lambda d: d["variants"][0].update(folded=-1), "folded count"),
])
def test_a_tampered_variant_list_is_refused(varied, change, said):
    rewrite(varied, change)
    with pytest.raises(BlockedError, match=said):
        load_built(varied.folder)


def test_a_key_that_is_not_its_layout_and_areas_key_is_refused(varied):
    old = varied.variants[0].key
    new = varied.variants[0].variant.layout + ".0123456789"
    for ext in ("html", "txt"):
        (varied.folder / f"email-{old}.{ext}").rename(varied.folder / f"email-{new}.{ext}")
    rewrite(varied, lambda d: d["variants"][0].update(key=new))
    with pytest.raises(BlockedError, match="not the key of its layout and areas"):
        load_built(varied.folder)


def test_a_key_naming_a_path_is_refused_before_any_file_is_read(varied, tmp_path):
    """Even before the hash is checked (here it is left stale)."""
    (varied.folder.parent / "x.html").write_text("outside", encoding="utf-8")
    data = json.loads(varied.source)
    data["variants"][0]["key"] = "../x"
    (varied.folder / "issue.json").write_bytes(issue_json.dumps(data))
    with pytest.raises(BlockedError, match="is not a variant key"):
        load_built(varied.folder)


def test_the_hash_covers_each_variant(varied):
    key = varied.variants[0].key
    path = varied.folder / f"email-{key}.html"
    path.write_text(path.read_text(encoding="utf-8").replace("vLLM", "vLLM!"), encoding="utf-8")
    with pytest.raises(BlockedError, match="changed since it was built"):
        load_built(varied.folder)


def test_a_missing_variant_file_is_refused(varied):
    (varied.folder / f"email-{varied.variants[0].key}.txt").unlink()
    with pytest.raises(BlockedError, match="is missing"):
        load_built(varied.folder)


# -- proof ------------------------------------------------------------------------------------


def test_the_proof_report_lists_each_variant_with_its_sizes(varied, settings):
    report = proof(varied, budget=Budget(settings.issue.size_budget_kb), repo=settings.feed.repo)
    assert [v.key for v in report.variants] == [v.key for v in varied.variants]
    for row in report.variants:
        assert row.areas and row.layout in LAYOUTS
        assert 0 < row.html.weight <= row.html.budget and row.text_weight > 0
        assert row.html.status in ("ok", "near")
    assert len(report.sizes) == len(LAYOUTS)


def test_an_over_budget_variant_blocks_the_proof(varied, settings):
    key = varied.variants[0].key
    name = f"email-{key}.html"
    padded = varied.html(key).replace("</body>", "<p>" + "内容" * 40_000 + "</p></body>")
    heavy = replace(varied, artifacts={**varied.artifacts, name: padded})
    report = proof(heavy, budget=Budget(settings.issue.size_budget_kb), repo=settings.feed.repo)
    [over] = [p for p in report.blocking if p.code == "over-size-limit"]
    assert over.layout == key and key in over.message
    assert next(v for v in report.variants if v.key == key).html.status == "over"


def test_a_variant_over_budget_at_build_is_a_blocking_problem(settings, tmp_path):
    tight = sample_settings(tmp_path / "tight", extra="[issue]\nsize_budget_kb = 4\n")
    varied = build_with(tight, tmp_path / "issue", [ROCM])
    key = varied.variants[0].key
    assert [p for p in varied.issue.problems
            if p.code == "over-size-limit" and p.layout == key and p.severity == "blocking"]


def test_a_personal_link_placeholder_in_a_variant_is_found(varied, settings):
    key = varied.variants[0].key
    name = f"email-{key}.txt"
    stray = replace(varied, artifacts={**varied.artifacts,
                                      name: varied.text(key) + "\nx%%unsubscribe_url%%x\n"})
    report = proof(stray, budget=Budget(90), repo=settings.feed.repo)
    assert [p for p in report.blocking if p.code == "stray-personal-link" and p.layout == key]
    with pytest.raises(BlockedError, match=f"email-{key}.txt"):
        Messages(stray, settings.site, settings.delivery, KEYS)


# -- choose and message -----------------------------------------------------------------------


def test_choose_gives_the_built_variant_or_the_plain_layout(varied):
    rocm = next(v for v in varied.variants if v.variant.areas == ("rocm",))
    assert varied.choose("zh-en", ("rocm", "elsewhere")) == (rocm.key, False)
    assert varied.choose("zh-en", ()) == ("zh-en", False)
    assert varied.choose("zh-en", ("not-this-week",)) == ("zh-en", False)
    assert varied.choose("en-zh", ("rocm",)) == ("en-zh", True)  # never built: fallback


def test_a_message_carries_its_variants_parts_under_its_layouts_headers(varied, settings):
    rocm = next(v for v in varied.variants if v.variant.areas == ("rocm",))
    messages = Messages(varied, settings.site, settings.delivery, KEYS)
    raw = messages.build("r@example.org", "a" * 24, "zh-en", NOW, variant=rocm.key).raw
    parsed = message_from_bytes(raw, policy=policy.default)
    html = parsed.get_body(("html",)).get_content()  # type: ignore[union-attr]
    plain = messages.build("r@example.org", "a" * 24, "zh-en", NOW).raw
    assert parsed["Subject"] == message_from_bytes(plain, policy=policy.default)["Subject"]
    assert html.count("/pull/") == varied.html(rocm.key).count("/pull/")
    assert "%%" not in html
    with pytest.raises(ConfigError, match="no variant"):
        messages.build("r@example.org", "a" * 24, "en", NOW, variant=rocm.key)
    with pytest.raises(ConfigError, match="no variant"):
        messages.build("r@example.org", "a" * 24, "zh-en", NOW, variant="../x")


# -- hostile area names, and the preview ------------------------------------------------------

HOSTILE = ["<script>alert(1)</script>", "%%unsubscribe_url%%", "../x", "a" * 500, "rocm"]


@pytest.fixture
def hostile(settings: Settings, tmp_path: Path) -> BuiltIssue:
    feed = tmp_path / "hostile.atom"
    feed.write_bytes(atom([Entry(pr=7, title="修复", body="值得精读，测试。", categories=HOSTILE),
                           Entry(pr=8, title="其他", body="可以略读。", categories=["cpu"])]))
    result = build(settings, week_id=SAMPLE_WEEK, feeds=(str(feed),), out=tmp_path / "issue",
                   choices=[("zh-en", tuple(HOSTILE)), ("en", ("%%unsubscribe_url%%",))])
    return load_built(result.out_dir)


def test_hostile_area_names_never_reach_a_file_name_a_link_or_the_preview(hostile, settings):
    assert hostile.variants
    for v in hostile.variants:
        assert re.fullmatch(r"(zh-en|en-zh|zh|en)\.[0-9a-f]{10}", v.key)
    assert all(p.name.startswith(("email-", "issue.json")) for p in hostile.folder.iterdir())
    report = proof(hostile, budget=Budget(90), repo=settings.feed.repo)
    assert not [p for p in report.blocking if p.code in ("stray-personal-link",
                                                          "template-leftover", "unsafe-link")]
    for key in hostile.keys:
        assert "<script>alert" not in hostile.html(key)
    Messages(hostile, settings.site, settings.delivery, KEYS)  # no placeholder outside a slot
    # The preview lists and links every variant.
    preview = write_preview(hostile, report, PageFacts("newsletter approve", "e.toml", False),
                            chromium=None)
    page = preview.index.read_text(encoding="utf-8")
    assert f"{len(hostile.variants)} interest variant(s)" in page
    for v in hostile.variants:
        assert f'href="email-{v.key}.html"' in page and f'href="email-{v.key}-dark.html"' in page
        assert (preview.folder / f"email-{v.key}.html").is_file()
        assert "%%" not in (preview.folder / f"email-{v.key}.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_the_preview_says_when_there_is_no_variant(settings, tmp_path):
    plain = build_with(settings, tmp_path / "issue", [])
    report = proof(plain, budget=Budget(90), repo=settings.feed.repo)
    page = write_preview(plain, report, PageFacts("a", "e.toml", False), chromium=None
                         ).index.read_text(encoding="utf-8")
    assert "0 interest variant(s)" in page and "No interest variant" in page


def test_test_copies_include_each_variant_of_the_chosen_layouts(varied, settings, tmp_path):
    outbox = tmp_path / "outbox"
    messages = Messages(varied, settings.site, settings.delivery, KEYS)
    sent = send_tests(varied, messages, OutboxTransport(outbox), "editor@example.org",
                      ["zh-en", "en"], clock=lambda: NOW)
    variants = [v.key for v in varied.variants if v.variant.layout in ("zh-en", "en")]
    assert [key for key, _ in sent] == ["zh-en", "en", *variants] and variants
    subjects = sorted(message_from_bytes(p.read_bytes(), policy=policy.default)["Subject"]
                      for p in outbox.glob("*.eml"))
    assert len(subjects) == len(sent)
    for key in variants:
        assert any(s.startswith(f"[TEST {key}] ") for s in subjects)


# -- the send: SQLite store, outbox, approval -------------------------------------------------

def _html_of(path: Path) -> str:
    message = message_from_bytes(path.read_bytes(), policy=policy.default)
    body = message.get_body(("html",))
    assert body is not None
    html: str = body.get_content()
    return html


def _first_pr(html: str, prs: list[int]) -> int:
    return min(prs, key=lambda pr: html.find(f"/pull/{pr}"))


@pytest.fixture
def store(tmp_path: Path):
    opened = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    yield opened
    opened.close()


def test_send_gives_each_reader_their_variant_and_never_rebuilds(settings, tmp_path, store):
    def add(email: str, layout: str, areas: tuple[str, ...]) -> str:
        added = store.add(email, layout, status="active", source="test", now=NOW,
                          areas=areas).subscriber
        assert added is not None
        added_id: str = added.id
        return added_id

    rocm = add("rocm@example.org", "zh-en", ("rocm",))
    changed = add("changed@example.org", "en", ("kv-connector",))
    plain = add("plain@example.org", "zh-en", ())
    elsewhere = add("elsewhere@example.org", "zh", ("not-this-week",))
    varied = build_with(settings, tmp_path / "issue", store.variant_choices())
    assert sorted(v.variant.areas for v in varied.variants) == [("kv-connector",), ("rocm",)]
    approve(varied, NOW)
    files_before = sorted(p.name for p in varied.folder.iterdir())

    # After the approval a reader changes their areas: nothing may be rendered for them now.
    store.set_layout(changed, "en", NOW, areas=("cpu",))
    transport = OutboxTransport(varied.folder / "outbox")
    messages = Messages(varied, settings.site, settings.delivery, KEYS)
    report = Sender(varied, store, transport, messages, rate=None, concurrency=1).run(SendOptions())
    assert report.sent == 4 and report.plain_fallback == 1
    assert "1 got the plain layout" in report.summary()
    write_report(varied, report)
    assert json.loads((varied.folder / "send-report.json").read_text())["plain_fallback"] == 1

    sent = {p.name.split("--")[1].removesuffix(".eml"): _html_of(p)
            for p in (varied.folder / "outbox").glob("*.eml")}
    must = [i.pr for i in varied.issue.items if i.tier == "must-read"]
    rocm_prs = [i.pr for i in varied.issue.items if "rocm" in i.areas and i.tier == "must-read"]
    rocm_key = varied.choose("zh-en", ("rocm",))[0]
    assert _first_pr(sent[rocm], must) in rocm_prs  # for-you order
    assert _first_pr(sent[plain], must) == must[0]  # rank order
    assert sent[rocm] != sent[plain]
    assert sent[rocm].count("/pull/") == varied.html(rocm_key).count("/pull/")
    for sid, layout in ((changed, "en"), (plain, "zh-en"), (elsewhere, "zh")):
        assert _without_links(sent[sid]) == _without_links(varied.html(layout)), sid

    again = load_built(varied.folder)  # nothing rebuilt, the approval still holds
    assert again.content_hash == varied.content_hash and is_approved(again)
    assert sorted(p.name for p in varied.folder.iterdir()
                  if p.name not in ("outbox", "send-report.json")) == files_before


def _without_links(html: str) -> str:
    """``html`` with its personal links (filled in or not) and line ends (an 8bit part's
    folds among them) made alike."""
    html = re.sub(r"https://news\.example\.org/app/(unsubscribe|preferences)\?token=[^\"'\s]+",
                  r"%%\1_url%%", html)
    return unfolded(html)


@pytest.mark.subprocess  # publishing runs Pagefind
def test_run_builds_with_the_stores_choices(tmp_path):
    make_project(tmp_path)
    with SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3") as seeded:
        for n, areas in enumerate((("rocm",), ("rocm",), ("cpu", "nixl"), ())):
            seeded.add(f"r{n}@example.org", "zh-en", status="active", source="test", now=NOW,
                       areas=areas)
    result = ok(newsletter_main(["run", "--week", SAMPLE_WEEK], tmp_path))
    assert "sent 4," in result.stdout and "plain layout" not in result.stdout
    folder = tmp_path / "build" / "issues" / SAMPLE_WEEK
    data = json.loads((folder / "issue.json").read_text(encoding="utf-8"))
    assert sorted(v["areas"] for v in data["variants"]) == [["cpu", "nixl"], ["rocm"]]
    report = json.loads((folder / "send-report.json").read_text(encoding="utf-8"))
    assert report["plain_fallback"] == 0


def test_a_build_without_a_store_creates_none_and_has_no_variant(tmp_path):
    result = ok(newsletter_main(["build", "--week", SAMPLE_WEEK], make_project(tmp_path)))
    assert "0 interest variant(s)" in result.stdout
    assert not (tmp_path / "data" / "subscribers.sqlite3").exists()


def test_the_public_issue_json_carries_no_readers_choices(varied, settings):
    assert "variants" in varied.data
    (obj,) = [o for o in Site(settings.site).issue_objects(varied) if o.key.endswith("issue.json")]
    public = json.loads(obj.data)
    assert "variants" not in public and public["content_hash"] == varied.content_hash
    chosen = {area for entry in varied.data["variants"] for area in entry["areas"]}
    assert chosen and public["items"] == varied.data["items"]  # the issue itself, whole
    plain = load_built(build(settings, week_id=SAMPLE_WEEK, out=varied.folder.parent / "plain",
                             choices=[]).out_dir)
    assert public_issue_json(plain) == plain.source  # no variants: the file as built


@pytest.mark.subprocess  # publishing runs Pagefind
def test_publishing_fills_the_area_catalog_the_forms_offer(varied, settings, store):
    assert store.known_areas() == ()
    publish_issue(settings, varied)
    assert store.known_areas() == issue_areas(varied.issue.items) != ()


@pytest.mark.subprocess  # publishing runs Pagefind
def test_publishing_without_a_store_makes_one_for_its_lease_only(varied, settings, tmp_path):
    publish_issue(settings, varied)
    assert (tmp_path / "build" / "site" / "index.html").is_file()
    with SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3") as store:
        assert not any(store.count_by_status().values())  # nobody on the list
        lease = store.acquire_lease(archive_lease(settings), "next", datetime.now(UTC),
                                    timedelta(minutes=1))
        assert lease.owner == "next"  # released
