"""The shape of the code: the layer contract holds, imports form no circle, classes stay small."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tlparse_py"
MAX_CLASS_LINES = 200


def test_layer_contract_holds():
    """`lint-imports` checks the [tool.importlinter] contracts in pyproject.toml."""
    command = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_types_check():
    """mypy over the whole package, the analysis layer strictly (`[tool.mypy]` in pyproject.toml)."""
    command = shutil.which("mypy") or str(Path(sys.executable).with_name("mypy"))
    result = subprocess.run([command, "--no-incremental"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def _layered_names() -> dict[str | None, set[str]]:
    """container (None: the top contract) → the module names its layers list."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    placed: dict[str | None, set[str]] = {}
    for contract in config["contracts"]:
        if contract["type"] != "layers":
            continue
        names = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
        for container in contract.get("containers") or [None]:
            placed.setdefault(container, set()).update(names)
    return placed


# Scenario scripts each run as a program of their own (a subprocess of the harness), never imported
# by one another's layers: the harness contract places their package as one layer.
UNLAYERED = ("tlparse_py.harness.scenarios.",)


def test_every_module_is_in_a_layer():
    """Each module is listed by the contract of the folder it lives in, and so is each folder above it."""
    placed = _layered_names()
    graph = grimp.build_graph("tlparse_py", exclude_type_checking_imports=True)
    missing = []
    for module in sorted(graph.modules - {"tlparse_py"}):
        if module.startswith(UNLAYERED):
            continue
        parent, _, name = module.rpartition(".")
        listed = module in placed.get(None, set()) if parent == "tlparse_py" else name in placed.get(parent, set())
        if not listed:
            missing.append(module)
    assert missing == []


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_circles():
    graph = grimp.build_graph("tlparse_py", exclude_type_checking_imports=True)
    # a package's __init__ importing its own submodules is how Python packages work, not a circle
    for module in list(graph.modules):
        for imported in list(graph.find_modules_directly_imported_by(module)):
            if imported.startswith(module + "."):
                graph.remove_import(importer=module, imported=imported)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b"]]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_classes_stay_small(path):
    tree = ast.parse(path.read_text())
    big = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]
    assert big == []


def test_no_import_circles_even_through_type_checking_imports():
    """Names imported only for annotations tie modules too: the page functions (`report.html`) read
    the view models through Protocols of their own (`html.models`), never by importing `views`."""
    graph = grimp.build_graph("tlparse_py", exclude_type_checking_imports=False, cache_dir=None)
    for module in list(graph.modules):
        for imported in list(graph.find_modules_directly_imported_by(module)):
            if imported.startswith(module + "."):
                graph.remove_import(importer=module, imported=imported)
    assert _cycles(graph) == []


def _declared_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {r.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for r in project["dependencies"]}
    return {name.replace("-", "_") for name in names}


def test_the_package_imports_only_the_public_modules_of_its_dependencies():
    """A dependency's private modules (`_x`) and Jinja's submodules (its compiler, runtime, ...) change in
    any release: the package uses Jinja through the names of `jinja2` alone, and no dependency through
    a private module."""
    import types

    import jinja2

    dependencies = _declared_dependencies()
    assert {"jinja2", "markupsafe", "msgspec"} <= dependencies
    jinja_modules = {name for name, value in vars(jinja2).items() if isinstance(value, types.ModuleType)}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "jinja2":
                names = [f"jinja2.{node.attr}"]
            for name in names:
                parts = name.split(".")
                if parts[0].lower() not in dependencies:
                    continue
                private = any(part.startswith("_") and not part.endswith("__") for part in parts)  # `__version__` is public
                if private or (parts[0] == "jinja2" and len(parts) > 1 and parts[1] in jinja_modules):
                    found.append(f"{path.relative_to(ROOT)}: {name}")
    assert found == []
