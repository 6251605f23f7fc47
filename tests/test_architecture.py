"""The import architecture: no cycle, and imports only in the allowed directions.

Walks every module of the four packages with ``ast`` (function-local imports included,
since a cycle hidden behind one is still a cycle) and checks the graph against the map
in the README's Layout section:

* ``modeling`` core (``errors``, ``units``, ``workload``, ``workload_matrix``,
  ``features``, ``store``) imports nothing else of modeling;
* ``modeling.estimators`` imports only the core;
* ``modeling.serving`` imports the core and estimators, never training; ``modeling.derived``
  (what-if devices, answered through the same registry) belongs to it;
* ``modeling.training`` imports the core, estimators and serving (it builds the
  ``DeviceModel`` that serving answers with);
* ``modeling.reporting`` imports all of modeling (it refits the served model's
  configuration out of fold and draws the report); only ``service`` imports it;
* ``collectors`` may import modeling, never service or traces;
* ``traces`` may import modeling and collectors, never service;
* only ``service`` imports the web and CLI libraries, and nothing else imports service.

Beside the layering: no module of the packages, ``bench/`` or ``notebooks/`` imports
another module's private (``_name``) names or reads one off another module's object
(tests may reach into what they test), no package folder holds more than
:data:`MAX_MODULES` modules, and single-row "twins" of matrix code live only in the
estimators' own modules (one prediction path, issue 24).
"""

from __future__ import annotations

import ast
import json
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collectors", "modeling", "service", "traces")
WEB_AND_CLI = ("fastapi", "typer", "uvicorn", "starlette")
CORE = (
    "modeling.errors",
    "modeling.units",
    "modeling.workload",
    "modeling.workload_matrix",
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


@cache
def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package import counts as its __init__).

    Built on first use, not at import: every test worker collects this module, few run it."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for imported in _imports(name, path):
            if imported in MODULES and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph



def _owner(module: str) -> str:
    """The architectural layer of a project module."""
    if module == "modeling.derived" or module.startswith("modeling.derived."):
        return "modeling.serving"
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
        for succ in _graph()[node]:
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

    for node in sorted(_graph()):
        if node not in index:
            visit(node)
    return out


