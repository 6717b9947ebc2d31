"""The layering of ``src/cairn`` (docs/architecture.md), checked on the real import graph.

Every ``import`` of a cairn module in every source file is read with :mod:`ast`. Imports under
``if TYPE_CHECKING:`` are type-only: they are exempt from the layer order (annotations may name a
type from above) but not from the never-rules. Every other import, at module level or inside a
function, runs at some point, so it must follow the layer order: a package imports only packages
of its own layer or below, which makes a cycle between packages impossible.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# One worker reads the source tree once (``_statements``) for every test here, instead of each
# worker reading it for its share of them.
pytestmark = pytest.mark.xdist_group("import_graph")

# Bottom to top. A package may import its own layer and the layers below it, never above.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "_lazy",
            "_startup",
            "_version",
            "abort",
            "content",
            "fsutil",
            "ids",
            "images",
            "values",
            "vocabulary",
            "exit_codes",
        }
    ),
    frozenset({"config"}),
    frozenset({"database", "debug_log", "telemetry"}),
    frozenset({"llm", "hooks", "recording"}),
    frozenset({"tools"}),
    frozenset({"agent", "mcp"}),
    frozenset({"memory", "recap", "extensions"}),
    frozenset({"session"}),
    frozenset({"acp", "daemon", "ui", "headless"}),  # the front ends
    frozenset({"sdk", "testing", "demo", "cli"}),
)
FRONT_ENDS = LAYERS[8]
# ARCHITECTURE.md's never-rules, type-only imports included: (importer, imported) package pairs.
NEVER = {
    ("memory", "session"),  # memory knows no session
    *(("session", front) for front in FRONT_ENDS),  # the runtime knows no transport
    *((a, b) for a in FRONT_ENDS for b in FRONT_ENDS if a != b),  # front ends don't call each other
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. "cairn.tools.scheduler"
    target: str  # the imported module or name, e.g. "cairn.vocabulary.events"
    line: int
    type_only: bool

    @property
    def source_package(self) -> str:
        return _package(self.source)

    @property
    def target_package(self) -> str:
        return _package(self.target)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


@dataclass(frozen=True)
class Statement:
    """One absolute import statement of a module (relative ones never leave their package)."""

    module: str | None  # ``from <module> import <names>``; None for ``import <names>``
    names: tuple[str, ...]
    line: int
    type_only: bool  # inside an ``if TYPE_CHECKING:`` block
    in_function: bool  # inside a function (runs when it is called)
    top_level: bool  # a statement of the module's own body

    @property
    def targets(self) -> tuple[str, ...]:
        """The modules it imports (or, for ``from``, the module it imports from)."""
        return (self.module,) if self.module else self.names


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "cairn"


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _module_statements(tree: ast.Module) -> list[Statement]:
    type_only = _type_checking_blocks(tree)
    found: list[Statement] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            module = child.module if isinstance(child, ast.ImportFrom) else None
            absolute = isinstance(child, ast.Import) or (
                isinstance(child, ast.ImportFrom) and child.level == 0 and module is not None
            )
            if absolute and isinstance(child, ast.Import | ast.ImportFrom):
                names = tuple(alias.name for alias in child.names)
                typed = id(child) in type_only
                top = node is tree
                found.append(Statement(module, names, child.lineno, typed, in_function, top))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


@functools.cache
def _statements(src: Path) -> tuple[tuple[Path, tuple[Statement, ...]], ...]:
    """Every module of ``src/cairn`` with its import statements, read once a process. Only
    these are kept, not the trees: a worker's garbage collector would walk 2.8 MB of parsed
    source at every full collection for the rest of the run."""
    return tuple(
        (path, tuple(_module_statements(ast.parse(path.read_text(encoding="utf-8")))))
        for path in sorted((src / "cairn").rglob("*.py"))
    )


def _imports(src: Path = SRC) -> Iterator[Import]:
    for path, statements in _statements(src):
        source = _module_name(path, src)
        for statement in statements:
            for target in statement.targets:
                if target == "cairn" or target.startswith("cairn."):
                    yield Import(source, target, statement.line, statement.type_only)


def _layer(package: str) -> int:
    for index, members in enumerate(LAYERS):
        if package in members:
            return index
    raise AssertionError(f"package cairn.{package} is in no layer: add it to LAYERS")


def _package_imports(src: Path = SRC) -> list[Import]:
    return [i for i in _imports(src) if "cairn" not in (i.source_package, i.target_package)]


def _upward(imports: list[Import]) -> list[str]:
    return [
        str(i)
        for i in imports
        if not i.type_only and _layer(i.target_package) > _layer(i.source_package)
    ]


def _never(imports: list[Import]) -> list[str]:
    return [str(i) for i in imports if (i.source_package, i.target_package) in NEVER]


@functools.cache
def package_imports() -> list[Import]:
    """Every import between packages, read once a process when a test first asks (not at
    collection, which every xdist worker does)."""
    return _package_imports()


def test_every_package_has_a_layer() -> None:
    packages = {p.name.removesuffix(".py") for p in (SRC / "cairn").iterdir()}
    packages -= {"__init__", "__pycache__", "py.typed"}
    for package in sorted(packages):
        _layer(package)


def test_no_runtime_import_goes_up_a_layer() -> None:
    assert _upward(package_imports()) == []


def test_no_import_breaks_a_never_rule() -> None:
    assert _never(package_imports()) == []


def test_there_is_no_cycle_between_packages() -> None:
    """Implied by the layer order; checked directly so a change to LAYERS cannot hide one."""
    graph: dict[str, set[str]] = {}
    for i in package_imports():
        if not i.type_only and i.source_package != i.target_package:
            graph.setdefault(i.source_package, set()).add(i.target_package)
    assert _cycles(graph) == []


def test_no_two_modules_import_each_other_at_import_time() -> None:
    """Module-level imports only: a cycle there makes the import order matter."""
    graph: dict[str, set[str]] = {}
    modules = {_module_name(p) for p in (SRC / "cairn").rglob("*.py")}
    for path, statements in _statements(SRC):
        source = _module_name(path)
        for statement in statements:  # module level, outside functions and TYPE_CHECKING blocks
            if statement.top_level and statement.module:
                for alias in statement.names:
                    name = f"{statement.module}.{alias}"
                    target = name if name in modules else statement.module
                    if target in modules and target != source:
                        graph.setdefault(source, set()).add(target)
    assert _cycles(graph) == []


def test_no_module_imports_the_package_root() -> None:
    """``cairn/__init__.py`` is the public surface over everything: a module below it that
    imported it (``from cairn import __version__``) would close a circle through every layer;
    the version lives in ``cairn._version``."""
    modules = {_module_name(p) for p in (SRC / "cairn").rglob("*.py")}
    found = []
    for path, statements in _statements(SRC):
        if path.name == "__init__.py" and path.parent.name == "cairn":
            continue
        for statement in statements:
            if statement.module == "cairn":
                names = [a for a in statement.names if f"cairn.{a}" not in modules]
                found += [f"{_module_name(path)}:{statement.line} {name}" for name in names]
            elif statement.module is None and "cairn" in statement.names:
                found.append(f"{_module_name(path)}:{statement.line} cairn")
    assert found == []


# ----- imports inside functions: only where they keep a module off a start path -----

DEFERRED_ALLOWLIST = Path(__file__).with_name("deferred_imports.txt")
DOOR_ALLOWLIST = Path(__file__).with_name("package_doors.txt")


def _listed(path: Path) -> set[str]:
    """The module names of an allowlist file (one a line, ``#`` comments)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def _function_level_imports(src: Path = SRC) -> dict[str, set[str]]:
    """``imported module -> the modules importing it inside a function`` (type-only excluded)."""
    found: dict[str, set[str]] = {}
    for path, statements in _statements(src):
        source = _module_name(path, src)
        for statement in statements:
            if statement.in_function and not statement.type_only:
                for name in statement.targets:
                    found.setdefault(name, set()).add(source)
    return found


def test_modules_are_imported_inside_functions_only_where_that_pays() -> None:
    """An import inside a function hides a dependency from a reader of the module's head; it
    is worth it only when it keeps the module off a start path. tests/deferred_imports.txt
    lists the modules that may be imported so, each measured by benchmarks/import_bench.py
    (regenerate it with ``--write``); every other import goes at the top of its module."""
    unlisted = sorted(set(_function_level_imports()) - _listed(DEFERRED_ALLOWLIST))
    assert unlisted == []


def test_the_deferred_import_allowlist_only_shrinks() -> None:
    """A module no function imports any more leaves the list (so the list keeps telling the
    truth, and what was hoisted stays hoisted)."""
    assert sorted(_listed(DEFERRED_ALLOWLIST) - set(_function_level_imports())) == []


# ----- package doors: another package's modules are reached through its __init__ ----------


def _past_the_door(imports: list[Import]) -> dict[str, set[str]]:
    """``cairn.<package>.<module> -> importing modules of other packages`` (runtime imports)."""
    found: dict[str, set[str]] = {}
    for i in imports:
        if i.type_only or i.source_package == i.target_package or i.target.count(".") < 2:
            continue
        found.setdefault(i.target, set()).add(i.source)
    return found


def test_other_packages_are_entered_through_their_doors() -> None:
    """A package's ``__init__`` is its door (what it offers others, loaded lazily where it is
    costly). tests/package_doors.txt lists the modules still reached past the door from
    another package; a new one fails here: import it from the package, or export it there."""
    unlisted = sorted(set(_past_the_door(package_imports())) - _listed(DOOR_ALLOWLIST))
    assert unlisted == []


def test_the_door_allowlist_only_shrinks() -> None:
    assert sorted(_listed(DOOR_ALLOWLIST) - set(_past_the_door(package_imports()))) == []


def test_the_import_rules_see_deferred_imports_and_doors(tmp_path: Path) -> None:
    """The two allowlist checks read the tree as intended: an import inside a function (not a
    type-only one), and a module of another package reached past its door."""
    package = tmp_path / "cairn"
    for name, text in {
        "session/turn.py": (
            "from typing import TYPE_CHECKING\n"
            "from cairn.agent import ToolLoop\n"  # through the door: fine
            "from cairn.agent.client import AgentClient\n"  # past the door
            "def run():\n"
            "    from cairn.memory.manager import MemoryManager\n"  # deferred
            "    if TYPE_CHECKING:\n"
            "        from cairn.tools.base import Tool\n"  # type-only: neither
        ),
        "session/__init__.py": "",
        "agent/__init__.py": "",
        "agent/client.py": "",
        "memory/manager.py": "",
        "tools/base.py": "",
    }.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    assert _function_level_imports(tmp_path) == {"cairn.memory.manager": {"cairn.session.turn"}}
    doors = _past_the_door(_package_imports(tmp_path))
    assert doors == {  # a deferred import passes a door as much as one at the top
        "cairn.agent.client": {"cairn.session.turn"},
        "cairn.memory.manager": {"cairn.session.turn"},
    }


def test_the_checks_flag_a_broken_tree(tmp_path: Path) -> None:
    """The checker itself works: a small tree with one violation of each kind is flagged."""
    package = tmp_path / "cairn"
    for name, text in {
        "memory/dream.py": "from cairn.session.events import X\n",  # up a layer, never-rule
        "tools/shell.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from cairn.agent.client import AgentClient\n"  # type-only: allowed
        ),
        "acp/agent.py": "def f():\n    from cairn.daemon import routes\n",  # front end to front end
        "session/__init__.py": "",
        "agent/client.py": "",
        "daemon/routes.py": "",
    }.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    imports = _package_imports(tmp_path)
    assert _upward(imports) == ["cairn.memory.dream:1 imports cairn.session.events"]
    assert _never(imports) == [
        "cairn.acp.agent:2 imports cairn.daemon",
        "cairn.memory.dream:1 imports cairn.session.events",
    ]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
