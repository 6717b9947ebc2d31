"""The tool registry: the tools a session offers the model, by name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cairn.llm.types import ToolDeclaration
from cairn.tools.base import Tool
from cairn.tools.permissions import canonical_tool_name

__all__ = ["ToolRegistry", "default_registry"]

MAX_SUGGESTIONS = 3  # close names offered when the model calls an unknown tool


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; a second tool with the same name is a ``ValueError``."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        """Remove the tool named ``name`` (tools that come and go: MCP servers)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def declarations(self) -> list[ToolDeclaration]:
        """What the model is told about each tool."""
        return [ToolDeclaration(t.name, t.description, t.parameters) for t in self._tools.values()]

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of the named tools (registration order kept; unknown names ignored)."""
        wanted = set(names)
        return ToolRegistry(t for name, t in self._tools.items() if name in wanted)

    def unknown_tool_message(self, name: str) -> str:
        message = (
            f'Tool "{name}" not found in registry. Tools must use the exact names that are '
            "registered."
        )
        suggestions = self.suggestions(name)
        if len(suggestions) == 1:
            return f'{message} Did you mean "{suggestions[0]}"?'
        if suggestions:
            quoted = ", ".join(f'"{s}"' for s in suggestions)
            return f"{message} Did you mean one of: {quoted}?"
        return message

    def suggestions(self, name: str) -> list[str]:
        """Up to :data:`MAX_SUGGESTIONS` registered names close to ``name``, best first."""
        found: list[tuple[int, str]] = []
        alias = canonical_tool_name(name)
        if alias != name and alias in self._tools:
            found.append((-1, alias))
        wanted = _normalise(name)
        for registered in self._tools:
            if registered == alias:
                continue
            candidate = _normalise(registered)
            distance = _levenshtein(wanted, candidate)
            contained = len(wanted) >= 3 and (wanted in candidate or candidate in wanted)
            if distance <= max(2, len(candidate) // 3) or contained:
                found.append((distance, registered))
        found.sort()
        return [registered for _, registered in found[:MAX_SUGGESTIONS]]


def _normalise(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def _levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def default_registry() -> ToolRegistry:
    """A registry of every built-in tool."""
    from cairn.tools.ask_user_question import AskUserQuestionTool
    from cairn.tools.edit import EditTool
    from cairn.tools.glob import GlobTool
    from cairn.tools.grep import GrepTool
    from cairn.tools.list_directory import ListDirectoryTool
    from cairn.tools.read_file import ReadFileTool
    from cairn.tools.shell import ShellTool
    from cairn.tools.todo_write import TodoWriteTool
    from cairn.tools.write_file import WriteFileTool

    return ToolRegistry(
        [
            ReadFileTool(),
            WriteFileTool(),
            EditTool(),
            ListDirectoryTool(),
            GlobTool(),
            GrepTool(),
            ShellTool(),
            TodoWriteTool(),
            AskUserQuestionTool(),
        ]
    )
