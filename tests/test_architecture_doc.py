"""docs/architecture.md matches the code: its layers are the import-graph test's, it names every
package of src/cairn, and every module it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from .test_import_graph import LAYERS, SRC

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
LAYER_ROW = re.compile(r"^\| (\d+) \| (.*?) \|", re.MULTILINE)
MODULE = re.compile(r"`([a-z_]+(?:/[a-z_]+)*\.py)`")


def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def layer_table() -> list[frozenset[str]]:
    start = doc().index("<!-- layers:")
    table = doc()[start:].split("\n\n", 1)[0]
    return [frozenset(re.findall(r"`(\w+)`", row)) for _, row in LAYER_ROW.findall(table)]


def packages() -> set[str]:
    found = {p.stem for p in SRC.joinpath("cairn").glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in SRC.joinpath("cairn").iterdir() if (p / "__init__.py").exists()}
    return found


def test_the_layers_are_the_ones_the_import_graph_test_enforces() -> None:
    assert layer_table() == list(LAYERS)


def test_every_package_is_in_the_layer_table() -> None:
    listed = set().union(*layer_table())

    assert packages() - listed == set()


def test_every_module_the_page_names_exists() -> None:
    names = {n for n in MODULE.findall(doc()) if not n.startswith("tests/")}
    tree = {p.relative_to(SRC / "cairn").as_posix() for p in SRC.joinpath("cairn").rglob("*.py")}
    short = {p.rsplit("/", 1)[-1] for p in tree}

    missing = {n for n in names if n not in tree and n.rsplit("/", 1)[-1] not in short}
    assert missing == set()