def test_the_walk_sees_every_package_and_function_local_imports():
    # guards the test itself: a broken walk would find no edge and pass everything
    assert len(MODULES) > 80
    assert "modeling.serving.registry" in _graph()["modeling.serving.predict"]
    # service/cli/learn/evaluate.py imports the evaluation inside the command function
    assert "modeling.training.evaluate" in _graph()["service.cli.learn.evaluate"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    cycles = [c for c in _cycles() if any(m.split(".")[0] == package for m in c)]
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_flow_one_way(layer):
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
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
    graph = _graph()
    saved = {k: set(v) for k, v in graph.items()}
    try:
        graph["modeling.workload"].add("modeling.workload_matrix")
        assert ["modeling.workload", "modeling.workload_matrix"] in _cycles()
    finally:
        graph.clear()
        graph.update(saved)


# -- names private to their module, package sizes, one prediction path -------------------

SCRIPTS = ("bench", "notebooks")
"""Not packages, but code of the project: they may import anything public, nothing private."""
MAX_MODULES = 12
"""No package folder holds more modules than this (``__init__.py`` aside)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _script_sources() -> dict[str, str]:
    """Source of every script and notebook code cell, by its path (cells as ``path#n``)."""
    out: dict[str, str] = {}
    for folder in SCRIPTS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            out[str(path.relative_to(ROOT))] = path.read_text()
        for path in sorted((ROOT / folder).rglob("*.ipynb")):
            cells = json.loads(path.read_text())["cells"]
            for n, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
                lines = "".join(cell["source"]).splitlines()
                code = [ln for ln in lines if not ln.lstrip().startswith(("%", "!"))]  # magics
                out[f"{path.relative_to(ROOT)}#{n}"] = "\n".join(code)
    return out


SOURCES = {
    **{str(path.relative_to(ROOT)): path.read_text() for path in MODULES.values()},
    **_script_sources(),
}


@cache
def _trees() -> dict[str, ast.AST]:
    return {name: ast.parse(text, name) for name, text in SOURCES.items()}


def _defined_private(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, attributes of self, globals."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                out.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return {n for n in out if _private(n)}


@cache
def _defined() -> dict[str, set[str]]:
    """The private names each module defines."""
    return {name: _defined_private(tree) for name, tree in _trees().items()}


@cache
def _project_private() -> frozenset[str]:
    """Every private name some project module defines."""
    return frozenset().union(*_defined().values())


PROJECT_ROOTS = {*PACKAGES, *SCRIPTS, "tests"}


def _private_reaches(name: str, tree: ast.AST) -> list[str]:
    """Where module ``name`` imports another module's private name or reads one off an object."""
    found = []
    own = _defined()[name]
    project = _project_private()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PROJECT_ROOTS:
            names = [a.name for a in node.names if _private(a.name)]
            found += [f"{name}:{node.lineno} imports {node.module}.{n}" for n in names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if any(map(_private, a.name.split(".")))]
            found += [f"{name}:{node.lineno} imports {n}" for n in names]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            # self._x is the class's own (perhaps inherited) state; obj._x defined in
            # another project module is that module's private
            mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not mine and node.attr in project:
                found.append(f"{name}:{node.lineno} reads {ast.unparse(node)}")
    return found


def test_no_module_reaches_another_modules_private_names():
    wrong = [hit for name, tree in _trees().items() for hit in _private_reaches(name, tree)]
    assert not wrong, "\n".join(wrong)


def test_the_private_name_check_finds_a_reach(monkeypatch):
    # guards the check itself: a private imported, and one read off another module's object
    probe = "from modeling.x import _helper\nvalue = other._helper\nmine = self._helper\n"
    monkeypatch.setitem(_defined(), "probe", set())
    project = _project_private()
    monkeypatch.setattr(sys.modules[__name__], "_project_private", lambda: {*project, "_helper"})
    hits = _private_reaches("probe", ast.parse(probe))
    assert hits == ["probe:1 imports modeling.x._helper", "probe:2 reads other._helper"]


@pytest.mark.parametrize("script", sorted({n.split("#")[0] for n in SOURCES if n.split("/")[0] in SCRIPTS}))
def test_scripts_import_only_what_exists(script):
    """A bench or notebook imports project modules that exist (the layering: anything public)."""
    wrong = []
    for name, tree in _trees().items():
        if name.split("#")[0] != script:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                if node.module not in MODULES:
                    wrong.append(f"{name}:{node.lineno} imports {node.module}, no such module")
    assert not wrong, "\n".join(wrong)


def _package_folders() -> list[Path]:
    return [
        folder
        for package in PACKAGES
        for folder in [ROOT / package, *sorted((ROOT / package).rglob("*"))]
        if folder.is_dir() and (folder / "__init__.py").exists()
    ]


def test_no_package_folder_holds_more_than_twelve_modules():
    sizes = {
        str(folder.relative_to(ROOT)): len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        for folder in _package_folders()
    }
    assert {"modeling", "modeling/serving", "traces", "service/cli"} <= set(sizes)
    over = {folder: n for folder, n in sizes.items() if n > MAX_MODULES}
    assert not over, f"package folders over {MAX_MODULES} modules: {over}"


def test_twins_live_only_in_the_estimators_own_modules():
    """One prediction path: a single-row twin of matrix code only beside it in an estimator."""
    twins = sorted(
        f"{name}: {text.count('Twin of')}"
        for name, text in SOURCES.items()
        if "Twin of" in text and not name.startswith("modeling/estimators/")
    )
    assert any("Twin of" in text for name, text in SOURCES.items()), "the estimators' twins are named so"
    assert not twins, f"twins outside modeling/estimators/: {twins}"


PREDICTION_INTERNALS = (
    "modeling.serving.row_path",
    "modeling.serving.matrix_path",
    "modeling.serving.feature_lookup",
    "modeling.serving.physics",
)
"""What ``DeviceModel.predict`` picks between and runs: the service never reaches past it."""


def test_the_service_predicts_through_one_entry_point():
    """The route, the batcher and the CLI import no path of their own and call only ``predict``."""
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        if module.startswith("service.")
        for target in targets
        if any(target == p or target.startswith(p + ".") for p in PREDICTION_INTERNALS)
    )
    for name, tree in _trees().items():
        if name.startswith("service/"):
            wrong += [
                f"{name}:{node.lineno} calls .{node.attr}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr in ("predict_matrix", "predict_row")
            ]
    graph = _graph()
    assert "service.api.batcher" in graph and "modeling.serving.device_model" in graph["service.api.batcher"]
    assert not wrong, "\n".join(wrong)
