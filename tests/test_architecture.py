"""The import architecture: no cycle, and imports only in the allowed directions.

Walks every module of the four packages with ``ast`` (function-local imports included,
since a cycle hidden behind one is still a cycle) and checks the graph against the map
in the README's Layout section:

* ``modeling`` core (``errors``, ``workload``, ``workload_matrix``, ``one_row``,
  ``features``, ``store``) imports nothing else of modeling;
* ``modeling.estimators`` imports only the core;
* ``modeling.serving`` imports the core and estimators, never training;
* ``modeling.training`` imports the core, estimators and serving (it builds the
  ``DeviceModel`` that serving answers with);
* ``modeling.reporting`` imports all of modeling (it refits the served model's
  configuration out of fold and draws the report); only ``service`` imports it;
* ``collectors`` may import modeling, never service or traces;
* ``traces`` may import modeling and collectors, never service;
* only ``service`` imports the web and CLI libraries, and nothing else imports service.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collectors", "modeling", "service", "traces")
WEB_AND_CLI = ("fastapi", "typer", "uvicorn", "starlette")
CORE = (
    "modeling.errors",
    "modeling.workload",
    "modeling.workload_matrix",
    "modeling.one_row",
    "modeling.features",
    "modeling.store",
)
ROOMS = ("modeling.estimators", "modeling.serving", "modeling.training", "modeling.reporting")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute names; ``from x import y`` yields x.y if a module)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return found


def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package import counts as its __init__)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for imported in _imports(name, path):
            if imported in MODULES and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


GRAPH = _graph()


def _owner(module: str) -> str:
    """The architectural layer of a project module."""
    for prefix in (*CORE, *ROOMS):
        if module == prefix or module.startswith(prefix + "."):
            return prefix if prefix in ROOMS else "modeling.core"
    if module == "modeling":
        return "modeling.core"
    return module.split(".")[0]


_MODELING = {"modeling.core", "modeling.estimators", "modeling.serving", "modeling.training"}
ALLOWED: dict[str, set[str]] = {
    "modeling.core": {"modeling.core"},
    "modeling.estimators": {"modeling.core", "modeling.estimators"},
    "modeling.serving": {"modeling.core", "modeling.estimators", "modeling.serving"},
    "modeling.training": _MODELING,
    "modeling.reporting": {*_MODELING, "modeling.reporting"},
    "collectors": {"collectors", *_MODELING},
    "traces": {"traces", "collectors", *_MODELING},
    "service": {"service", "traces", "collectors", *_MODELING, "modeling.reporting"},
}


def _cycles() -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in GRAPH[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return out


def test_the_walk_sees_every_package_and_function_local_imports():
    # guards the test itself: a broken walk would find no edge and pass everything
    assert len(MODULES) > 80
    assert "modeling.serving.registry" in GRAPH["modeling.serving.predict"]
    # service/cli/models.py imports the evaluation inside the command function
    assert "modeling.training.evaluate" in GRAPH["service.cli.models"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    cycles = [c for c in _cycles() if any(m.split(".")[0] == package for m in c)]
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_flow_one_way(layer):
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _owner(module) == layer
        for target in targets
        if _owner(target) not in ALLOWED[layer]
    )
    assert not wrong, "\n".join(wrong)


def test_only_service_imports_the_web_and_cli_libraries():
    wrong = sorted(
        f"{module} imports {imported}"
        for module, path in MODULES.items()
        if not module.startswith("service")
        for imported in _imports(module, path)
        if imported.split(".")[0] in WEB_AND_CLI
    )
    assert not wrong, "\n".join(wrong)


def test_the_cycle_finder_finds_a_cycle():
    saved = {k: set(v) for k, v in GRAPH.items()}
    try:
        GRAPH["modeling.workload"].add("modeling.workload_matrix")
        assert ["modeling.workload", "modeling.workload_matrix"] in _cycles()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)
