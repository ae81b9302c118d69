"""Pre-flight: everything a send checks is checked before ``run`` publishes anything: each
misconfiguration is one line and its exit code, the archive untouched and no mail sent.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.commands import newsletter_main as newsletter
from support.commands import ok
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK, make_project
from support.servers import SmtpSink

from pipeline.errors import UsageError
from pipeline.stages.approve import approve
from pipeline.stages.built import load_built
from pipeline.stages.preflight import check_week, not_started
from pipeline.week import parse_week, week_containing

SECRET = "s" * 40
HTTPS_APP = '[site]\napp_url = "https://news.example.org/api"\n'
TZ = "Asia/Shanghai"
#: 904 characters: "List-Unsubscribe: <" + it + "/unsubscribe?token=" + a 56-character token + ">"
#: is 999 octets, one over a mail line.
LONG_APP_URL = "https://news.example.org/" + "a" * 879


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The error, checked to be exactly one line and no traceback."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def project(folder: Path, config: str = "") -> Path:
    ok(newsletter(["subscribers", "add", "reader@example.org", "--confirmed"],
                  make_project(folder, extra=config)))
    return folder


def archive_files(folder: Path) -> list[Path]:
    site = folder / "build" / "site"
    return sorted(p for p in site.rglob("*") if p.is_file()) if site.exists() else []


def smtp_config(sink: SmtpSink, *, starttls: bool = False, extra: str = "") -> str:
    return (f'[delivery]\ntransport = "smtp"\n{extra}'
            f'[smtp]\nhost = "{sink.host}"\nport = {sink.port}\n'
            f'starttls = {"true" if starttls else "false"}\n')


# -- run publishes nothing when the send would fail ----------------------------------

#: (name, config besides the relay, environment, exit code, words of the error)
MISCONFIGURED = [
    ("no secret", HTTPS_APP, {}, 2, "NEWSLETTER_SECRET"),
    ("bad unsubscribe_mailto", HTTPS_APP, {"NEWSLETTER_SECRET": SECRET,
                                           "NEWSLETTER_DELIVERY_UNSUBSCRIBE_MAILTO": "nobody"},
     2, "unsubscribe_mailto"),
    ("bad from", HTTPS_APP, {"NEWSLETTER_SECRET": SECRET,
                             "NEWSLETTER_DELIVERY_FROM": "no address here"}, 2, "from"),
    ("http app_url", "", {"NEWSLETTER_SECRET": SECRET}, 2, "https"),
    ("no app_url", '[site]\napp_url = ""\n', {"NEWSLETTER_SECRET": SECRET}, 2, "app_url"),
    # One character over what List-Unsubscribe can carry with its token on a mail line.
    ("app_url too long for a header", f'[site]\napp_url = "{LONG_APP_URL}"\n',
     {"NEWSLETTER_SECRET": SECRET}, 2, "[site] app_url"),
    ("unsubscribe_mailto too long for a header", HTTPS_APP,
     {"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_DELIVERY_UNSUBSCRIBE_MAILTO":
      "unsub@" + "a" * 60 + ".example" * 120 + ".org"}, 2, "[delivery] unsubscribe_mailto"),
    ("username without password", HTTPS_APP,
     {"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_SMTP_USERNAME": "weekly"}, 2,
     "NEWSLETTER_SMTP_PASSWORD"),
]


@pytest.mark.parametrize(("name", "config", "env", "code", "words"), MISCONFIGURED,
                         ids=[m[0] for m in MISCONFIGURED])
def test_run_publishes_nothing_when_the_send_is_misconfigured(
        tmp_path, smtp_server, name, config, env, code, words):
    folder = project(tmp_path, config + smtp_config(smtp_server))
    result = newsletter(["run", "--week", SAMPLE_WEEK], folder, **env)
    assert result.returncode == code, result.stdout + result.stderr
    assert words in one_line(result)
    assert "published" not in result.stdout
    assert archive_files(folder) == []
    assert smtp_server.received == []


def test_run_publishes_nothing_when_the_relay_refuses_starttls(tmp_path, smtp_server):
    folder = project(tmp_path, HTTPS_APP + smtp_config(smtp_server, starttls=True))
    result = newsletter(["run", "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line(result)
    assert "STARTTLS" in line and "[smtp] starttls = false" in line
    assert f"127.0.0.1:{smtp_server.port}" in line
    assert archive_files(folder) == [] and smtp_server.received == []


def test_run_publishes_nothing_when_the_relay_is_down(tmp_path, unused_port):
    folder = project(tmp_path, HTTPS_APP + '[delivery]\ntransport = "smtp"\n'
                     f'[smtp]\nhost = "127.0.0.1"\nport = {unused_port}\nstarttls = false\n')
    result = newsletter(["run", "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET)
    assert result.returncode == 4, result.stdout + result.stderr
    line = one_line(result)
    assert f"127.0.0.1:{unused_port}" in line and "nothing was published or sent" in line
    assert archive_files(folder) == []


def test_run_publishes_nothing_to_s3_when_the_secret_is_missing(tmp_path, moto_server):
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket="weekly-archive")
    folder = project(tmp_path, HTTPS_APP + '[delivery]\ntransport = "ses"\n'
                     '[archive]\ntarget = "s3"\nbucket = "weekly-archive"\n')
    result = newsletter(["run", "--week", SAMPLE_WEEK], folder)
    assert result.returncode == 2 and "NEWSLETTER_SECRET" in one_line(result)
    assert s3.list_objects_v2(Bucket="weekly-archive").get("KeyCount") == 0
    assert moto_server.sent() == []


@pytest.mark.subprocess  # publishing runs Pagefind
def test_run_still_publishes_then_sends_when_all_is_well(tmp_path, smtp_server):
    folder = project(tmp_path, HTTPS_APP + smtp_config(smtp_server))
    result = ok(newsletter(["run", "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET))
    assert result.stdout.index("published 2026-W48") < result.stdout.index("sent 1,")
    assert archive_files(folder) and len(smtp_server.received) == 1


# -- a real transport needs an https app URL ----------------------------------------

@pytest.mark.parametrize("command", [["send"], ["send", "--to", "editor@example.org"]],
                         ids=["send", "send --to"])
def test_smtp_refuses_an_http_app_url(tmp_path, smtp_server, command):
    folder = project(tmp_path, smtp_config(smtp_server))
    ok(newsletter(["build", "--week", SAMPLE_WEEK], folder))
    result = newsletter([*command, "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET)
    assert result.returncode == 2
    line = one_line(result)
    assert "[site] app_url" in line and "https" in line and "http://127.0.0.1:8001" in line
    assert smtp_server.received == []


def test_ses_refuses_an_http_app_url_before_any_request(tmp_path, moto_server):
    folder = project(tmp_path, '[delivery]\ntransport = "ses"\n')
    ok(newsletter(["build", "--week", SAMPLE_WEEK], folder))
    result = newsletter(["send", "--week", SAMPLE_WEEK], folder, NEWSLETTER_SECRET=SECRET)
    assert result.returncode == 2 and "https" in one_line(result)
    assert moto_server.sent() == []


# -- a week that has not ended is not sent --------------------------------------------

def current_week_feed(folder: Path) -> tuple[str, Path]:
    """This week's id and a feed with one bilingual review in it, dated at its start."""
    week = week_containing(datetime.now(UTC), TZ)
    when = week.start.isoformat()
    feed = folder / "this-week.atom"
    feed.write_bytes(atom([
        Entry(pr=70001, lang="zh-CN", published=when, title="本周的评审", body="值得精读。"),
        Entry(pr=70001, lang="en", published=when, title="This week's review",
              body="Must read."),
    ]))
    return week.id, feed


