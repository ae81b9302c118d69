"""What the deployed stack hands on: its ``GitHubVariables`` output, evaluated as CloudFormation
would (a small evaluator of the intrinsics the template uses, below), is all the settings the
jobs and the editor get. They must be complete on their own: a missing backend does not fail,
it quietly reads an empty local store and a local archive.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.commands import newsletter_main, ok
from support.deploy_files import WORKFLOWS, environments, steps, template, workflow
from support.project import ROOT, SAMPLE_FEED, SAMPLE_WEEK

from subscribers.store.dynamo import DynamoStore, table_definitions

DOCS = ROOT / "docs" / "deploy.md"
INBOX = ROOT / ".github" / "workflows" / "inbox.yml"
ACCOUNT = "123456789012"
NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)

#: The parameters an operator gives `sam deploy --guided` (the rest keep their defaults).
GIVEN: dict[str, str | list[str]] = {
    "DomainName": "example.org",
    "CertificateArn": f"arn:aws:acm:us-east-1:{ACCOUNT}:certificate/0f0e0d0c-aaaa-bbbb-cccc",
    "NewsletterSecretParameter": "/vllm-pr-weekly/secret",
    "GitHubRepository": "vllm-weekly/newsletter",
    "OperatorEmail": "operator@example.org",
}

#: What CloudFormation would name the resources whose names it generates (Ref, GetAtt).
#: Resources that name themselves (the tables' TableName) are evaluated from the template.
PHYSICAL: dict[str, str] = {
    "StateBucket": "vllm-pr-weekly-statebucket-1a2b3c4d5e6f",
    "ArchiveBucket": "vllm-pr-weekly-archivebucket-6f5e4d3c2b1a",
    "Distribution": "E2QWRUHEXAMPLE",
    "ConfigurationSet": "ConfigurationSet-AbCdEf123456",
    "SesEventsTopic": f"arn:aws:sns:us-east-1:{ACCOUNT}:vllm-pr-weekly-SesEventsTopic-x",
    "InboundRuleSet": "InboundRuleSet-AbCdEf123456",
    "EditorPolicy": f"arn:aws:iam::{ACCOUNT}:policy/vllm-pr-weekly-EditorPolicy-x",
}
ATTRIBUTES: dict[tuple[str, str], str] = {
    ("GitHubActionsRole", "Arn"): f"arn:aws:iam::{ACCOUNT}:role/vllm-pr-weekly-GitHubActions-x",
    ("Distribution", "DomainName"): "d111111abcdef8.cloudfront.net",
    ("EmailIdentity", "DkimDNSTokenName1"): "t1._domainkey.example.org",
    ("EmailIdentity", "DkimDNSTokenName2"): "t2._domainkey.example.org",
    ("EmailIdentity", "DkimDNSTokenName3"): "t3._domainkey.example.org",
    ("EmailIdentity", "DkimDNSTokenValue1"): "t1.dkim.amazonses.com",
    ("EmailIdentity", "DkimDNSTokenValue2"): "t2.dkim.amazonses.com",
    ("EmailIdentity", "DkimDNSTokenValue3"): "t3.dkim.amazonses.com",
}


# -- a small CloudFormation evaluator ---------------------------------------------------------

class _NoValue:
    """``AWS::NoValue``: the item or property is left out."""


NO_VALUE = _NoValue()
#: What a Ref or GetAtt gives for a resource PHYSICAL and ATTRIBUTES do not name.
UNNAMED = "unnamed-"
_PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}


@dataclass
class Stack:
    """The template evaluated for one set of parameters, in ``region``, as ``name``."""

    given: Mapping[str, str | list[str]] = field(default_factory=lambda: dict(GIVEN))
    region: str = "us-east-1"
    name: str = "vllm-pr-weekly"
    doc: dict[str, Any] = field(default_factory=template)

    def __post_init__(self) -> None:
        self.parameters: dict[str, str | list[str]] = {}
        for key, spec in self.doc["Parameters"].items():
            value = self.given.get(key, spec.get("Default"))
            assert value is not None, f"{key} has no default: give it"
            if spec["Type"] == "CommaDelimitedList" and isinstance(value, str):
                value = [v.strip() for v in value.split(",")] if value else []
            for item in value if isinstance(value, list) else [value]:
                assert item in spec.get("AllowedValues", [item]), (key, item)
                assert re.fullmatch(spec.get("AllowedPattern", ".*"), item), (key, item)
            self.parameters[key] = value
        unknown = set(self.given) - set(self.parameters)
        assert not unknown, f"no such parameter: {unknown}"
        self._conditions: dict[str, bool] = {}

    # -- conditions and resources

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.eval(self.doc["Conditions"][name]))
        return self._conditions[name]

    def exists(self, resource: str) -> bool:
        spec = self.doc["Resources"][resource]
        return "Condition" not in spec or self.condition(spec["Condition"])

    def resource(self, name: str) -> dict[str, Any]:
        """A resource's properties, evaluated (it must exist for these parameters)."""
        assert self.exists(name), f"{name} does not exist with these parameters"
        evaluated: dict[str, Any] = self.eval(self.doc["Resources"][name].get("Properties", {}))
        return evaluated

    def output(self, name: str) -> Any:
        spec = self.doc["Outputs"][name]
        assert "Condition" not in spec or self.condition(spec["Condition"]), name
        return self.eval(spec["Value"])

    def _ref(self, name: str) -> Any:
        pseudo = {**_PSEUDO, "AWS::NoValue": NO_VALUE, "AWS::Region": self.region,
                  "AWS::StackName": self.name}
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        assert self.exists(name), f"Ref to {name}, which these parameters leave out"
        if name in PHYSICAL:
            return PHYSICAL[name]
        spec = self.doc["Resources"][name]
        if spec["Type"] == "AWS::DynamoDB::Table":
            return self.eval(spec["Properties"]["TableName"])
        return f"{UNNAMED}{name}"

    def _get_att(self, name: str, attribute: str) -> str:
        assert self.exists(name), f"GetAtt of {name}, which these parameters leave out"
        kind = self.doc["Resources"][name]["Type"]
        if attribute == "Arn" and kind == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{self._ref(name)}"
        if attribute == "Arn" and kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{self._ref(name)}"
        return ATTRIBUTES.get((name, attribute), f"{UNNAMED}{name}.{attribute}")

    def _sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return self._get_att(*name.split(".", 1))
            value = self._ref(name)
            assert isinstance(value, str), (name, value)
            return value

        return re.sub(r"\$\{([^}]+)\}", fill, text)

    # -- the intrinsics

    def eval(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.eval(n) for n in node) if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            function = self._functions().get(key)
            if function is not None:
                return function(arg)
        return {k: v for k, v in ((k, self.eval(v)) for k, v in node.items())
                if v is not NO_VALUE}

    def _functions(self) -> dict[str, Callable[[Any], Any]]:
        def sub(arg: Any) -> str:
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            return self._sub(text, {k: self.eval(v) for k, v in variables.items()})

        def join(arg: Any) -> str:
            delimiter, values = arg
            assert isinstance(delimiter, str), "Fn::Join's delimiter must be a literal"
            return delimiter.join(self.eval(values))

        def if_(arg: Any) -> Any:
            name, then, otherwise = arg
            return self.eval(then if self.condition(name) else otherwise)

        return {
            "Ref": self._ref,
            "Fn::GetAtt": lambda arg: self._get_att(*arg),
            "Fn::Sub": sub,
            "Fn::Join": join,
            "Fn::If": if_,
            "Fn::Split": lambda arg: self.eval(arg[1]).split(arg[0]),
            "Fn::Select": lambda arg: self.eval(arg[1])[int(arg[0])],
            "Fn::Equals": lambda arg: self.eval(arg[0]) == self.eval(arg[1]),
            "Fn::Not": lambda arg: not self.eval(arg[0]),
            "Fn::And": lambda arg: all(self.eval(a) for a in arg),
            "Fn::Or": lambda arg: any(self.eval(a) for a in arg),
            "Condition": self.condition,
        }

    # -- what the operator takes from it

    def variables_file(self) -> str:
        text = self.output("GitHubVariables")
        assert isinstance(text, str)
        return text + "\n"

    def variable_names(self) -> set[str]:
        return {line.split("=", 1)[0] for line in self.variables_file().splitlines() if line}


