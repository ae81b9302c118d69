"""The production deployment, checked offline: deploy/template.yaml (cfn-lint, and the
decisions that must not drift), the GitHub workflows (the schema ``check-jsonschema`` vendors,
``bash -n``, and their scripts run with stand-in tools), and the Lambda handler, cold-started
in a fresh process and called with function URL and queue events.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support.commands import clean_env
from support.deploy_files import (
    TEMPLATE,
    WEEKLY,
    WORKFLOWS,
    environments,
    resources,
    steps,
    template,
    triggers,
    workflow,
)
from support.function_events import APP_URL, SITE, body_of, sqs_event, subscribe_event, url_event
from support.project import ROOT

from pipeline.week import last_complete_week
from subscribers.store.sqlite import SqliteStore

BIN = Path(sys.executable).parent


def step_with_id(flow: dict[str, Any], job: str, step_id: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [s for s in flow["jobs"][job]["steps"]
                                     if s.get("id") == step_id]
    (found,) = matches
    return found



# -- the template ------------------------------------------------------------------------------

@pytest.mark.slow  # cfn-lint loads its schema of every AWS resource type
@pytest.mark.subprocess
def test_the_template_passes_cfn_lint():
    result = subprocess.run([str(BIN / "cfn-lint"), "--", str(TEMPLATE)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_the_tables_are_the_ones_the_store_creates_with_expiry_and_backups():
    from subscribers.store.dynamo import table_definitions

    tables = {r["Properties"]["TableName"]["Fn::Sub"]: r["Properties"]
              for r in resources("AWS::DynamoDB::Table").values()}
    subscribers, ledger = "${AWS::StackName}-subscribers", "${AWS::StackName}-ledger"
    assert sorted(tables) == sorted([subscribers, ledger])
    for definition in table_definitions(subscribers, ledger):
        table = tables[definition.pop("TableName")]
        assert {key: table[key] for key in definition} == definition
        assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert tables[subscribers]["TimeToLiveSpecification"] == {"AttributeName": "expires_at",
                                                              "Enabled": True}
    assert "TimeToLiveSpecification" not in tables[ledger]


def _viewer_rule() -> tuple[str, str]:
    """The folder rule of the viewer function: its one ``replace(/regex/, '...')``."""
    (function,) = resources("AWS::CloudFront::Function").values()
    assert function["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    code = function["Properties"]["FunctionCode"]
    calls = re.findall(r"request\.uri\.replace\(/((?:\\.|[^/\\])+)/([a-z]*), '([^']*)'\)", code)
    assert len(calls) == 1 and code.count("replace(") == 1, code
    pattern, flags, replacement = calls[0]
    # Evaluated below with Python's re: only syntax both dialects read alike is allowed
    # (escaped slashes, literals, the $ anchor), and no flags.
    assert flags == ""
    assert re.fullmatch(r"(?:\\/|[A-Za-z0-9_.-]|\$)+", pattern), pattern
    return pattern.replace("\\/", "/"), replacement


@pytest.mark.parametrize(("uri", "served"), [
    ("/issues/2026-W48/", "/issues/2026-W48/index.html"),
    ("/", "/index.html"),
    ("/issues/", "/issues/index.html"),
    ("/feed.xml", "/feed.xml"),
    ("/issues/2026-W48/zh.html", "/issues/2026-W48/zh.html"),
    ("/issues/2026-W48/index.html", "/issues/2026-W48/index.html"),
    ("/404.html", "/404.html"),
])
def test_the_viewer_function_serves_a_folders_index(uri, served):
    pattern, replacement = _viewer_rule()
    assert re.sub(pattern, replacement, uri, count=1) == served


def test_one_distribution_serves_the_archive_and_the_app():
    (distribution,) = resources("AWS::CloudFront::Distribution").values()
    config = distribution["Properties"]["DistributionConfig"]
    origins = {o["Id"]: o for o in config["Origins"]}

    # The archive: a private bucket read through an origin access control.
    default = config["DefaultCacheBehavior"]
    assert origins[default["TargetOriginId"]]["OriginAccessControlId"] == {
        "Fn::GetAtt": ["ArchiveOriginAccessControl", "Id"]}
    assert default["FunctionAssociations"] == [{
        "EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": ["IndexFunction",
                                                                      "FunctionARN"]}}]
    assert default["ResponseHeadersPolicyId"] == {"Ref": "SecurityHeadersPolicy"}
    assert {"ErrorCode": 404, "ResponseCode": 404, "ResponsePagePath": "/404.html"}.items() \
        <= config["CustomErrorResponses"][0].items()
    (bucket,) = [r for name, r in resources("AWS::S3::Bucket").items() if name == "ArchiveBucket"]
    assert set(bucket["Properties"]["PublicAccessBlockConfiguration"].values()) == {True}

    # The app: /api/* to the function URL, nothing cached, every method, the query string
    # (the tokens), Origin and Referer (the form's origin check), never Host.
    (api,) = config["CacheBehaviors"]
    assert api["PathPattern"] == "/api/*"
    app = origins[api["TargetOriginId"]]
    assert app["DomainName"]["Fn::Select"][1]["Fn::Split"][1] == {
        "Fn::GetAtt": ["SubscriptionFunctionUrl", "FunctionUrl"]}
    assert api["CachePolicyId"].startswith("4135ea2d-")  # Managed-CachingDisabled
    assert set(api["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST",
                                          "DELETE"}
    policy = resources("AWS::CloudFront::OriginRequestPolicy")[api["OriginRequestPolicyId"]["Ref"]]
    forwarded = policy["Properties"]["OriginRequestPolicyConfig"]
    assert forwarded["QueryStringsConfig"] == {"QueryStringBehavior": "all"}
    assert forwarded["HeadersConfig"]["HeaderBehavior"] == "whitelist"
    headers = {h.lower() for h in forwarded["HeadersConfig"]["Headers"]}
    assert {"origin", "referer", "content-type", "cloudfront-viewer-address"} <= headers
    assert "host" not in headers
    # Only CloudFront's requests carry the secret the function checks (pipeline/lambda_app).
    assert [h["HeaderName"].lower() for h in app["OriginCustomHeaders"]] == ["x-origin-verify"]
    (url,) = resources("AWS::Lambda::Url").values()
    assert url["Properties"]["AuthType"] == "NONE"


def test_the_function_runs_the_lambda_handler_with_the_production_settings():
    (function,) = resources("AWS::Serverless::Function").values()
    properties = function["Properties"]
    assert properties["Handler"] == "pipeline.web.lambda_app.handler"
    assert properties["Runtime"] == "python3.11"
    variables = properties["Environment"]["Variables"]
    assert variables["NEWSLETTER_STORE_BACKEND"] == "dynamodb"
    assert variables["NEWSLETTER_DELIVERY_TRANSPORT"] == "ses"
    assert variables["NEWSLETTER_SITE_APP_URL"] == {"Fn::Sub": "https://${DomainName}/api"}
    assert variables["NEWSLETTER_SES_SNS_TOPIC_ARNS"] == {"Ref": "SesEventsTopic"}
    # Where the secrets are, never what they are.
    assert not {"NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS"} & set(variables)
    assert variables["NEWSLETTER_SECRET_PARAMETER"] == {"Ref": "NewsletterSecretParameter"}
    secret = template()["Parameters"]["NewsletterSecretParameter"]
    assert "Default" not in secret
    assert re.fullmatch(secret["AllowedPattern"], "/vllm-pr-weekly/secret")
    assert not re.fullmatch(secret["AllowedPattern"], "s3cr3t-value-typed-inline")


def test_sign_ups_go_through_a_queue_that_invokes_the_function():
    """pipeline/web/signups.py: on Lambda the answer must not wait for the address."""
    (function,) = resources("AWS::Serverless::Function").values()
    properties = function["Properties"]
    assert properties["Environment"]["Variables"]["NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL"] == {
        "Ref": "SignupQueue"}
    (event,) = properties["Events"].values()
    assert event["Type"] == "SQS" and event["Properties"]["Queue"] == {
        "Fn::GetAtt": ["SignupQueue", "Arn"]}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queues = resources("AWS::SQS::Queue")
    queue = queues["SignupQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * properties["Timeout"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["SignupDeadLetterQueue", "Arn"]}
    assert all(q["Properties"]["SqsManagedSseEnabled"] for q in queues.values())
    role = resources("AWS::IAM::Role")["FunctionRole"]["Properties"]
    granted = {action for policy in role["Policies"]
               for statement in policy["PolicyDocument"]["Statement"]
               if statement["Resource"] == {"Fn::GetAtt": ["SignupQueue", "Arn"]}
               for action in ([statement["Action"]] if isinstance(statement["Action"], str)
                              else statement["Action"])}
    assert granted == {"sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage",
                       "sqs:GetQueueAttributes"}


@pytest.mark.subprocess
def test_the_build_script_parses():
    result = subprocess.run(["bash", "-n", str(ROOT / "deploy" / "build-function.sh")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# -- the workflows -----------------------------------------------------------------------------

def test_there_are_the_three_workflows():
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "inbox.yml", "weekly.yml"]


@pytest.mark.parametrize("schema", ["vendor.github-workflows",
                                    "custom.github-workflows-require-timeout"])
@pytest.mark.subprocess
def test_the_workflows_match_githubs_schema(schema):
    result = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", schema,
                             *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
@pytest.mark.subprocess
def test_every_run_script_is_valid_bash_and_takes_its_inputs_from_the_environment(path):
    scripts = [(job, step) for job, step in steps(workflow(path)) if "run" in step]
    assert scripts
    for job, step in scripts:
        result = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
        assert result.returncode == 0, f"{path.name} {job} {step.get('name')}: {result.stderr}"
        # Expressions are passed through env:, never pasted into a script (injection).
        assert "${{" not in step["run"], f"{path.name} {job} {step.get('name')}"


def _cron_field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        spec, _, step = part.partition("/")
        first, last = (low, high) if spec == "*" else (
            tuple(int(v) for v in spec.split("-")) if "-" in spec else (int(spec), int(spec)))
        values.update(range(first, last + 1, int(step or 1)))
    return values


def test_the_schedule_tries_hourly_on_monday_in_shanghai_for_the_week_just_ended():
    crons = [entry["cron"] for entry in triggers(workflow(WEEKLY))["schedule"]]
    moments = []
    for cron in crons:
        minute, hour, day, month, weekday = cron.split()
        assert (day, month) == ("*", "*"), cron
        moments += [(w % 7, h, m) for w in _cron_field(weekday, 0, 7)
                    for h in _cron_field(hour, 0, 23) for m in _cron_field(minute, 0, 59)]
    assert len({(w, h) for w, h, _ in moments}) >= 10  # hourly retries through the day

    shanghai = ZoneInfo("Asia/Shanghai")
    sunday = date(2025, 12, 28)  # cron's weekday 0
    for week in range(110):  # two years of Mondays
        for weekday, hour, minute in moments:
            day = sunday + timedelta(weeks=week, days=weekday)
            when = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
            local = when.astimezone(shanghai)
            assert local.weekday() == 0, f"a run fires on {local:%A %H:%M} in Shanghai"
            ended = (local.date() - timedelta(days=7)).isocalendar()
            assert last_complete_week("Asia/Shanghai", when).id == \
                f"{ended.year}-W{ended.week:02d}"


def _run_step(script: str, env: dict[str, str], cwd: Path,
              fakes: Path | None = None) -> tuple[int, dict[str, str]]:
    """One ``run:`` script as Actions runs it (bash -e -o pipefail): its exit code and
    outputs; ``fakes``: stand-in commands first on the PATH."""
    outputs = cwd / "github_output"
    outputs.write_text("")
    (cwd / "summary.md").write_text("")
    path = f"{BIN}:{env.get('PATH', '')}"
    env = {**env, "GITHUB_OUTPUT": str(outputs), "GITHUB_ENV": str(cwd / "github_env"),
           "GITHUB_STEP_SUMMARY": str(cwd / "summary.md"),
           "PATH": f"{fakes}:{path}" if fakes else path}
    result = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                             script], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=60)
    return result.returncode, dict(line.split("=", 1) for line in outputs.read_text().split())


SSM_SECRET = "signing-key-as-ssm-returns-it-0123"


def fake_tools(folder: Path) -> Path:
    """``newsletter`` exiting $FAKE_RC (99: a ``send`` without the key from SSM), ``aws``
    answering the secret, ``date`` telling hour $FAKE_HOUR; each logs to calls.log."""
    folder.mkdir(exist_ok=True)
    scripts = {
        "newsletter": f"""echo "newsletter $*" >> "{folder}/calls.log"
