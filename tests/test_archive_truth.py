"""The archive tells the truth: after any sequence of builds, editor's decisions and publishes,
every page, feed entry, sitemap entry and search record matches the archive's issue.json files,
and no internal link is broken. Each seed draws rounds of real decisions, builds and publishes
over three weeks whose PRs and areas recur, so hiding a PR can take a page away.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.feeds import Entry, atom
from support.links import broken_links

from pipeline.archive.local import LocalArchive
from pipeline.cli.common import publish_issue
from pipeline.config import Settings, load
from pipeline.core.site import search, site_pages
from pipeline.core.site.site import Site
from pipeline.errors import EmptyWeekError
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.stages.publish import publish

#: Per week, its reviews: PR → (its day in the week, its areas, its verdict). PR 101 is
#: reviewed in 2026-W46 and again in 2026-W47, 201 in W47 and W48; area ``sched`` has seven
#: reviews over every week, ``rare`` only PR 202's.
WEEKS: dict[str, dict[int, tuple[str, tuple[str, ...], str]]] = {
    "2026-W46": {101: ("2026-11-10", ("kernels", "sched"), "must"),
                 102: ("2026-11-11", ("sched",), "skim"),
                 103: ("2026-11-12", (), "must")},
    "2026-W47": {201: ("2026-11-17", ("sched", "spec"), "must"),
                 202: ("2026-11-18", ("rare", "sched"), "must"),
                 101: ("2026-11-19", ("kernels",), "skim")},
    "2026-W48": {301: ("2026-11-24", ("sched",), "must"),
                 302: ("2026-11-25", ("spec",), "skim"),
                 303: ("2026-11-26", ("kernels", "sched"), "must"),
                 201: ("2026-11-27", ("sched",), "must")},
}
VERDICTS = {"must": ("值得精读：改动集中在 `{pr}`。", "Must read: the change is in `{pr}`."),
            "skim": ("值得一读：`{pr}` 的小改动。", "Skim: a small change to `{pr}`.")}
TIERS = ("must-read", "medium", "skim")
#: Each of these sequences hides a PR after its week was published, then publishes the week
#: again (not every seed does).
SEEDS = (1, 4, 5)
ROUNDS = 8


def week_feed(week: str) -> bytes:
    entries = []
    for pr, (day, areas, verdict) in WEEKS[week].items():
        zh, en = (text.format(pr=f"module_{pr}") for text in VERDICTS[verdict])
        entries += [
            Entry(pr=pr, lang="zh-CN", published=f"{day}T10:00:00+08:00", title=f"评审 {pr}",
                  body=zh, categories=list(areas), id=f"zh-{week}-{pr}"),
            Entry(pr=pr, lang="en", published=f"{day}T12:00:00+08:00", title=f"Review {pr}",
                  body=en, categories=list(areas), id=f"en-{week}-{pr}"),
        ]
    return atom(entries)


class Project:
    """A project folder: a feed per week, the editor's files, builds and an archive."""

    def __init__(self, root: Path) -> None:
        (root / "newsletter.toml").write_text('[feed]\nurls = []\n[archive]\ndir = "site"\n',
                                              encoding="utf-8")
        self.settings: Settings = load(root / "newsletter.toml", {})
        self.archive = LocalArchive(root / "site")
        self.feeds = {}
        for week in WEEKS:
            self.feeds[week] = root / f"{week}.atom"
            self.feeds[week].write_bytes(week_feed(week))
        self.editorial: dict[str, dict[int, dict[str, object]]] = {week: {} for week in WEEKS}
        self.built: dict[str, Path] = {}

    def decide(self, week: str, pr: int, **entry: object) -> None:
        """The editor changes one PR's table in the week's file (None: the key goes)."""
        table = self.editorial[week].setdefault(pr, {})
        table.update(entry)
        for key in [key for key, value in table.items() if value is None]:
            del table[key]
        folder = self.settings.resolve(self.settings.paths.editorial_dir)
        folder.mkdir(exist_ok=True)
        text = "".join(f"[{number}]\n" + "".join(f"{key} = {json.dumps(value)}\n"
                                                for key, value in sorted(fields.items()))
                       for number, fields in sorted(self.editorial[week].items()) if fields)
        (folder / f"{week}.toml").write_text(text, encoding="utf-8")

    def build(self, week: str) -> bool:
        try:
            built = build(self.settings, week_id=week, feeds=[str(self.feeds[week])])
        except EmptyWeekError:  # every PR hidden: no issue, the last build stays
            return False
        self.built[week] = built.out_dir
        return True

    def publish(self, week: str) -> None:
        report = publish(load_built(self.built[week]), self.archive, Site(self.settings.site))
        assert report.search_problem == ""


