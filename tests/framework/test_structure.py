"""The core stays one a newcomer can change safely (issue 17): `Session` composes small parts instead of doing
their jobs, and no module of `scheduler` imports itself back through others."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import grimp
import networkx as nx
import yaml

import scheduler
from scheduler.framework.session import Session

MAX_LINES = 500  # a module longer than this does more than one job


def public_methods(cls: type) -> list[str]:
    """Methods (plain, static or class) that a caller may call by name; properties and fields do not count."""
    names = set()
    for klass in cls.__mro__[:-1]:  # not `object`
        for name, value in vars(klass).items():
            if name.startswith("_") or isinstance(value, property):
                continue
            if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
                names.add(name)
    return sorted(names)


def import_cycles(package: str) -> list[list[str]]:
    """Each set of modules that import one another (TYPE_CHECKING and function-level imports included), as one
    cycle through them."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_node(module)
        edges.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module))
    cycles = []
    for component in nx.strongly_connected_components(edges):
        if len(component) > 1:
            cycles.append([importer for importer, _ in nx.find_cycle(edges.subgraph(component))])
    return sorted(cycles)


def test_the_session_has_fewer_than_15_public_methods() -> None:
    methods = public_methods(Session)
    assert len(methods) < 15, methods


def test_no_module_of_the_scheduler_imports_itself_back() -> None:
    cycles = import_cycles("scheduler")
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_no_module_is_over_500_lines() -> None:
    root = Path(scheduler.__file__).parent
    sizes = {str(p.relative_to(root.parent)): len(p.read_text().splitlines()) for p in sorted(root.rglob("*.py"))}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


ROOT = Path(scheduler.__file__).parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_every_file_docs_architecture_names_exists() -> None:
    """docs/architecture.md stays true: each module it names (`scheduler/...`, `framework/...`, `tests/...`) is
    there, so a move without the doc's update fails here."""
    text = ARCHITECTURE.read_text()
    named = set(re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.py)", text))
    missing = sorted(p for p in named if not (ROOT / p).exists() and not (ROOT / "scheduler" / p).exists())
    assert named and not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_docs_architecture_says_how_to_add_each_kind_of_part() -> None:
    section = ARCHITECTURE.read_text().split("## How to add", 1)[1].split("\n## ", 1)[0]
    for part in ("A plugin.", "An extension point.", "An action.", "A controller.", "A CLI command."):
        entry = next((line for line in section.split("\n- ") if line.startswith(f"**{part}**")), None)
        assert entry is not None, f"docs/architecture.md does not say how to add {part}"
        assert re.search(r"`scheduler/[\w/]+\.py`", entry), f"{part} names no file to copy"


def test_the_pre_commit_hook_runs_make_lint() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [h for repo in config["repos"] for h in repo["hooks"]]
    assert [(h["entry"], h["language"], h["pass_filenames"]) for h in hooks] == [("make lint", "system", False)]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lint: ", makefile, re.M), "the Makefile has no lint target for the hook to run"