if [ "$1" = send ] && [ "$NEWSLETTER_SECRET" != "{SSM_SECRET}" ]; then exit 99; fi
exit "${{FAKE_RC:-0}}"
""",
        "aws": f"""echo "aws $*" >> "{folder}/calls.log"
case "$*" in *get-parameter*) echo "{SSM_SECRET}" ;; esac
""",
        "date": 'echo "${FAKE_HOUR:-09}"\n',
    }
    for name, body in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + body)
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.subprocess
def test_the_week_and_the_shards_come_from_the_inputs_or_the_calendar(tmp_path):
    script = step_with_id(workflow(WEEKLY), "prepare", "week")["run"]
    env = clean_env()

    code, out = _run_step(script, {**env, "INPUT_WEEK": "", "INPUT_SHARDS": ""}, tmp_path)
    assert code == 0
    assert out == {"week": last_complete_week("Asia/Shanghai").id, "count": "2",
                   "shards": "[1,2]"}

    code, out = _run_step(script, {**env, "INPUT_WEEK": "2026-W48", "INPUT_SHARDS": "3"},
                          tmp_path)
    assert (code, out) == (0, {"week": "2026-W48", "count": "3", "shards": "[1,2,3]"})

    for week, shards in (("2026-48", "2"), ("2026-W48", "0"), ("2026-W48", "x"),
                         ("2026-W48; rm -rf /", "2")):
        code, _ = _run_step(script, {**env, "INPUT_WEEK": week, "INPUT_SHARDS": shards},
                            tmp_path)
        assert code == 2, (week, shards)


@pytest.mark.parametrize(("step", "code", "outcome", "exit_code"), [
    ("build", 0, None, 0),
    ("build", 3, "waiting", 0),  # the content changed since the approval
    ("build", 6, "empty", 0),
    ("build", 2, None, 2),
    ("build", 1, None, 1),
    ("publish", 0, "published", 0),
    ("publish", 3, "waiting", 0),  # not approved yet
    ("publish", 1, None, 1),
])
@pytest.mark.subprocess
def test_build_and_publish_gate_the_send_on_their_exit_codes(tmp_path, step, code, outcome,
                                                              exit_code):
    script = step_with_id(workflow(WEEKLY), "prepare", step)["run"]
    fakes = fake_tools(tmp_path / "bin")
    env = clean_env(WEEK="2026-W48", FAKE_RC=str(code))
    assert _run_step(script, env, tmp_path, fakes) == (
        exit_code, {"outcome": outcome} if outcome else {})
    assert (fakes / "calls.log").read_text() == f"newsletter {step} --week 2026-W48\n"
    if outcome == "waiting":
        assert "waiting for approval" in (tmp_path / "summary.md").read_text()


@pytest.mark.subprocess
def test_the_issue_the_editor_approved_is_used_as_proofed_not_rebuilt(tmp_path):
    script = step_with_id(workflow(WEEKLY), "prepare", "build")["run"]
    fakes = fake_tools(tmp_path / "bin")
    folder = tmp_path / "build" / "issues" / "2026-W48"
    folder.mkdir(parents=True)
    (folder / "approval.json").write_text("{}")
    assert _run_step(script, clean_env(WEEK="2026-W48", FAKE_RC="3"), tmp_path, fakes) == (0, {})
    assert not (fakes / "calls.log").exists()


@pytest.mark.parametrize(("code", "exit_code"), [(0, 0), (4, 0), (5, 0), (3, 3), (1, 1)])
@pytest.mark.subprocess
def test_a_shard_reads_the_key_from_ssm_and_a_resumable_stop_is_no_failure(tmp_path, code,
                                                                           exit_code):
    flow = workflow(WEEKLY)
    (script,) = [s["run"] for s in flow["jobs"]["send"]["steps"]
                 if "newsletter send" in s.get("run", "")]
    fakes = fake_tools(tmp_path / "bin")
    env = clean_env(WEEK="2026-W48", SHARD="2/3", FAKE_RC=str(code),
                    NEWSLETTER_SECRET_PARAMETER="/vllm-pr-weekly/secret",
                    NEWSLETTER_SECRET_PREVIOUS_PARAMETER="")
    assert _run_step(script, env, tmp_path, fakes)[0] == exit_code
    calls = (fakes / "calls.log").read_text().splitlines()
    assert calls == ["aws ssm get-parameter --name /vllm-pr-weekly/secret --with-decryption "
                     "--query Parameter.Value --output text",
                     "newsletter send --week 2026-W48 --shard 2/3"]


@pytest.mark.parametrize(("code", "outcome", "event", "hour", "send", "exit_code"), [
    (0, "published", "schedule", "14", "success", 0),
    (0, "sent", "schedule", "14", "skipped", 0),
    (3, "waiting", "schedule", "09", "skipped", 0),  # the next hour tries again
    (6, "waiting", "schedule", "09", "skipped", 0),  # nothing approved in the state yet
    (3, "waiting", "schedule", "14", "skipped", 1),  # the day's last try: make it seen
    (3, "waiting", "workflow_dispatch", "14", "skipped", 0),
    (4, "published", "schedule", "10", "success", 0),  # quota: the next hour goes on
    (4, "published", "schedule", "14", "success", 1),
    (1, "published", "schedule", "10", "success", 1),  # something failed
    (0, "published", "schedule", "10", "failure", 1),  # a shard's job failed
    (6, "empty", "schedule", "14", "skipped", 0),  # no review this week
])
@pytest.mark.subprocess
def test_the_report_fails_the_run_when_the_week_did_not_go_out(tmp_path, code, outcome, event,
                                                                hour, send, exit_code):
    (script,) = [s["run"] for s in workflow(WEEKLY)["jobs"]["report"]["steps"]
                 if "newsletter status" in s.get("run", "")]
    fakes = fake_tools(tmp_path / "bin")
    env = clean_env(WEEK="2026-W48", OUTCOME=outcome, GITHUB_EVENT_NAME=event,
                    FAKE_HOUR=hour, FAKE_RC=str(code), PREPARE_RESULT="success",
                    SEND_RESULT=send)
    assert _run_step(script, env, tmp_path, fakes)[0] == exit_code
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## vLLM PR Weekly 2026-W48")
    if outcome != "empty":
        assert "newsletter status --week 2026-W48" in (fakes / "calls.log").read_text()


def test_the_send_jobs_are_a_matrix_of_the_shards_input():
    flow = workflow(WEEKLY)
    inputs = triggers(flow)["workflow_dispatch"]["inputs"]
    assert inputs["week"]["required"] is False
    assert inputs["shards"]["default"] == 2
    assert step_with_id(flow, "prepare", "week")["env"] == {
        "INPUT_WEEK": "${{ inputs.week }}", "INPUT_SHARDS": "${{ inputs.shards }}"}

    send = flow["jobs"]["send"]
    assert send["needs"] == "prepare"
    assert send["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.prepare.outputs.shards) }}"
    assert send["strategy"]["fail-fast"] is False
    assert send["env"]["SHARD"] == "${{ matrix.shard }}/${{ needs.prepare.outputs.count }}"
    assert send["env"]["PART"] == ("send-report.shard-${{ matrix.shard }}-of-"
                                   "${{ needs.prepare.outputs.count }}.json")
    scripts = "\n".join(s["run"] for s in send["steps"] if "run" in s)
    assert '"$STATE/issues/$WEEK/$PART"' in scripts  # each shard keeps its own report part

    report = flow["jobs"]["report"]
    assert report["needs"] == ["prepare", "send"]
    assert report["if"].startswith("always()")


def test_the_weekly_job_builds_publishes_and_waits_for_approval_in_order():
    prepare = [s for s in workflow(WEEKLY)["jobs"]["prepare"]["steps"] if "run" in s]
    commands = [c for s in prepare for c in ("aws s3 sync", "newsletter status",
                                             "newsletter build", "newsletter publish")
                if re.search(rf"(?m)^\s*{c} ", s["run"])]
    assert commands[:5] == ["aws s3 sync", "newsletter status", "newsletter build",
                            "newsletter publish", "aws s3 sync"]
    # The editor's approval is never overwritten by the job.
    save = next(s["run"] for s in prepare if s.get("name") == "Save the issue")
    assert "--exclude approval.json" in save


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if p.name != "ci.yml"],
                         ids=lambda p: p.name)
def test_aws_access_is_by_oidc_and_one_run_at_a_time(path):
    flow = workflow(path)
    assert flow["permissions"] == {"id-token": "write", "contents": "read"}
    assert flow["concurrency"]["cancel-in-progress"] is False
    logins = [s for _, s in steps(flow)
              if str(s.get("uses", "")).startswith("aws-actions/configure-aws-credentials@")]
    assert logins
    for login in logins:
        assert login["with"]["role-to-assume"] == "${{ vars.AWS_ROLE_ARN }}"
        assert not {"aws-access-key-id", "aws-secret-access-key"} & set(login["with"])
    if path == WEEKLY:  # one group for every week and shard count: runs never overlap
        assert "${{" not in flow["concurrency"]["group"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_secret_value_is_written_into_a_workflow(path):
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"AKIA[0-9A-Z]{16}|BEGIN [A-Z ]*PRIVATE KEY|aws-secret-access-key", text)
    for env in environments(workflow(path)):
        # The signing key is read from SSM at run time, in the step that needs it.
        assert "NEWSLETTER_SECRET" not in env and "NEWSLETTER_SECRET_PREVIOUS" not in env
        for name, value in env.items():
            if re.search(r"SECRET|TOKEN|PASSWORD|API_KEY", name) and not name.endswith(
                    "_PARAMETER"):
                assert re.fullmatch(r"\$\{\{ secrets\.[A-Z_]+ \}\}", str(value)), (name, value)
            if name.endswith("_PARAMETER"):
                assert re.fullmatch(r"\$\{\{ vars\.[A-Z_]+ \}\}", str(value)), (name, value)


def test_ci_runs_the_projects_own_ci_script():
    flow = workflow(ROOT / ".github" / "workflows" / "ci.yml")
    assert {"push", "pull_request"} <= set(triggers(flow))
    (job,) = flow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert any(s.get("run") == "bash .ci/run" for s in job["steps"])


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_install_in_a_workflow_takes_the_locked_versions(path):
    """A scheduled job runs what CI tested, not whatever PyPI has newest that morning."""
    for job in workflow(path)["jobs"].values():
        for step in job.get("steps", []):
            for command in str(step.get("run", "")).splitlines():
                if re.search(r"\bpip install\b", command):
                    assert "-c requirements.lock" in command, (path.name, command)


# -- the Lambda handler ------------------------------------------------------------------------

_INVOKE = """
import json, sys
from pipeline.web.lambda_app import handler
events = json.loads(open(sys.argv[1]).read())
answers = [handler(event, None) for event in events]
open(sys.argv[2], "w").write(json.dumps(answers))
"""


def invoke(tmp_path: Path, events: list[dict[str, Any]], **env: str) -> list[dict[str, Any]]:
    """The handler of a cold-started ``pipeline.web.lambda_app``, called with each event in
    turn in one fresh process (one execution environment)."""
    (tmp_path / "events.json").write_text(json.dumps(events))
    environment = clean_env(
        NEWSLETTER_SITE_BASE_URL=SITE, NEWSLETTER_SITE_APP_URL=APP_URL,
        NEWSLETTER_PATHS_BUILD_DIR=str(tmp_path / "build"),
        NEWSLETTER_PATHS_DATA_DIR=str(tmp_path / "data"), **env)
    result = subprocess.run([sys.executable, "-c", _INVOKE, "events.json", "answers.json"],
                            cwd=tmp_path, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    answers: list[dict[str, Any]] = json.loads((tmp_path / "answers.json").read_text())
    return answers


def outbox(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "build" / "outbox").glob("*.eml"))


def mail(path: Path) -> tuple[str, str]:
    """(To, the plain-text part) of an outbox message."""
    message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
    plain = message.get_body(("plain",))
    assert plain is not None
    return str(message["To"]), plain.get_content()


def stored(tmp_path: Path, email: str):
    store = SqliteStore.open(tmp_path / "data" / "subscribers.sqlite3")
    try:
        return store.find(email)
    finally:
        store.close()


def with_a_removed_address(tmp_path: Path) -> None:
    """removed@example.org subscribed, then removed: its answer must look like any other's."""
    data = tmp_path / "data"
    data.mkdir()
    with SqliteStore.open(data / "subscribers.sqlite3") as store:
        now = datetime.now(UTC)
        store.add("removed@example.org", status="active", source="test", now=now)
        store.remove("removed@example.org", now)


