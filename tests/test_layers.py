"""The layers of the workspace: no import cycles, and a core that stands on torch alone.

The import graph of each distribution is read from its source with ``ast``:
every ``import`` and ``from ... import`` at any depth (inside functions and
``if TYPE_CHECKING:`` blocks too, since a deferred import hides a cycle rather
than removing it), relative imports resolved. Edges join modules of the same
distribution only; which distribution may import which is the layer test's job.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fresh_interpreter import run_python

WORKSPACE = Path(__file__).resolve().parents[1]
SOURCE_TREES = sorted(
    [
        WORKSPACE / "core/src/torchplug",
        WORKSPACE / "packages/torchplug-testing/src/torchplug_testing",
        *(path for path in (WORKSPACE / "plugins").glob("*/src/*") if path.is_dir()),
    ]
)


def modules_of(tree: Path) -> dict[str, Path]:
    """Dotted module names of a package's source tree (a package is its ``__init__``)."""
    modules = {}
    for path in tree.rglob("*.py"):
        parts = path.relative_to(tree.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def bound_names(path: Path) -> set[str]:
    """The names a module may define (over-approximated: any name it binds anywhere)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports.

    ``import a.b`` is an edge to ``a.b``; ``from a import n`` to the submodule
    ``a.n`` if the tree has it, else to ``a`` when ``a`` defines ``n`` (a name
    neither provides is a module built from no source here: a compiled
    extension, a generated file). Importing ``a.b`` also runs ``a/__init__``;
    that is no edge, or every package that re-exports its submodules would be
    a cycle.
    """
    packages = {module for module, path in modules.items() if path.name == "__init__.py"}
    defined = {module: bound_names(modules[module]) for module in packages}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        package = module if module in packages else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                graph[module].update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: package.count(".") + 2 - node.level])
                    source = f"{base}.{source}" if source else base
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        graph[module].add(submodule)
                    elif source not in packages or {alias.name, "__getattr__"} & defined[source]:
                        graph[module].add(source)
        graph[module] &= modules.keys() - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """The strongly connected components of more than one module, each as its sorted
    modules followed by one cycle through them."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = lowlink[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                connect(target)
                lowlink[module] = min(lowlink[module], lowlink[target])
            elif target in stack:
                lowlink[module] = min(lowlink[module], index[target])
        if lowlink[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [(component, shortest_cycle(graph, component)) for component in components]


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """The shortest cycle through the component's first module, first module repeated last."""
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module] & set(component)):
                if target == start:
                    return [*paths[module], start]
                if target not in paths:
                    paths[target] = [*paths[module], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


@pytest.mark.parametrize("tree", SOURCE_TREES, ids=lambda tree: tree.name)
def test_no_import_cycles(tree: Path) -> None:
    found = cycles(import_graph(modules_of(tree)))
    assert not found, f"import cycles in {tree.relative_to(WORKSPACE)}:\n" + "\n".join(
        f"{', '.join(component)} import each other, e.g. {' -> '.join(cycle)}"
        for component, cycle in found
    )


def test_the_cycle_check_sees_deferred_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg import a\n")
    (package / "a.py").write_text("def f():\n    from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("from .. import c\n")
    (package / "c.py").write_text("import pkg.a\nimport os\nfrom pkg import _C\n")
    ((component, cycle),) = cycles(import_graph(modules_of(package)))
    assert component == ["pkg.a", "pkg.c", "pkg.sub.b"]
    assert cycle == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


# Unimportable, as in an environment where they are not installed.
BLOCK_TESTING_LAYERS = """
import importlib.abc
import sys

BLOCKED = ("pytest", "_pytest", "torchplug_testing")


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""

# Prints the modules of the layers above the core runtime that the child has loaded.
LOADED_LAYERS = """
import json
print("LOADED", json.dumps({
    "test tooling": sorted(
        name for name in sys.modules
        if name.split(".")[0] in ("pytest", "_pytest", "torchplug_testing")
    ),
    "benchmarks": sorted(
        name for name in sys.modules
        if name.split(".")[0] == "torchplug_bench"
    ),
}))
"""


def loaded_layers(stdout: str) -> dict[str, list[str]]:
    line = next(line for line in stdout.splitlines() if line.startswith("LOADED "))
    return json.loads(line.removeprefix("LOADED "))


def test_the_core_imports_without_pytest_and_torchplug_testing() -> None:
    result = run_python(
        BLOCK_TESTING_LAYERS
        + """
import pkgutil

import torch
import torchplug

assert torch.foo.is_available(), torchplug.statuses()
names = [
    info.name
    for info in pkgutil.walk_packages(torchplug.__path__, "torchplug.")
    if info.name != "torchplug.cli"
]
for name in names:
    __import__(name)
print("IMPORTED", len(names))
for blocked in ("pytest", "torchplug_testing"):
    try:
        __import__(blocked)
    except ModuleNotFoundError:
        continue
    raise AssertionError(f"{blocked} was importable")
"""
        + LOADED_LAYERS,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "IMPORTED" in result.stdout
    assert loaded_layers(result.stdout)["test tooling"] == []


def test_import_torch_autoload_imports_no_bench_and_no_test_tooling() -> None:
    result = run_python("import sys\nimport torch\n" + LOADED_LAYERS)
    assert result.returncode == 0, result.stderr[-4000:]
    assert loaded_layers(result.stdout) == {"test tooling": [], "benchmarks": []}


DISTRIBUTION_SOURCES = sorted(
    path
    for pattern in ("core/src/**/*.py", "plugins/*/src/**/*.py", "packages/*/src/**/*.py")
    for path in WORKSPACE.glob(pattern)
)
MAX_SOURCE_LINES = 400


def test_no_distribution_source_file_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(WORKSPACE)): lines
        for path in DISTRIBUTION_SOURCES
        if (lines := len(path.read_text().splitlines())) > MAX_SOURCE_LINES
    }
    assert not long, f"split these by concern (at most {MAX_SOURCE_LINES} lines each): {long}"


# What a plugin may import of the core: the names ``torchplug`` exports, and
# these documented modules.
PUBLIC_CORE_MODULES = {"torchplug", "torchplug.runtime", "torchplug.sanitizer"}


def core_imports(path: Path) -> set[str]:
    """``torchplug`` modules and exported names a source file imports, dotted."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "torchplug")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torchplug":
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_plugins_import_only_the_public_core() -> None:
    import torchplug

    public = PUBLIC_CORE_MODULES | {f"torchplug.{name}" for name in torchplug.__all__}
    private = {
        str(path.relative_to(WORKSPACE)): sorted(core_imports(path) - public)
        for path in DISTRIBUTION_SOURCES
        if path.is_relative_to(WORKSPACE / "plugins")
    }
    private = {path: names for path, names in private.items() if names}
    assert not private, f"plugins use private torchplug modules; export what they need: {private}"


# Torch's names of the dispatch keys torchplug serves (``torchplug.DEVICE_KINDS``).
DISPATCH_KEY_NAMES = {"privateuse1", "privateuseone", "hpu"}


def dispatch_key_tests(path: Path) -> list[int]:
    """Lines comparing something with a dispatch key's name or a ``dispatch_key``."""

    def names_a_key(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in DISPATCH_KEY_NAMES
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(names_a_key(element) for element in node.elts)
        return isinstance(node, ast.Attribute) and node.attr == "dispatch_key"

    return sorted(
        {
            node.lineno
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
            if isinstance(node, ast.Compare)
            and any(map(names_a_key, [node.left, *node.comparators]))
        }
    )


def test_dispatch_key_differences_are_rows_of_the_device_kind_table() -> None:
    table = WORKSPACE / "core/src/torchplug/device_kind.py"
    found = {
        str(path.relative_to(WORKSPACE)): lines
        for path in DISTRIBUTION_SOURCES
        if path != table and (lines := dispatch_key_tests(path))
    }
    assert not found, (
        "a PrivateUse1/HPU difference is a row of torchplug.device_kind.DeviceKind, "
        f"not a string test: {found}"
    )


def test_the_source_checks_see_what_they_forbid(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "from torchplug.activation import records\nimport torchplug.device_kind\n"
        "if backend.dispatch_key == 'x' or name in ('cpu', 'hpu'):\n    pass\n"
    )
    assert core_imports(source) == {"torchplug.activation.records", "torchplug.device_kind"}
    assert dispatch_key_tests(source) == [3]