def test_the_current_week_builds_but_is_not_sent_without_the_flag(tmp_path):
    folder = project(tmp_path)
    week, feed = current_week_feed(folder)
    ok(newsletter(["build", "--week", week, "--feed", str(feed)], folder))  # proofs stay early
    refused = newsletter(["send", "--week", week], folder)
    assert refused.returncode == 2
    line = one_line(refused)
    assert f"week {week} has not ended" in line and "--allow-partial-week" in line
    assert not (folder / "build" / "issues" / week / "outbox").exists()
    # A test copy is a proof: allowed.
    ok(newsletter(["send", "--week", week, "--to", "editor@example.org"], folder))
    sent = ok(newsletter(["send", "--week", week, "--allow-partial-week"], folder))
    assert "sent 1," in sent.stdout


@pytest.mark.subprocess  # publishing runs Pagefind
def test_run_refuses_the_current_week_before_building_or_publishing(tmp_path):
    folder = project(tmp_path)
    week, feed = current_week_feed(folder)
    refused = newsletter(["run", "--week", week, "--feed", str(feed)], folder)
    assert refused.returncode == 2 and f"week {week} has not ended" in one_line(refused)
    assert not (folder / "build" / "issues" / week).exists()
    assert archive_files(folder) == []
    done = ok(newsletter(["run", "--week", week, "--feed", str(feed), "--allow-partial-week"],
                         folder))
    assert "sent 1," in done.stdout