@pytest.mark.subprocess
def test_the_handler_serves_the_pages_and_a_posted_form_mails_the_confirmation(tmp_path):
    form, health, missing, *posted = invoke(tmp_path, [
        url_event("GET", "/api/subscribe"), url_event("GET", "/api/healthz"),
        url_event("GET", "/api/nowhere"), subscribe_event("text@example.org"),
        subscribe_event("base64@example.org", base64_body=True)])
    assert form["statusCode"] == 200
    headers = form["headers"]
    assert headers["content-type"].startswith("text/html")
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-store"
    assert headers["strict-transport-security"].startswith("max-age=")
    assert headers["referrer-policy"] == "same-origin"  # the form page keeps its Origin
    page = body_of(form)
    assert f'action="{APP_URL}/subscribe"' in page and 'name="email"' in page
    assert (health["statusCode"], body_of(health)) == (200, "ok")
    assert missing["statusCode"] == 404

    for answer in posted:  # the body as text and as base64
        assert answer["statusCode"] == 200, body_of(answer)
        assert answer["headers"]["content-security-policy"].startswith("default-src 'none'")
    for address in ("text@example.org", "base64@example.org"):
        subscriber = stored(tmp_path, address)
        assert subscriber is not None and subscriber.status == "pending"
        assert subscriber.layout == "en"
    sent = [mail(path) for path in outbox(tmp_path)]
    assert sorted(to for to, _ in sent) == ["base64@example.org", "text@example.org"]
    for _, text in sent:
        assert re.search(rf"{re.escape(APP_URL)}/confirm\?token=[a-z2-7]{{56}}\s", text)