def test_the_evaluator_reads_the_intrinsics_as_cloudformation_does():
    stack = Stack()
    assert stack.eval({"Fn::Sub": ["${A}-${AWS::Region}-${!Literal}", {"A": "x"}]}) == \
        "x-us-east-1-${Literal}"
    assert stack.eval({"Fn::Join": [",", ["a", {"Ref": "AWS::NoValue"}, "b"]]}) == "a,b"
    assert stack.eval({"Fn::Select": [2, {"Fn::Split": [":", "arn:aws:secretsmanager:x"]}]}) \
        == "secretsmanager"
    assert stack.condition("SecretInSsm") and not stack.condition("SecretInSecretsManager")
    assert stack.eval({"Ref": "SubscribersTable"}) == "vllm-pr-weekly-subscribers"
    with pytest.raises(AssertionError, match="leave out"):
        Stack({**GIVEN, "InboundMail": "false"}).eval({"Ref": "InboundRuleSet"})
    with pytest.raises(AssertionError):
        Stack({**GIVEN, "InboundMail": "maybe"})


# -- the settings, on their own, against moto ---------------------------------------------------

def sourced(tmp_path: Path, text: str) -> dict[str, str]:
    """The variables ``set -a; . FILE`` gives a shell (what docs/deploy.md has the editor do),
    read back from bash itself: the quoting of the From address is bash's to undo."""
    path = tmp_path / "github-variables.env"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run(["env", "-i", f"PATH={os.defpath}", "bash", "--noprofile",
                             "--norc", "-c", 'set -a; . "$1"; set +a; env -0', "bash",
                             str(path)], capture_output=True, text=True, timeout=30, check=True)
    found = dict(item.split("=", 1) for item in result.stdout.split("\0") if item)
    return {k: v for k, v in found.items()
            if k not in {"PATH", "PWD", "SHLVL", "_", "OLDPWD"}}


