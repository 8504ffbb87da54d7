"""Review rules as tests: data flows one way between the package's modules (no import cycle, lazy imports included),
and no module imports another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import dspy_rdf

PACKAGE = Path(dspy_rdf.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, list[str]]]]:
    """Each module of the package -> the package modules it imports (anywhere in it, lazily too) and the names."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for name, path in modules.items():
        found = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dspy_rdf"):
                names = [a.name for a in node.names]
                submodules = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in modules]
                if submodules:
                    found += [(m, []) for m in submodules]
                    names = [n for n in names if f"{node.module}.{n}" not in modules]
                if names or not submodules:
                    found.append((node.module, names))
            elif isinstance(node, ast.Import):
                found += [(a.name, []) for a in node.names if a.name.startswith("dspy_rdf")]
        out[name] = [(m, n) for m, n in found if m in modules and m != name]
    return out




def test_no_import_cycles_between_modules():
    graph = {m: sorted({target for target, _ in deps if not (target == "dspy_rdf" or m.startswith(target + "."))}) for m, deps in _imports().items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in graph.get(node, []):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_names_are_imported_across_modules():
    offenders = [
        f"{module} imports {name} from {target}"
        for module, deps in _imports().items()
        for target, names in deps
        for name in names
        if name.startswith("_")
    ]
    assert not offenders, offenders


def test_no_test_imports_a_private_name_of_the_package():
    offenders = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dspy_rdf"):
                offenders += [f"{path.name} imports {a.name} from {node.module}" for a in node.names if a.name.startswith("_")]
    assert not offenders, offenders


LAYERS = [
    ("lazy", "resources", "outputs"),
    ("canonical",),
    ("sources", "rdf", "plugins"),
    ("inputs", "store"),
    ("validation", "analytics", "journal"),
    ("interop", "capture"),
    ("service",),
    ("cli", "generate"),
    ("", "__main__"),
]
"""The package's layers, lowest first: a module imports only from its own folder and from lower layers. The
canonical model imports nothing of the package but the two helpers below it; sources and RDF are siblings that do
not know each other; stores know RDF; validation and analytics read stores; capture and the interop views put
together what is below them; the services (a trace server, an MCP server) use all of it; the command line sits on top."""

_RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def _part_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_part_of_the_package_has_a_layer():
    parts = {_part_of(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert parts <= set(_RANK), f"not in LAYERS: {sorted(parts - set(_RANK))}"


def test_imports_go_down_the_layers():
    upward = [
        f"{module} ({_part_of(module) or 'dspy_rdf'}) imports {target} ({_part_of(target) or 'dspy_rdf'})"
        for module, deps in _imports().items()
        for target, _ in deps
        if _part_of(module) != _part_of(target) and _RANK[_part_of(target)] >= _RANK[_part_of(module)]
    ]
    assert not upward, upward


def test_the_architecture_page_names_every_part_of_the_package():
    page = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    parts = {_part_of(_module_name(p)) for p in PACKAGE.rglob("*.py")} - {"", "__main__"}
    missing = sorted(part for part in parts if f"{part}/" not in page and f"{part}.py" not in page)
    assert not missing, f"docs/architecture.md does not name: {missing}"