def run_sequence(project: Project, rng: random.Random, log: list[str]) -> int:
    """Rounds of editor's decisions, a build and a publish; checks the archive after each
    publish; how many publishes there were."""
    published = 0
    for _ in range(ROUNDS):
        week = rng.choice(list(WEEKS))
        for _ in range(rng.randint(1, 3)):
            pr = rng.choice(list(WEEKS[week]))
            action = rng.choice(("hide", "hide", "unhide", "priority"))
            if action == "priority":
                tier = rng.choice((*TIERS, None))
                project.decide(week, pr, priority=tier)
                log.append(f"{week} #{pr} priority={tier}")
            else:
                project.decide(week, pr, hide=True if action == "hide" else None)
                log.append(f"{week} #{pr} {action}")
        log.append(f"build {week}: {'ok' if project.build(week) else 'empty'}")
        if project.built:  # mostly the week just built; now and then an older build
            target = week if week in project.built and rng.random() < 0.7 else \
                rng.choice(sorted(project.built))
            project.publish(target)
            log.append(f"publish {target}")
            published += 1
            assert_archive_matches_its_issues(project)
    return published


@pytest.fixture
def small_area_pages(monkeypatch):
    """Two reviews a page, so a hidden review can take an area's last page away."""
    monkeypatch.setattr(site_pages, "AREA_PAGE_SIZE", 2)


@pytest.mark.slow  # eight builds and publishes, each publish indexing with Pagefind
@pytest.mark.subprocess  # each publish ends by running Pagefind
@pytest.mark.parametrize("seed", SEEDS)
def test_after_any_editorial_sequence_the_archive_matches_its_issues(seed, tmp_path,
                                                                      small_area_pages):
    project = Project(tmp_path)
    log: list[str] = []
    try:
        assert run_sequence(project, random.Random(seed), log) > 0
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}, after: {'; '.join(log)}\n{exc}") from None


@pytest.mark.slow  # five builds and publishes, each publish indexing with Pagefind
@pytest.mark.subprocess  # publish runs Pagefind
def test_a_hidden_pr_leaves_every_page_feed_and_the_sitemap(tmp_path, small_area_pages,
                                                            capsys):
    """Hiding a PR with an area of its own removes its pages; publish says how many went."""
    project = Project(tmp_path)
    for week in WEEKS:
        project.build(week)
        project.publish(week)
    root = project.archive.root
    assert (root / "pr/202/index.html").is_file() and (root / "areas/rare/feed.xml").is_file()
    assert (root / "areas/sched/page/4/index.html").is_file()  # 7 reviews, 2 a page
    project.decide("2026-W47", 202, hide=True)
    project.decide("2026-W47", 201, hide=True)  # its W48 review stays
    project.build("2026-W47")
    capsys.readouterr()
    publish_issue(project.settings, load_built(project.built["2026-W47"]))
    # pr/202, areas/rare/ (its page and feed), areas/sched/page/4/: 7 reviews, then 5
    assert ", 4 page(s) no issue carries removed" in capsys.readouterr().out
    assert not (root / "pr/202").exists() and not (root / "areas/rare").exists()
    assert not (root / "areas/sched/page/4").exists()
    assert (root / "pr/201/index.html").is_file()
    assert_archive_matches_its_issues(project)
    project.decide("2026-W47", 202, hide=None)
    project.build("2026-W47")
    project.publish("2026-W47")
    assert (root / "pr/202/index.html").is_file() and (root / "areas/rare/feed.xml").is_file()
    assert_archive_matches_its_issues(project)