@dataclass(frozen=True)
class Call:
    """One AWS API call the code under test made."""

    service: str
    operation: str
    params: Mapping[str, Any]


@contextmanager
def recorded_calls() -> Iterator[list[Call]]:
    """Every boto3 call made in this process meanwhile (the CLI runs in it)."""
    from botocore.client import BaseClient

    calls: list[Call] = []
    clients: Any = BaseClient  # botocore ships no types; its stubs leave this method out
    real = clients._make_api_call

    def record(self: BaseClient, operation: str, params: Mapping[str, Any]) -> Any:
        calls.append(Call(self.meta.service_model.service_name, operation, dict(params)))
        return real(self, operation, params)

    clients._make_api_call = record
    try:
        yield calls
    finally:
        clients._make_api_call = real


def seed_subscribers(client: Any, subscribers_table: str, ledger_table: str) -> None:
    """Readers in production's tables, written by a store of their own (not through the
    settings under test): two active (one following rocm), one pending."""
    store = DynamoStore(client, subscribers_table, ledger_table)  # the client stays open
    try:
        store.add("follows-rocm@example.org", "zh-en", status="active", source="test",
                  now=NOW, areas=("rocm",))
        store.add("plain@example.org", "en", status="active", source="test", now=NOW)
        store.add("pending@example.org", "zh", status="pending", source="test", now=NOW)
    finally:
        store.close()