@pytest.mark.subprocess
def test_on_lambda_the_mail_queued_after_the_answer_still_leaves_within_its_limits(
        tmp_path):
    """Mangum runs the work queued after the answer before returning: none is lost, limits hold."""
    with_a_removed_address(tmp_path)
    answers = invoke(tmp_path, [subscribe_event("removed@example.org")]
                     + [subscribe_event("reader@example.org")] * 4,
                     NEWSLETTER_SUBSCRIPTIONS_ADDRESS_PER_DAY="3")
    assert {a["statusCode"] for a in answers} == {200}
    assert len({body_of(a) for a in answers}) == 1
    sent = [mail(path) for path in outbox(tmp_path)]
    assert [to for to, _ in sent] == ["reader@example.org"] * 3  # the 4th: over the allowance
    assert stored(tmp_path, "reader@example.org").status == "pending"
    assert stored(tmp_path, "removed@example.org") is None


@pytest.mark.subprocess
def test_with_the_queue_the_answer_waits_for_no_address_and_the_queue_signs_up(tmp_path,
                                                                              moto_server):
    """With queue_url the answer only queues the sign-up; the queue's invocation does the rest."""
    sqs = moto_server.client("sqs")
    url = sqs.create_queue(QueueName="signups")["QueueUrl"]
    with_a_removed_address(tmp_path)
    answers = invoke(tmp_path, [subscribe_event("removed@example.org"),
                                subscribe_event("reader@example.org")],
                     NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL=url)
    assert [a["statusCode"] for a in answers] == [200, 200]
    assert len({body_of(a) for a in answers}) == 1
    # Answered, and nothing looked up or sent yet: the answer waited for no address.
    assert stored(tmp_path, "reader@example.org") is None and outbox(tmp_path) == []
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(json.loads(m["Body"])["email"] for m in messages) == [
        "reader@example.org", "removed@example.org"]
    junk = {"MessageId": "junk", "ReceiptHandle": "r", "Body": "{not a sign-up",
            "MD5OfBody": "0"}
    (drained,) = invoke(tmp_path, [sqs_event([*messages, junk])],
                        NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL=url)
    assert drained == {"batchItemFailures": []}  # the junk is dropped, never retried
    assert stored(tmp_path, "reader@example.org").status == "pending"
    assert stored(tmp_path, "removed@example.org") is None  # still removed, and no mail
    assert [to for to, _ in (mail(path) for path in outbox(tmp_path))] == [
        "reader@example.org"]
    # A queue that does not take the request: the same 503 for every address, said.
    refused = invoke(tmp_path, [subscribe_event("other@example.org")],
                     NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL=url + "-gone")
    assert refused[0]["statusCode"] == 503


