"""What ships, tried as production installs it, not as the editable tree the other tests use:
the wheel (built from a clean copy, as a stale ``build/lib`` could hide a missing module)
installed into a fresh venv and running the weekly job outside the repository, and the Lambda
package of ``deploy/build-function.sh`` alone in ``python -I -S``, against moto.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name
from support.commands import clean_env
from support.deploy_files import resources
from support.function_events import APP_URL, SITE, body_of, sqs_event, subscribe_event, url_event
from support.project import ROOT, SAMPLE_FEED, SAMPLE_WEEK
from test_checks_and_install import locked_pins

from subscribers.tokens import Keys, make_token

pytest_plugins = ["support.dynamo_support"]
# A fresh machine fetches what it builds and installs from the package index, module fixtures
# included in the first test's time.
pytestmark = [pytest.mark.subprocess, pytest.mark.slow, pytest.mark.timeout(600)]

#: scripts/python-deps with this interpreter, and the uv of the venv this runs in, if any.
PYTHON_DEPS = {"PYTHON": sys.executable,
               **({"VENV": sys.prefix} if sys.prefix != sys.base_prefix else {})}


def run(command: list[str | Path], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=clean_env(**env),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}: {result.returncode}\n{result.stderr[-3000:]}"
    return result


# -- the wheel ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run([ROOT / "scripts" / "python-deps", "wheel", out], cwd=ROOT, **PYTHON_DEPS)
    (built,) = out.glob("vllm_pr_weekly-*.whl")
    return built


def shipped_sources() -> set[str]:
    """Where each module and template of the tree lands in an installed project."""
    found = {path.relative_to(ROOT).as_posix()
             for package in ("pipeline", "subscribers") for path in (ROOT / package).rglob("*.py")}
    found |= {"pipeline/templates/" + path.relative_to(ROOT / "templates").as_posix()
              for path in (ROOT / "templates").rglob("*")
              if path.is_file() and "__pycache__" not in path.parts}
    return found


def test_the_wheel_holds_every_module_and_template_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(shipped_sources() - names) == []
    dist_info = {n for n in names if n.startswith("vllm_pr_weekly-0.1.0.dist-info/")}
    assert sorted(names - shipped_sources() - dist_info) == []


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel, its dependencies pinned by the lock."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    run([ROOT / "scripts" / "python-deps", "venv", venv, wheel], cwd=ROOT, **PYTHON_DEPS)
    return venv


def test_the_installed_wheel_runs_the_weekly_job_outside_the_repository(installed, tmp_path):
    newsletter = installed / "bin" / "newsletter"
    where = run([installed / "bin" / "python", "-c",
                 "import pipeline, subscribers; print(pipeline.__file__, subscribers.__file__)"],
                cwd=tmp_path).stdout.split()
    assert all(Path(path).is_relative_to(installed) for path in where), where

    run([newsletter, "subscribers", "import", ROOT / "examples" / "subscribers.csv",
         "--confirmed"], cwd=tmp_path)
    result = run([newsletter, "run", "--feed", SAMPLE_FEED, "--week", SAMPLE_WEEK], cwd=tmp_path)

    assert f"built {SAMPLE_WEEK}: 8 items" in result.stdout + result.stderr
    issue = tmp_path / "build" / "issues" / SAMPLE_WEEK
    sent = sorted((issue / "outbox").glob("*.eml"))
    assert len(sent) == 6
    message = BytesParser(policy=policy.default).parsebytes(sent[0].read_bytes())
    assert message.get_body(("html",)) is not None and message["List-Unsubscribe"]
    site = tmp_path / "build" / "site"
    assert (site / "issues" / SAMPLE_WEEK / "index.html").is_file()
    assert list(site.glob("search/pagefind/*/pagefind.js"))  # Pagefind ran
    words = json.loads(next(site.glob("search/pagefind/*/words.json")).read_text("utf-8"))
    assert {"内核", "竞态"} <= set(words)  # and jieba cut the Chinese before it


# -- the Lambda package ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def function_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/build-function.sh's package, which needs a Python 3.11 (Lambda's runtime)."""
    python = sys.executable if sys.version_info[:2] == (3, 11) else shutil.which("python3.11")
    if python is None:
        pytest.fail("the function's package needs a Python 3.11 (Lambda's runtime) on PATH")
    package = tmp_path_factory.mktemp("lambda") / "function"
    run(["bash", ROOT / "deploy" / "build-function.sh", package], cwd=ROOT,
        **{**PYTHON_DEPS, "PYTHON": python})
    return package