def test_the_link_check_finds_each_kind_of_broken_link(tmp_path):
    """The checker the tests above lean on, on an archive written by hand."""
    base = "https://weekly.example.org/archive"
    pages = {
        "index.html": '<a href="issues/w/index.html#pr-1">ok</a><a href="issues/w/">ok</a>'
                      '<a href="https://github.com/x">elsewhere</a><a href="mailto:a@b.c">m</a>'
                      f'<form action="{base}/api/subscribe"></form>'
                      '<a href="issues/w/index.html#pr-2">anchor gone</a>'
                      '<a href="/pagefind/x.js">outside the base</a>',
        "issues/w/index.html": '<article id="pr-1"></article><a name="top"></a>'
                               f'<img src="{base}/static/gone.png"><a href="#top">ok</a>',
        "feed.xml": f'<feed><id>{base}/no/such/id</id><link href="{base}/index.html"/>'
                    '<content type="html">&lt;a href="' + base + '/pr/9/index.html"&gt;'
                    '&lt;/a&gt;</content></feed>',
        "sitemap.xml": f"<urlset><url><loc>{base}/issues/w/zh.html</loc></url></urlset>",
    }
    for key, text in pages.items():
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text(text, encoding="utf-8")
    found = {(link.source, link.url, link.why) for link in
             broken_links(tmp_path, base, outside=(f"{base}/api",))}
    assert found == {
        ("index.html", "issues/w/index.html#pr-2", "no #pr-2 in issues/w/index.html"),
        ("index.html", "/pagefind/x.js", "outside the archive's base URL"),
        ("issues/w/index.html", f"{base}/static/gone.png", "no file static/gone.png"),
        ("feed.xml", f"{base}/pr/9/index.html", "no file pr/9/index.html"),
        ("sitemap.xml", f"{base}/issues/w/zh.html", "no file issues/w/zh.html"),
    }


# -- the check: the archive's issue.json files against everything else ----------------------