@pytest.mark.subprocess  # bash sources the file; publishing runs Pagefind
@pytest.mark.slow  # build, approve, publish (search index) and status against moto
def test_the_editor_with_only_the_stack_output_builds_and_sees_production(tmp_path, moto_server,
                                                                          monkeypatch):
    stack = Stack()
    state, archive = stack.eval({"Ref": "StateBucket"}), stack.eval({"Ref": "ArchiveBucket"})
    tables = stack.eval({"Ref": "SubscribersTable"}), stack.eval({"Ref": "LedgerTable"})
    s3, dynamodb = moto_server.client("s3"), moto_server.client("dynamodb")
    for bucket in (state, archive):
        s3.create_bucket(Bucket=bucket)
    for definition in table_definitions(*tables):
        dynamodb.create_table(**definition)
    seed_subscribers(dynamodb, *tables)

    assert UNNAMED not in stack.variables_file()
    settings = sourced(tmp_path, stack.variables_file())
    assert not [k for k in settings if not re.fullmatch(r"[A-Z][A-Z0-9_]*", k)], settings
    # The region too comes from the output: boto3 reads AWS_DEFAULT_REGION, not AWS_REGION.
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    env = {**settings, "NEWSLETTER_FEED_URLS": str(SAMPLE_FEED)}

    def newsletter(*args: str) -> subprocess.CompletedProcess[str]:
        return newsletter_main([*args, "--week", SAMPLE_WEEK], tmp_path, **env)

    with recorded_calls() as editor_calls:
        built = ok(newsletter("build"))
        assert "1 interest variant(s)" in built.stdout, built.stdout
        waiting = newsletter("status")
        ok(newsletter("approve"))
    folder = tmp_path / "build" / "issues" / SAMPLE_WEEK
    issue = json.loads((folder / "issue.json").read_text(encoding="utf-8"))
    assert [v["areas"] for v in issue["variants"]] == [["rocm"]]
    assert (waiting.returncode, waiting.stdout.splitlines()[0]) == (
        3, f"{SAMPLE_WEEK}: waiting for approval")  # require_approval came with the output
    assert "approved   no (required)" in waiting.stdout

    ok(newsletter("publish"))  # the job's step: to the S3 archive the output names
    listed = s3.list_objects_v2(Bucket=archive, Prefix=f"issues/{SAMPLE_WEEK}/")
    assert f"issues/{SAMPLE_WEEK}/index.html" in {o["Key"] for o in listed["Contents"]}
    assert not (tmp_path / "build" / "site").exists()  # no local archive on the side

    with recorded_calls() as status_calls:
        status = newsletter("status")
    assert status.returncode == 4, status.stdout + status.stderr  # approved, not sent yet
    lines = status.stdout.splitlines()
    assert lines[0] == f"{SAMPLE_WEEK}: not fully sent"
    assert "  approved   yes" in lines
    assert f"  published  yes (https://example.org/issues/{SAMPLE_WEEK}/index.html)" in lines
    listed_readers = dict(part.split(" ", 1) for part in lines[-1].removeprefix("list").strip()
                          .split(" · "))
    assert (listed_readers["active"], listed_readers["pending"]) == ("2 (zh-en 1, en 1)", "1")
    assert not (tmp_path / "data" / "subscribers.sqlite3").exists()  # no local store either

    # What the editor's commands asked of AWS is what the editor's policy grants.
    policy = Stack().resource("EditorPolicy")["PolicyDocument"]
    asked = [request for call in [*editor_calls, *status_calls] for request in iam_requests(call)]
    assert {action for action, _, _ in asked} >= {"dynamodb:Query", "s3:ListBucket"}
    refused = [request for request in asked if not allowed(policy, *request)]
    assert refused == []


# -- the editor's policy ---------------------------------------------------------------------

Request = tuple[str, str, Mapping[str, str]]  # (IAM action, resource ARN, condition keys)


def iam_requests(call: Call) -> list[Request]:
    """The IAM action, resource and condition keys AWS authorizes one API call by (for the
    S3, DynamoDB, SES, SSM and Secrets Manager calls this project makes)."""
    p = call.params
    if call.service == "s3":
        action = {"ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket",
                  "HeadObject": "s3:GetObject"}.get(call.operation, f"s3:{call.operation}")
        if action == "s3:ListBucket":
            return [(action, f"arn:aws:s3:::{p['Bucket']}", {"s3:prefix": p.get("Prefix", "")})]
        key = f"/{p['Key']}" if "Key" in p else ""
        return [(action, f"arn:aws:s3:::{p['Bucket']}{key}", {})]
    if call.service == "dynamodb":
        base = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/"
        if call.operation in ("BatchGetItem", "BatchWriteItem"):
            return [(f"dynamodb:{call.operation}", base + table, {}) for table in p["RequestItems"]]
        if call.operation == "TransactWriteItems":  # a write whatever it holds
            return [("dynamodb:TransactWriteItems", base, {})]
        index = f"/index/{p['IndexName']}" if "IndexName" in p else ""
        return [(f"dynamodb:{call.operation}", base + p["TableName"] + index, {})]
    return [(f"{call.service}:{call.operation}", "*", {})]


def allowed(policy: Mapping[str, Any], action: str, resource: str,
            context: Mapping[str, str]) -> bool:
    """Whether an identity policy of Allow statements (the template's) allows the request:
    actions and resources with IAM's wildcards, StringLike and StringEquals conditions."""
    def matches(patterns: Any, value: str) -> bool:
        return any(fnmatch.fnmatchcase(value, pattern) for pattern in
                   ([patterns] if isinstance(patterns, str) else patterns))

    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        if not (matches(statement["Action"], action)
                and matches(statement["Resource"], resource)):
            continue
        conditions = statement.get("Condition", {})
        assert set(conditions) <= {"StringLike", "StringEquals"}, conditions
        if all(key in context and (matches(wanted, context[key]) if test == "StringLike"
                                   else context[key] in ([wanted] if isinstance(wanted, str)
                                                         else wanted))
               for test, pairs in conditions.items() for key, wanted in pairs.items()):
            return True
    return False