@pytest.mark.subprocess  # publishing runs Pagefind
def test_publish_refuses_the_current_week_unless_allowed(tmp_path):
    folder = project(tmp_path)
    week, feed = current_week_feed(folder)
    ok(newsletter(["build", "--week", week, "--feed", str(feed)], folder))
    refused = newsletter(["publish", "--week", week], folder)
    assert refused.returncode == 2
    line = one_line(refused)
    assert f"week {week} has not ended" in line and "--allow-partial-week" in line
    assert "published now" in line
    assert archive_files(folder) == []
    done = ok(newsletter(["publish", "--week", week, "--allow-partial-week"], folder))
    assert f"published {week}" in done.stdout and archive_files(folder) != []
    # The pages name their sender as the email does ([delivery] publisher, else from).
    page = (folder / "build" / "site" / "issues" / week / "en.html").read_text()
    assert "Sent by" in page and "vLLM PR Weekly &lt;weekly@example.org&gt;" in page


@pytest.mark.parametrize("command", [["publish"], ["send"], ["approve"], ["run"]],
                         ids=["publish", "send", "approve", "run"])
def test_a_folder_holding_another_weeks_issue_is_refused(tmp_path, command):
    """The week asked is not the issue the folder holds: exit 2, one line naming both weeks."""
    folder = project(tmp_path)
    week, feed = current_week_feed(folder)
    w48 = folder / "build" / "issues" / SAMPLE_WEEK
    ok(newsletter(["build", "--week", week, "--feed", str(feed), "--out", str(w48)], folder))
    if command == ["run"]:  # the editor's approval of what the folder holds
        approve(load_built(w48), datetime.now(UTC))
    result = newsletter([*command, "--week", SAMPLE_WEEK], folder)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line(result)
    assert f"holds the issue of {week}, not {SAMPLE_WEEK}" in line
    assert archive_files(folder) == [] and not (w48 / "outbox").exists()
    assert (w48 / "approval.json").exists() == (command == ["run"])


def future_week() -> str:
    year = datetime.now(UTC).year + 1
    return f"{year}-W02"


@pytest.mark.parametrize("command", [
    ["run"], ["run", "--allow-partial-week"], ["send"], ["send", "--allow-partial-week"],
    ["publish"], ["publish", "--allow-partial-week"],
    ["build"], ["translations"], ["preview", "--no-serve", "--no-screenshots"]])
def test_a_future_week_says_it_has_not_started(tmp_path, command):
    folder = project(tmp_path)
    week = future_week()
    result = newsletter([*command, "--week", week], folder)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line(result)
    assert f"week {week} has not started" in line and "no reviews" not in line


def test_check_week_against_a_set_clock():
    week = parse_week("2026-W48", TZ)  # Mon 23 Nov 00:00 +08 → Mon 30 Nov 00:00 +08
    check_week(week, week.end)  # ended: fine
    check_week(week, week.end + timedelta(days=300))
    with pytest.raises(UsageError, match=r"has not ended.*--allow-partial-week"):
        check_week(week, week.end - timedelta(seconds=1))
    check_week(week, week.end - timedelta(seconds=1), allow_partial_week=True)
    with pytest.raises(UsageError, match="has not started"):
        check_week(week, week.start - timedelta(seconds=1), allow_partial_week=True)
    assert not_started(week, week.start) is None


def test_run_reads_the_one_clock(tmp_path, monkeypatch, capsys):
    """``run`` decides "not ended" by ``pipeline.week.now``, the clock tests set."""
    from pipeline import cli, week

    folder = project(tmp_path)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(week, "now", lambda: datetime(2026, 11, 28, 12, 0, tzinfo=UTC))
    assert cli.main(["run", "--week", SAMPLE_WEEK]) == 2
    assert "week 2026-W48 has not ended" in capsys.readouterr().err
    assert archive_files(folder) == []


# -- what preflight asks of a transport, answered by each adapter -----------------------------

def test_real_transports_describe_where_they_send_and_never_the_login() -> None:
    from pipeline.config import SmtpSettings
    from pipeline.transport.ses import SesTransport
    from pipeline.transport.smtp import SmtpTransport

    smtp = SmtpTransport(SmtpSettings(host="relay.example.org", port=587, starttls=True,
                                      username="someone"), "a password")
    assert smtp.describe() == "smtp relay.example.org:587 with STARTTLS"
    plain = SmtpTransport(SmtpSettings(host="127.0.0.1", port=2525, starttls=False), None)
    assert plain.describe() == "smtp 127.0.0.1:2525"
    ses = SesTransport("weekly", client=object())  # type: ignore[arg-type]
    assert ses.describe() == "ses (configuration set weekly)"
    assert SesTransport("", client=object()).describe() == "ses"  # type: ignore[arg-type]
    assert smtp.reaches_mailboxes and ses.reaches_mailboxes