def assert_archive_matches_its_issues(project: Project) -> None:
    root, site = project.archive.root, project.settings.site
    base = site.base_url.rstrip("/")
    issues = {path.parent.name: json.loads(path.read_text("utf-8"))["items"]
              for path in sorted(root.glob("issues/*/issue.json"))}
    weeks = sorted(issues, reverse=True)
    # Every review the archive holds, newest issue first, in rank order within an issue.
    seen = [(week, item["pr"], tuple(item["areas"])) for week in weeks for item in issues[week]]
    prs = {pr for _, pr, _ in seen}
    areas = {area: [(week, pr) for week, pr, tags in seen if area in tags]
             for area in sorted({area for _, _, tags in seen for area in tags})}
    size = site_pages.AREA_PAGE_SIZE
    pages = {area: [reviews[n:n + size] for n in range(0, len(reviews), size)]
             for area, reviews in areas.items()}

    def page_key(area: str, n: int) -> str:
        return f"areas/{area}/index.html" if n == 1 else f"areas/{area}/page/{n}/index.html"

    def text(key: str) -> str:
        return (root / key).read_text("utf-8")

    def anchors(html: str) -> list[tuple[str, int]]:
        return [(week, int(pr)) for week, pr in
                re.findall(r'href="[^"]*/issues/([0-9]{4}-W[0-9]{2})/index\.html#pr-(\d+)"',
                           html)]

    # The issue pages: each review of the issue once, in its order, in all three languages.
    for week in weeks:
        for variant in ("index.html", "zh.html", "en.html"):
            shown = re.findall(r'<article[^>]*\bid="pr-(\d+)"', text(f"issues/{week}/{variant}"))
            assert [int(pr) for pr in shown] == [item["pr"] for item in issues[week]], \
                (week, variant)
    # The PR pages: one per PR the issues carry, linking each review of it, newest first.
    assert files(root, "pr/") == {f"pr/{pr}/index.html" for pr in prs}
    for pr in prs:
        assert anchors(text(f"pr/{pr}/index.html")) == [(w, p) for w, p, _ in seen if p == pr]
    # The area pages, the areas list and the areas' feeds.
    assert files(root, "areas/") == {"areas/index.html"} | {
        key for area, chunks in pages.items()
        for key in [f"areas/{area}/feed.xml"] + [page_key(area, n) for n in
                                                   range(1, len(chunks) + 1)]}
    listed = re.findall(r'href="[^"]*/areas/([^/"]+)/index\.html"', text("areas/index.html"))
    assert sorted(set(listed)) == sorted(areas)
    for area, chunks in pages.items():
        for n, chunk in enumerate(chunks, 1):
            assert anchors(text(page_key(area, n))) == chunk, (area, n)
        feed = ET.parse(root / f"areas/{area}/feed.xml").getroot()  # noqa: S314 (ours)
        ids = [entry.findtext(f"{ATOM}id", "") for entry in feed.iter(f"{ATOM}entry")]
        assert ids == [f"{base}/pr/{pr}/index.html#{week}" for week, pr in
                       areas[area][:site_pages.AREA_FEED_ENTRIES]], area
    # The index and the Atom feed of issues.
    listed = re.findall(r'href="[^"]*/issues/([0-9]{4}-W[0-9]{2})/index\.html"',
                        text("index.html"))
    assert sorted(set(listed), reverse=True) == weeks
    feed = ET.parse(root / "feed.xml").getroot()  # noqa: S314 (our own output)
    assert [link.get("href") for link in feed.iterfind(f"{ATOM}entry/{ATOM}link")] == [
        f"{base}/issues/{week}/index.html" for week in weeks]
    # The sitemap names every page made from the issues, and nothing else.
    sitemap = ET.parse(root / "sitemap.xml").getroot()  # noqa: S314 (our own output)
    assert {loc.text for loc in sitemap.iter(f"{SITEMAP}loc")} == {
        f"{base}/{key}" for key in (
            ["index.html"] + [f"issues/{w}/{v}" for w in weeks
                              for v in ("index.html", "zh.html", "en.html")]
            + [f"pr/{pr}/index.html" for pr in prs] + (["areas/index.html"] if areas else [])
            + [page_key(area, n) for area, chunks in pages.items()
               for n in range(1, len(chunks) + 1)])}
    # The live search index: one record per review, each naming its issue and PR.
    assert search_records(root) == {f"/issues/{week}/index.html": sorted(
        item["pr"] for item in issues[week]) for week in weeks}
    assert broken_links(root, site.base_url, outside=(site.app_url,)) == []


ATOM = "{http://www.w3.org/2005/Atom}"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def files(root: Path, prefix: str) -> set[str]:
    return {path.relative_to(root).as_posix() for path in (root / prefix).rglob("*")
            if path.is_file()}


def search_records(root: Path) -> dict[str, list[int]]:
    """The live search index: the reviews its records name, by the issue page a result links
    to, in PR order. Only the fragments the manifest's bundles name are read: an older
    index's files stay a week for readers mid-session, and are not searched."""
    manifest = json.loads((root / search.MANIFEST).read_text("utf-8"))
    found: dict[str, list[int]] = {}
    for year in manifest["years"].values():
        for key in year["files"]:
            if "/fragment/" not in key:
                continue
            data = gzip.decompress((root / key).read_bytes())
            meta = json.loads(data[data.index(b"{"):])["meta"]
            found.setdefault(f"/issues/{meta['week']}/index.html", []).append(int(meta["pr"]))
    return {page: sorted(prs) for page, prs in found.items()}
