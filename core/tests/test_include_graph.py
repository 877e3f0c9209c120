"""The C++ house: the core's sources include each other without cycles, and the
device runtimes below the torch integration (and the core's driver layer that
reaches them) include nothing of torch."""

from __future__ import annotations

import re
from pathlib import Path

CSRC = Path(__file__).resolve().parents[1] / "csrc"
PROJECT_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>", re.MULTILINE)
TORCH_HEADERS = ("ATen/", "c10/", "torch/", "pybind11/", "Python.h", "caffe2/")
# Below the torch integration: built into libraries that link neither libtorch
# nor libpython, so one build serves every torch release; and the core's driver
# layer (driver/), which loads them and speaks only torchplug/driver.h.
TORCH_FREE = ("runtime", "drivers", "driver")


def sources() -> list[Path]:
    return sorted(path for path in CSRC.rglob("*") if path.suffix in {".h", ".cpp"})


def component(path: Path) -> str:
    """A header and its implementation are one component: `memory/host_alias`."""
    return path.relative_to(CSRC).with_suffix("").as_posix()


def include_graph() -> dict[str, set[str]]:
    known = {component(path) for path in sources()}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for path in sources():
        for included in PROJECT_INCLUDE.findall(path.read_text()):
            target = Path(included).with_suffix("").as_posix()
            if target in known and target != component(path):
                graph[component(path)].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        if node in done:
            return None
        visiting.append(node)
        for successor in sorted(graph[node]):
            cycle = visit(successor)
            if cycle:
                return cycle
        visiting.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return cycle
    return None


def test_sources_are_found() -> None:
    assert len(sources()) > 40
    assert "launch/kernel_launch" in include_graph()


def test_no_include_cycle_between_components() -> None:
    cycle = find_cycle(include_graph())
    assert cycle is None, "include cycle: " + " -> ".join(cycle or [])


def test_a_cycle_is_found_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_device_runtimes_include_nothing_of_torch_or_the_integration() -> None:
    offences = []
    for path in sources():
        relative = path.relative_to(CSRC)
        if relative.parts[0] not in TORCH_FREE:
            continue
        text = path.read_text()
        offences += [
            f"{relative}: <{header}>"
            for header in SYSTEM_INCLUDE.findall(text)
            if header.startswith(TORCH_HEADERS)
        ]
        offences += [
            f'{relative}: "{header}"'
            for header in PROJECT_INCLUDE.findall(text)
            if header.split("/")[0] not in (*TORCH_FREE, "torchplug")
        ]
    assert not offences


def test_the_torch_integration_lives_in_folders_by_concern() -> None:
    folders = {path.relative_to(CSRC).parts[0] for path in sources()}
    assert "aten" not in folders
    assert {
        "driver",
        "backend",
        "registration",
        "device",
        "memory",
        "launch",
        "kernels",
        "profiler",
    } <= folders
    flat = [path for path in CSRC.iterdir() if path.is_file()]
    assert not flat