def test_the_editors_policy_covers_the_state_sync_and_nothing_that_sends_or_writes_the_list():
    stack = Stack()
    policy = stack.resource("EditorPolicy")["PolicyDocument"]
    state = f"arn:aws:s3:::{stack.eval({'Ref': 'StateBucket'})}"
    archive = f"arn:aws:s3:::{stack.eval({'Ref': 'ArchiveBucket'})}"
    table = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/vllm-pr-weekly-subscribers"
    week = f"state/issues/{SAMPLE_WEEK}"
    # docs/deploy.md: `aws s3 sync "$STATE/data/" data/` and the issue folder's upload.
    for request in [("s3:ListBucket", state, {"s3:prefix": "state/data/"}),
                    ("s3:GetObject", f"{state}/state/data/feeds/reviews.xml", {}),
                    ("s3:ListBucket", state, {"s3:prefix": f"{week}/"}),
                    ("s3:GetObject", f"{state}/{week}/issue.json", {}),
                    ("s3:PutObject", f"{state}/{week}/approval.json", {}),
                    ("s3:ListBucket", archive, {"s3:prefix": ""})]:
        assert allowed(policy, *request), request
    for request in [("s3:ListBucket", state, {"s3:prefix": "inbound/"}),  # readers' mail
                    ("s3:GetObject", f"{state}/inbound/0a1b2c", {}),
                    ("s3:PutObject", f"{state}/state/data/feeds/reviews.xml", {}),
                    ("s3:DeleteObject", f"{state}/{week}/issue.json", {}),
                    ("s3:PutObject", f"{archive}/index.html", {}),  # publishing is the job's
                    ("dynamodb:PutItem", table, {}),
                    ("dynamodb:UpdateItem", table, {}),
                    ("dynamodb:DeleteItem", table, {}),
                    ("ses:SendEmail", "*", {}),
                    ("ssm:GetParameter", "*", {})]:
        assert not allowed(policy, *request), request
    assert stack.output("EditorPolicyArn") == PHYSICAL["EditorPolicy"]


# -- one output for the workflows, with the switches -----------------------------------------

