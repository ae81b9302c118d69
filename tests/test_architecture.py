"""The layout is the architecture (docs/architecture.md), held by the import graph.

The contracts of pyproject.toml's ``[tool.importlinter]``, and the allow-lists import-linter
cannot say: ``pipeline.core`` imports *only* the kernel, ``subscribers`` *only* pipeline's
errors, records and two leaf helpers, and no module takes part in an import cycle. Imports
under ``if TYPE_CHECKING:`` count: a type is a dependency too.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable

import grimp
import pytest
from importlinter import configuration
from importlinter.application.use_cases import lint_imports
from support.project import ROOT

KERNEL = {"pipeline", "pipeline.errors", "pipeline.model", "pipeline.config", "pipeline.week",
          "pipeline.log", "pipeline.retry", "pipeline.resource"}
"""What every layer may import; none of it does I/O or imports anything else of ours."""

PURE_SUBSCRIBERS = {"subscribers", "subscribers.errors", "subscribers.model", "subscribers.tokens",
                    "subscribers.areas"}
"""The parts of ``subscribers`` that core may use: records, errors, HMAC tokens and the one
normalising of a reader's areas (which the store must apply, and may not import from core)."""

INTERFACES = ("pipeline.archive", "pipeline.transport", "pipeline.translate", "pipeline.inbox")
"""Packages whose ``__init__`` is the interface and whose submodules are its adapters."""

ADAPTER_ROOTS = ("pipeline.sources.github", "subscribers.store.sqlite", "subscribers.store.dynamo",
                 "pipeline.aws.sqs")
"""Adapters outside an interface package, every module under them included.
``pipeline.sources.feeds`` is none: the build reads its feeds itself, as it reads the editor's
file."""

ENTRY_POINTS = ("pipeline.wiring", "pipeline.cli", "pipeline.web")

IO_LIBRARIES = {"boto3", "botocore", "starlette", "uvicorn", "smtplib", "sqlite3", "socket"}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("pipeline", "subscribers", include_external_packages=True,
                             cache_dir=None)


def _ours(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m.split(".")[0] in ("pipeline", "subscribers"))


def _under(module: str, roots: Iterable[str]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def _is_adapter(module: str) -> bool:
    return (any(module.startswith(root + ".") for root in INTERFACES)
            or _under(module, ADAPTER_ROOTS))


def _imports(graph: grimp.ImportGraph, module: str) -> set[str]:
    return graph.find_modules_directly_imported_by(module)


def _breaches(graph: grimp.ImportGraph, sources: Iterable[str], allowed) -> list[str]:
    return [f"{source} imports {target}" for source in sources
            for target in sorted(_imports(graph, source)) if not allowed(source, target)]


def test_the_contracts_of_pyproject_hold(capsys: pytest.CaptureFixture[str]) -> None:
    configuration.configure()  # what the lint-imports command does first
    passed = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None,
                          no_logo=True)
    assert passed, capsys.readouterr().out


def test_no_module_takes_part_in_an_import_cycle(graph: grimp.ImportGraph) -> None:
    ours = set(_ours(graph))
    edges = {m: sorted(_imports(graph, m) & ours) for m in ours}
    assert _cycle(edges) == []


def test_core_imports_only_the_kernel(graph: grimp.ImportGraph) -> None:
    core = [m for m in _ours(graph) if _under(m, ["pipeline.core"])]
    assert "pipeline.core.issue.rank" in core and "pipeline.core.email.render" in core

    def allowed(source: str, target: str) -> bool:
        if target.split(".")[0] not in ("pipeline", "subscribers"):
            return target not in IO_LIBRARIES
        return target in KERNEL or target in PURE_SUBSCRIBERS or _under(target, ["pipeline.core"])

    assert _breaches(graph, core, allowed) == []


def test_stages_take_their_adapters_as_arguments(graph: grimp.ImportGraph) -> None:
    stages = [m for m in _ours(graph) if _under(m, ["pipeline.stages"])]
    assert "pipeline.stages.send" in stages

    def allowed(source: str, target: str) -> bool:
        return not (_is_adapter(target) or _under(target, ENTRY_POINTS)
                    or target in {"pipeline.aws", "boto3", "botocore"})

    assert _breaches(graph, stages, allowed) == []


def test_only_the_wiring_builds_adapters(graph: grimp.ImportGraph) -> None:
    """Exceptions: an adapter using a sibling's helper, and ``store migrate``'s engine."""
    importers = [m for m in _ours(graph) if not _is_adapter(m)
                 and m not in ("pipeline.wiring", "subscribers.store.migrate")]

    def allowed(source: str, target: str) -> bool:
        return not _is_adapter(target)

    assert _breaches(graph, importers, allowed) == []


def test_boto3_is_imported_by_the_aws_code_alone(graph: grimp.ImportGraph) -> None:
    """Adapters keep AWS's errors at their edge (the Lambda entry reads secrets with boto3)."""
    aws_code = ("pipeline.aws", "pipeline.archive.s3", "pipeline.inbox.s3",
                "pipeline.transport.ses", "pipeline.translate.aws", "subscribers.store.dynamo",
                "pipeline.web.lambda_app")
    importers = [m for m in _ours(graph) if _imports(graph, m) & {"boto3", "botocore"}
                 and not _under(m, aws_code)]
    assert importers == []


def test_subscribers_stand_on_their_own(graph: grimp.ImportGraph) -> None:
    subscribers = [m for m in _ours(graph) if _under(m, ["subscribers"])]

    def allowed(source: str, target: str) -> bool:
        return not target.startswith("pipeline") or target in {
            "pipeline", "pipeline.errors", "pipeline.model", "pipeline.retry", "pipeline.resource"}

    assert _breaches(graph, subscribers, allowed) == []


def test_command_groups_share_only_common(graph: grimp.ImportGraph) -> None:
    """Shared code lives in ``pipeline.cli.common`` or a stage, so each group reads on its own."""
    groups = [m for m in _ours(graph) if m.startswith("pipeline.cli.")
              and m != "pipeline.cli.common"]
    assert "pipeline.cli.delivery" in groups and "pipeline.cli.preview" in groups

    def allowed(source: str, target: str) -> bool:
        return not _under(target, ["pipeline.cli"]) or target == "pipeline.cli.common"

    assert _breaches(graph, groups, allowed) == []


def test_handlers_read_their_arguments_and_never_rewrite_them() -> None:
    """No ``args.to = None`` nor ``getattr(args, ...)``: a stage's input is its request."""
    found = []
    for path in sorted((ROOT / "pipeline" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                       else [])
            for target in targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "args"):
                    found.append(f"{path.name}:{target.lineno} writes args.{target.attr}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == "args"):
                found.append(f"{path.name}:{node.lineno} {node.func.id}(args, …)")
    assert found == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The cycle test above means something only if this finds what it should."""
    cycle = _cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]})
    assert set(cycle) == {"a", "b", "c"} and cycle[0] == cycle[-1]
    assert _cycle({"a": ["b"], "b": []}) == []


def _cycle(edges: dict[str, list[str]]) -> list[str]:
    """One import cycle (its first module repeated at the end), or [] when there is none."""
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as error:
        return list(reversed(error.args[1]))
    return []
