"""The deployment's files read as the tests need them: deploy/template.yaml with
CloudFormation's short tags, and the GitHub workflows."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from support.project import ROOT

TEMPLATE = ROOT / "deploy" / "template.yaml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
WEEKLY = ROOT / ".github" / "workflows" / "weekly.yml"


class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """YAML with CloudFormation's short tags (``!Ref``, ``!Sub``, …) read as the long form."""


def _cfn_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _cfn_tag)


@functools.cache
def template() -> dict[str, Any]:
    """The template, read once a process: never change it."""
    loaded: dict[str, Any] = yaml.load(TEMPLATE.read_text(encoding="utf-8"),
                                       Loader=_CfnLoader)  # noqa: S506
    return loaded


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template()["Resources"].items() if r["Type"] == kind}


def workflow(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def triggers(flow: dict[Any, Any]) -> dict[str, Any]:
    """``on:`` (YAML 1.1, which PyYAML speaks, reads the bare key as True)."""
    found = flow.get("on", flow.get(True))
    assert isinstance(found, dict), flow
    return found


def steps(flow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in flow["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def environments(flow: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every ``env:`` of a workflow: its own, each job's, each step's."""
    yield flow.get("env", {})
    for job in flow["jobs"].values():
        yield job.get("env", {})
        for step in job.get("steps", []):
            yield step.get("env", {})