def documented_optional_variables() -> set[str]:
    """The first column of docs/deploy.md's table of variables the operator sets by hand."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("Variables you set yourself", 1)[1].split("\n\n", 2)[1]
    names = re.findall(r"(?m)^\| `([A-Z][A-Z0-9_]*)`", section)
    assert names, "docs/deploy.md has no table of the variables set by hand"
    return set(names)


def workflow_variables() -> dict[str, set[str]]:
    """Each ``vars.X`` a workflow reads, with the workflows that read it."""
    found: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for name in re.findall(r"\bvars\.([A-Za-z_][A-Za-z0-9_]*)", path.read_text("utf-8")):
            found.setdefault(name, set()).add(path.name)
    return found


def test_every_variable_a_workflow_reads_comes_from_the_stack_or_the_docs():
    fullest = Stack({**GIVEN, "NewsletterSecretPreviousParameter": "/vllm-pr-weekly/previous"})
    from_stack = fullest.variable_names()
    optional = documented_optional_variables()
    read = workflow_variables()
    assert {"AWS_ROLE_ARN", "NEWSLETTER_STORE_SUBSCRIBERS_TABLE"} <= set(read)
    missing = {name: sorted(flows) for name, flows in read.items()
               if name not in from_stack | optional}
    assert missing == {}, "read by a workflow, set by no one"
    assert not optional & from_stack, "documented as set by hand, yet the stack sets it"


def test_inbound_mail_off_leaves_no_inbox_no_mailto_and_no_inbox_job():
    on, off = Stack(), Stack({**GIVEN, "InboundMail": "false"})
    inbox = {"NEWSLETTER_INBOX_SOURCE", "NEWSLETTER_INBOX_BUCKET", "NEWSLETTER_INBOX_PREFIX",
             "NEWSLETTER_DELIVERY_UNSUBSCRIBE_MAILTO"}
    assert inbox <= on.variable_names()
    assert not inbox & off.variable_names()
    assert "NEWSLETTER_INBOX_PREFIX=inbound/" in on.variables_file().splitlines()

    def function_env(stack: Stack) -> dict[str, Any]:
        variables: dict[str, Any] = \
            stack.resource("SubscriptionFunction")["Environment"]["Variables"]
        return variables

    assert function_env(on)["NEWSLETTER_DELIVERY_UNSUBSCRIBE_MAILTO"] == "unsub@example.org"
    assert "NEWSLETTER_DELIVERY_UNSUBSCRIBE_MAILTO" not in function_env(off)
    for resource in ("InboundRuleSet", "InboundRule", "InboundMxRecord"):
        assert not off.exists(resource)
    assert on.exists("InboundRule")
    statements = [s["Sid"] for s in off.resource("StateBucketPolicy")["PolicyDocument"]
                  ["Statement"]]
    assert statements == ["TlsOnly"]
    assert "InboundRuleSetName" not in [name for name, spec in off.doc["Outputs"].items()
                                        if "Condition" not in spec
                                        or off.condition(spec["Condition"])]

    # The inbox job runs only where the stack gave it a source: its `if:` reads a variable
    # that the output holds with inbound mail and lacks without.
    for job in workflow(INBOX)["jobs"].values():
        gate = re.fullmatch(r"\s*vars\.([A-Z_]+)\s*!=\s*''\s*", str(job.get("if", "")))
        assert gate, f"inbox.yml runs whether or not inbound mail is on: if: {job.get('if')}"
        assert gate.group(1) in on.variable_names() - off.variable_names()


@pytest.mark.parametrize(("switches", "created", "listed"), [
    ({}, {"DmarcRecord", "InboundMxRecord"}, {"_dmarc", "inbound-smtp"}),
    ({"CreateDmarcRecord": "false"}, {"InboundMxRecord"}, {"inbound-smtp"}),
    ({"CreateInboundMxRecord": "false"}, {"DmarcRecord"}, {"_dmarc"}),
    ({"InboundMail": "false"}, {"DmarcRecord"}, {"_dmarc"}),
])
def test_the_dns_switches_skip_records_that_exist_and_dns_records_follows(switches, created,
                                                                          listed):
    with_zone = Stack({**GIVEN, "HostedZoneId": "Z0123456789ABCDEFGHIJ", **switches})
    records = {name for name, spec in with_zone.doc["Resources"].items()
               if spec["Type"] == "AWS::Route53::RecordSet" and with_zone.exists(name)}
    assert records & {"DmarcRecord", "InboundMxRecord"} == created
    assert {"SiteRecordIpv4", "DkimRecord1", "MailFromMxRecord"} <= records  # always made
    without_zone = Stack({**GIVEN, **switches})
    assert not any(without_zone.exists(name) for name in records)
    lines = without_zone.output("DnsRecords").splitlines()
    assert {word for word in ("_dmarc", "inbound-smtp")
            if any(word in line for line in lines)} == listed
    assert any("feedback-smtp" in line for line in lines)  # the MAIL FROM MX, always


# -- SES's sandbox ----------------------------------------------------------------------------

def test_in_the_sandbox_the_roles_may_send_to_the_named_test_recipients_only():
    arn = f"arn:aws:ses:us-east-1:{ACCOUNT}:identity/"
    config_set = f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/{PHYSICAL['ConfigurationSet']}"
    sandbox = Stack({**GIVEN, "SandboxTestRecipients":
                     "you@example.org,*@simulator.amazonses.com"})
    policy = sandbox.resource("SendMailPolicy")["PolicyDocument"]
    sends = [s for s in policy["Statement"] if "ses:SendRawEmail" in s["Action"]]
    for resource in (arn + "example.org", config_set, arn + "you@example.org",
                     arn + "bounce+smoke1@simulator.amazonses.com"):
        assert allowed({"Statement": sends}, "ses:SendRawEmail", resource, {}), resource
    for resource in (arn + "stranger@example.net", arn + "other.example",
                     arn + "you@example.org.evil.example", arn + "x@simulator.amazonses.com.x"):
        assert not allowed({"Statement": sends}, "ses:SendRawEmail", resource, {}), resource

    for wildcard in ("*", "you@*", "*@*", "you@example.org,*"):
        with pytest.raises(AssertionError):
            Stack({**GIVEN, "SandboxTestRecipients": wildcard})

    production = Stack().resource("SendMailPolicy")["PolicyDocument"]
    sends = [s for s in production["Statement"] if "ses:SendRawEmail" in s["Action"]]
    assert not allowed({"Statement": sends}, "ses:SendRawEmail", arn + "you@example.org", {})
    assert [s["Sid"] for s in sends] == ["SendAsTheDomain"]


# -- decisions the template keeps -------------------------------------------------------------

def test_the_role_trusts_the_allowed_branch_only_and_no_job_changes_the_subject():
    def trust(stack: Stack) -> dict[str, Any]:
        (statement,) = stack.resource("GitHubActionsRole")["AssumeRolePolicyDocument"][
            "Statement"]
        conditions: dict[str, Any] = statement["Condition"]
        return conditions

    conditions = trust(Stack())
    assert set(conditions) == {"StringEquals"}  # no StringLike: no wildcard anywhere
    assert conditions["StringEquals"] == {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub":
            "repo:vllm-weekly/newsletter:ref:refs/heads/main"}
    release = trust(Stack({**GIVEN, "GitHubAllowedRef": "refs/heads/release"}))
    assert release["StringEquals"]["token.actions.githubusercontent.com:sub"].endswith(
        ":ref:refs/heads/release")
    with pytest.raises(AssertionError):
        Stack({**GIVEN, "GitHubAllowedRef": "*"})
    # A job with an environment gets the subject repo:<o>/<n>:environment:<name>, which the
    # role refuses: every job that logs in to AWS must have none.
    for path in WORKFLOWS:
        flow = workflow(path)
        for name, job in flow["jobs"].items():
            logs_in = any(str(step.get("uses", "")).startswith(
                "aws-actions/configure-aws-credentials@")
                for job_name, step in steps(flow) if job_name == name)
            assert not (logs_in and "environment" in job), (path.name, name)


def test_the_tables_are_protected_except_on_the_first_deploy_if_asked():
    for name in ("SubscribersTable", "LedgerTable"):
        assert Stack().resource(name)["DeletionProtectionEnabled"] is True
        assert Stack({**GIVEN, "TableDeletionProtection": "false"}).resource(name)[
            "DeletionProtectionEnabled"] is False


def test_a_sign_up_in_the_dead_letter_queue_mails_the_operator():
    stack = Stack()
    alarms = [name for name, spec in stack.doc["Resources"].items()
              if spec["Type"] == "AWS::CloudWatch::Alarm"]
    (alarm,) = [stack.resource(name) for name in alarms
                if stack.doc["Resources"][name]["Properties"]["Dimensions"][0]["Value"]
                == {"Fn::GetAtt": ["SignupDeadLetterQueue", "QueueName"]}]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS",
                                                         "ApproximateNumberOfMessagesVisible")
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["AlarmName"] == "vllm-pr-weekly-signup-dead-letters"  # as docs/deploy.md says
    (topic,) = alarm["AlarmActions"]
    (name,) = [n for n, spec in stack.doc["Resources"].items()
               if spec["Type"] == "AWS::SNS::Topic" and topic == f"{UNNAMED}{n}"]
    assert stack.resource(name)["Subscription"] == [
        {"Protocol": "email", "Endpoint": GIVEN["OperatorEmail"]}]


def test_what_a_workflow_writes_itself_is_what_the_stack_says():
    """A production job must not fall back to local backends when a variable is missing."""
    output = {name: value.strip('"') for name, value in
              (line.split("=", 1) for line in Stack().variables_file().splitlines() if line)}
    compared = set()
    for path in WORKFLOWS:
        for env in environments(workflow(path)):
            for name, value in env.items():
                if name in output and "${{" not in str(value):
                    assert str(value) == output[name], (path.name, name)
                    compared.add(name)
    assert {"NEWSLETTER_STORE_BACKEND", "NEWSLETTER_ARCHIVE_TARGET",
            "NEWSLETTER_DELIVERY_TRANSPORT", "NEWSLETTER_ISSUE_REQUIRE_APPROVAL",
            "NEWSLETTER_INBOX_SOURCE", "NEWSLETTER_INBOX_PREFIX"} <= compared