def test_the_function_package_is_pinned_by_the_lock_lean_and_compiled(function_package):
    shipped = {}
    for dist_info in function_package.glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        shipped[canonicalize_name(name)] = version
    locked = locked_pins()
    assert {name: version for name, version in shipped.items()
            if name != "vllm-pr-weekly" and locked.get(name) != version} == {}
    assert {"boto3", "botocore", "cryptography", "mangum", "starlette"} <= set(shipped)
    # What the function never runs stays out.
    assert not {"pagefind", "pagefind-bin-extended", "rjieba", "uvicorn", "click",
                "dnspython"} & set(shipped)

    # Its files are its own: stripping a hard-linked binary in place would rewrite the same file
    # in uv's cache and in every venv linked to it, under running processes.
    shared = [path for path in function_package.rglob("*")
              if path.is_file() and path.stat().st_nlink > 1]
    assert shared == []

    # Every module with its bytecode for the runtime's Python, valid whatever the zip's
    # timestamps (unchecked-hash), so a read-only code folder compiles nothing at start.
    tag = sys.implementation.cache_tag
    uncompiled, checked = [], []
    for source in function_package.rglob("*.py"):
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        if not compiled.is_file():
            uncompiled.append(source)
            continue
        header = compiled.read_bytes()[:8]
        if header[:4] != importlib.util.MAGIC_NUMBER or int.from_bytes(header[4:8],
                                                                       "little") != 0b01:
            checked.append(compiled)
    assert uncompiled == [] and checked == []


_INVOKE = """
import importlib, json, sys
package, name, events, answers = sys.argv[1:]
sys.path.insert(0, package)
module, attribute = name.rsplit(".", 1)
handler = getattr(importlib.import_module(module), attribute)
import pipeline
answered = [handler(event, None) for event in json.load(open(events))]
json.dump({"answers": answered, "pipeline": pipeline.__file__,
           "modules": sorted({name.split(".")[0] for name in sys.modules})}, open(answers, "w"))
"""


def invoke_isolated(package: Path, folder: Path, events: list[dict[str, Any]],
                    env: dict[str, str]) -> dict[str, Any]:
    """A cold start of the handler deploy/template.yaml names, with ``package`` the only code
    besides the standard library, called with each event in turn."""
    (folder / "events.json").write_text(json.dumps(events))
    (function,) = resources("AWS::Serverless::Function").values()
    run([sys.executable, "-I", "-S", "-c", _INVOKE, package, function["Properties"]["Handler"],
         folder / "events.json", folder / "answers.json"], cwd=folder, **env)
    result: dict[str, Any] = json.loads((folder / "answers.json").read_text())
    assert Path(result["pipeline"]).is_relative_to(package)
    assert "uvicorn" not in result["modules"]
    return result