@pytest.mark.subprocess
def test_only_cloudfront_reaches_the_app_and_the_client_is_the_viewer(tmp_path):
    secret = "cloudfront-origin-secret-0123456789"
    via = {"x-origin-verify": secret}
    answers = invoke(tmp_path, [
        # Straight to the function URL: no secret header, or a wrong one.
        subscribe_event("a@example.org"),
        subscribe_event("a@example.org", headers={"x-origin-verify": "guess"}),
        # Through CloudFront: one sign-up an hour per visitor (client_per_hour = 1), counted
        # by the viewer's address although every request comes from the same edge.
        subscribe_event("b@example.org",
                        headers={**via, "cloudfront-viewer-address": "203.0.113.7:51000"}),
        subscribe_event("c@example.org",
                        headers={**via, "cloudfront-viewer-address": "203.0.113.7:51001"}),
        subscribe_event("d@example.org",
                        headers={**via, "cloudfront-viewer-address": "2001:db8::7:51002"}),
        # Through CloudFront, but the form is another site's.
        subscribe_event("e@example.org", headers={
            **via, "cloudfront-viewer-address": "198.51.100.9:51003",
            "origin": "https://evil.example"}),
    ], NEWSLETTER_ORIGIN_SECRET=secret, NEWSLETTER_SUBSCRIPTIONS_CLIENT_PER_HOUR="1")
    assert [a["statusCode"] for a in answers] == [403, 403, 200, 429, 200, 403]
    assert body_of(answers[0]) == "Forbidden"
    assert stored(tmp_path, "a@example.org") is None
    assert stored(tmp_path, "b@example.org").status == "pending"
    assert stored(tmp_path, "c@example.org") is None
    assert stored(tmp_path, "d@example.org").status == "pending"
    assert stored(tmp_path, "e@example.org") is None
    assert sorted(to for to, _ in map(mail, outbox(tmp_path))) == ["b@example.org",
                                                                  "d@example.org"]
