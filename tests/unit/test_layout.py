"""The package's layout keeps the architecture readable (docs/architecture.md): one layer per package, imports
pointing down only (lazy imports inside functions included), no runtime package importing the test API, the demo
or the repository's tooling, no import cycle, every top-level name defined in one module only, and every module
named in docs/architecture.md.

Sizes are reported, not limited (a concept is not cut in two to meet a number): ``python -m tests.unit.test_layout``
prints the largest modules and classes, and so does ``test_size_report`` under ``pytest -s``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import s3commit

PACKAGE = Path(s3commit.__file__).parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
PROTOCOL_NAMES = {
    "__all__", "log",
    "main",  # the entry point of each runnable module (python -m ..., console scripts)
    "add_parser", "run",  # what each module of s3commit.cli declares: its subcommand and its handler
}
"""Names each of several modules defines on purpose, in the same role."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def owning_module(name: str) -> str | None:
    """The package's module that ``name`` (a module, or a name inside one) belongs to."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def imported_names(path: Path) -> set[str]:
    """Every dotted name ``path`` imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def imported_modules(path: Path) -> set[str]:
    """The package's modules ``path`` imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(m for n in names if n.startswith("s3commit") and (m := owning_module(n)))
    found.discard(module_name(path))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_the_packages_modules():
    graph = {name: imported_modules(path) for name, path in MODULES.items()}
    # A package's __init__ importing its own modules, and they importing each other through it, is not a cycle
    # of concepts: only edges to modules outside a module's own package (or to its siblings) are kept.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(f"{t}.")}
    assert cycles(graph) == []


def test_the_cycle_detector_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_top_level_name_is_defined_in_one_module():
    defined: dict[str, list[str]] = defaultdict(list)
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                targets = [node.name]
            elif isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            else:
                continue
            for target in targets:
                defined[target].append(name)
    twice = {n: where for n, where in defined.items() if len(where) > 1 and n not in PROTOCOL_NAMES}
    assert twice == {}


def test_docs_architecture_names_every_module():
    text = ARCHITECTURE.read_text()
    missing = [name for name in MODULES if name != "s3commit" and f"`{name.removeprefix('s3commit.')}`" not in text]
    assert missing == []


# --- layers ----------------------------------------------------------------------------------------------------

LAYERS: list[tuple[str, ...]] = [
    ("s3commit.errors", "s3commit._version"),
    ("s3commit.model",),
    ("s3commit.config",),
    ("s3commit.store",),
    ("s3commit.transfer",),
    ("s3commit.commit",),
    ("s3commit.committers",),
    ("s3commit.engines", "s3commit.spark", "s3commit.bridge", "s3commit.cli"),
    ("s3commit", "s3commit.arrow", "s3commit.dask", "s3commit.ray"),
    ("s3commit.testing",),
    ("s3commit.demo",),
]
"""Bottom-up. A module may import its own package, the packages of lower layers and the foundation (the first
row); never a higher layer, nor another package of its own layer (the top runtime layer's packages are peers)."""
RUNTIME = LAYERS[:-2]
"""What a user's job runs: never imports the test API, the demo, or the repository's ``benchmarks`` and ``testbed``."""
REPOSITORY_TOOLING = ("benchmarks", "testbed")


def unit_of(module: str) -> tuple[int, str]:
    """The layer of ``module`` and the unit (package, or a façade module) it belongs to."""
    best: tuple[int, str] | None = None
    for level, units in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(f"{unit}.")) and (best is None or len(unit) > len(best[1])):
                best = (level, unit)
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return best


def test_every_module_is_in_a_layer():
    for name in MODULES:
        unit_of(name)


def test_imports_point_down_the_layers():
    upward = []
    for name, path in MODULES.items():
        level, unit = unit_of(name)
        for target in imported_modules(path):
            target_level, target_unit = unit_of(target)
            if target_unit == unit or target_level == 0:
                continue
            if target_level >= level:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_no_runtime_package_imports_the_test_api_the_demo_or_the_repository_tooling():
    runtime = {unit for units in RUNTIME for unit in units}
    found = []
    for name, path in MODULES.items():
        for target in imported_names(path):
            tooling = target.split(".")[0] in REPOSITORY_TOOLING
            if tooling or (unit_of(name)[1] in runtime and target.startswith(("s3commit.testing", "s3commit.demo"))):
                found.append(f"{name} -> {target}")
    assert found == []


def test_the_layer_check_finds_an_upward_import():
    assert unit_of("s3commit.store.s3store") == (3, "s3commit.store")
    assert unit_of("s3commit.commit.lease")[0] > unit_of("s3commit.store.s3store")[0]
    assert unit_of("s3commit.arrow") == (8, "s3commit.arrow")


def test_the_top_of_the_package_holds_the_facade_and_packages_only():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 10, modules


def test_every_package_says_what_it_holds_and_what_it_may_import():
    silent = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "May import" not in doc:
            silent.append(init.parent.name)
    assert silent == []


# --- sizes: a report, not a limit ------------------------------------------------------------------------------


def module_sizes() -> dict[str, int]:
    """Lines of each of the package's modules."""
    return {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}


def class_sizes() -> dict[str, int]:
    """Lines of each class of the package (nested ones included), by ``module.Class``."""
    sizes = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                sizes[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    return sizes


def size_report(top: int = 15) -> str:
    """The ``top`` largest modules and classes, largest first: something to read when a module grows, not a
    limit (docs/architecture.md: a concept is not cut in two to meet a number)."""
    lines = []
    for title, sizes in (("modules", module_sizes()), ("classes", class_sizes())):
        lines.append(f"largest {title} (lines):")
        lines.extend(f"  {n:5d}  {name}" for name, n in sorted(sizes.items(), key=lambda item: -item[1])[:top])
    return "\n".join(lines)


def test_size_report():
    sizes = module_sizes()
    assert set(sizes) == set(MODULES) and all(n >= 0 for n in sizes.values())
    print(size_report())


if __name__ == "__main__":
    print(size_report(top=40))