def test_the_function_package_alone_answers_the_url_and_the_queue(function_package, tmp_path,
                                                                 moto_server, dynamo):
    signing, origin = "a-signing-key-kept-in-ssm-0123456789", "an-origin-secret-in-sm"
    moto_server.client("ssm").put_parameter(Name="/vllm-pr-weekly/secret", Value=signing,
                                            Type="SecureString")
    origin_arn = moto_server.client("secretsmanager").create_secret(
        Name="vllm-pr-weekly-origin", SecretString=origin)["ARN"]
    sqs = moto_server.client("sqs")
    queue = sqs.create_queue(QueueName="signups")["QueueUrl"]
    # The function's settings, as deploy/template.yaml gives them.
    env = {"NEWSLETTER_STORE_BACKEND": "dynamodb",
           "NEWSLETTER_STORE_SUBSCRIBERS_TABLE": dynamo.subscribers_table,
           "NEWSLETTER_STORE_LEDGER_TABLE": dynamo.ledger_table,
           "NEWSLETTER_DELIVERY_TRANSPORT": "ses",
           "NEWSLETTER_DELIVERY_FROM": "vLLM PR Weekly <weekly@example.org>",
           "NEWSLETTER_SUBSCRIPTIONS_QUEUE_URL": queue,
           "NEWSLETTER_SITE_BASE_URL": SITE, "NEWSLETTER_SITE_APP_URL": APP_URL,
           "NEWSLETTER_PATHS_BUILD_DIR": str(tmp_path / "build"),
           "NEWSLETTER_PATHS_DATA_DIR": str(tmp_path / "data"),
           "NEWSLETTER_SECRET_PARAMETER": "/vllm-pr-weekly/secret",
           "NEWSLETTER_ORIGIN_SECRET_PARAMETER": origin_arn}
    via = {"x-origin-verify": origin}
    before = sorted(function_package.rglob("*"))

    refused, page, posted = invoke_isolated(function_package, tmp_path, [
        subscribe_event("reader@example.org"),  # not through CloudFront: no origin secret
        url_event("GET", "/api/subscribe", headers=via),
        subscribe_event("reader@example.org", headers=via)], env)["answers"]
    assert refused["statusCode"] == 403
    assert page["statusCode"] == 200
    assert f'action="{APP_URL}/subscribe"' in body_of(page)
    assert posted["statusCode"] == 200, body_of(posted)
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["email"] for m in messages] == ["reader@example.org"]

    (drained,) = invoke_isolated(function_package, tmp_path, [sqs_event(messages)],
                                 env)["answers"]
    assert drained == {"batchItemFailures": []}
    subscriber = dynamo.open().find("reader@example.org")
    assert subscriber is not None and subscriber.status == "pending"
    (sent,) = moto_server.sent()
    mail = moto_server.parse(sent)
    assert mail["To"] == "reader@example.org"
    plain = mail.get_body(("plain",))
    assert plain is not None
    link = re.search(rf"{re.escape(APP_URL)}/confirm\?token=([a-z2-7]+)", plain.get_content())
    assert link is not None

    # The reader's next clicks, each in a new execution environment: the confirmation page
    # and its button, then the one-click unsubscribe of an issue's List-Unsubscribe header,
    # whose token is signed with the key in SSM (not the development key).
    one_click = make_token(Keys.from_environ({"NEWSLETTER_SECRET": signing}), "unsubscribe",
                           subscriber.id, None)
    shown, confirmed = invoke_isolated(function_package, tmp_path, [
        url_event("GET", "/api/confirm", query=f"token={link[1]}", headers=via),
        url_event("POST", "/api/confirm", form={"token": link[1]},
                  headers={**via, "origin": SITE})], env)["answers"]
    assert [shown["statusCode"], confirmed["statusCode"]] == [200, 200]
    assert "Thank you for confirming" in body_of(confirmed)
    assert dynamo.open().find("reader@example.org").status == "active"
    (left,) = invoke_isolated(function_package, tmp_path, [
        url_event("POST", "/api/unsubscribe", query=f"token={one_click}",
                  form={"List-Unsubscribe": "One-Click"}, headers=via)], env)["answers"]
    assert left["statusCode"] == 200
    assert dynamo.open().find("reader@example.org").status == "unsubscribed"
    # Nothing compiled or written into the package: a read-only folder would have done.
    assert sorted(function_package.rglob("*")) == before
