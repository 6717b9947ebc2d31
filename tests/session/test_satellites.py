"""No module around the session assigns into it: the satellites of ``Session`` (commands, command
and skill files, lifecycle hooks, MCP servers, rewind, titles) and the turn register through
methods (``add_turn_hook``, ``carry.add_notice``, ``client.on_compress``, ``scheduler.grant``
...), so a reader of session.py sees every change of its state from there.

Read with :mod:`ast`: in every module of ``cairn.session`` but session.py, an assignment to an
attribute (or an item) reached through a session (``session.x = ...``, ``self.session.client.x
= ...``), or a list, set or dict method that changes one in place (``session.x.append(...)``),
is a failure.
"""

from __future__ import annotations

import ast
from pathlib import Path

SESSION_PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cairn" / "session"
OWNER = "session.py"  # the one module that changes a session's own state
# Methods of the built-in containers that change them in place.
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popleft",
        "clear",
        "remove",
        "update",
        "add",
        "discard",
        "setdefault",
        "popitem",
        "sort",
        "reverse",
    }
)


def _chain(node: ast.expr) -> list[str]:
    """``self.session.client.x`` -> ["self", "session", "client", "x"] (subscripts skipped)."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        else:
            return names[::-1]


def _through_session(target: ast.expr) -> bool:
    """Whether ``target`` is a part of a session (an attribute or item past a ``session``)."""
    if not isinstance(target, ast.Attribute | ast.Subscript):
        return False
    names = _chain(target)
    return "session" in names[:-1] or (isinstance(target, ast.Subscript) and "session" in names)


def violations(source: str, module: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt | ast.expr):
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            items = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
            found += [
                f"{module}:{node.lineno} assigns {ast.unparse(item)}"
                for item in items
                if _through_session(item)
            ]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and "session" in _chain(node.func.value)
            and _chain(node.func.value)[-1] != "session"
        ):
            found.append(f"{module}:{node.lineno} changes {ast.unparse(node.func.value)} in place")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_no_satellite_assigns_into_the_session_or_its_collaborators() -> None:
    found = []
    for path in sorted(SESSION_PACKAGE.glob("*.py")):
        if path.name != OWNER:
            found += violations(path.read_text(encoding="utf-8"), path.name)
    assert found == []


def test_the_check_flags_each_kind_of_assignment() -> None:
    """The checker itself works: what the satellites did before they had methods is flagged."""
    source = """
def start(session, notice):
    session.pending_notices.append(notice)
    session.client.before_compress = hook
    session.todos = []
    session.turn_count += 1
    session.extra['x'] = 1

class Grant:
    def begin(self, rules):
        self.session.scheduler.rules = rules
        self.session.pending_context.append("context")
        self.grants = rules  # its own state: fine
        self.session.carry.add_notice(rules)  # a method: fine
        self.session.registry.register(rules)  # a method: fine
"""
    assert violations(source, "satellite.py") == [
        "satellite.py:3 changes session.pending_notices in place",
        "satellite.py:4 assigns session.client.before_compress",
        "satellite.py:5 assigns session.todos",
        "satellite.py:6 assigns session.turn_count",
        "satellite.py:7 assigns session.extra['x']",
        "satellite.py:11 assigns self.session.scheduler.rules",
        "satellite.py:12 changes self.session.pending_context in place",
    ]
