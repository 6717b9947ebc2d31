"""What a subagent is (:class:`AgentDefinition`) and the built-in one (:data:`GENERAL_PURPOSE`).

Apart from the file parser (:mod:`cairn.extensions.agents`), which is imported only when an
agents folder exists: every session offers the built-in agent.
"""

from __future__ import annotations

from pathlib import Path

from cairn.config.extension_folders import Folder
from cairn.values import Value

__all__ = ["GENERAL_PURPOSE", "AgentDefinition"]

GENERAL_PURPOSE_PROMPT = """\
You are a subagent of cairn, a coding agent, working on one task the main agent gave you. \
You cannot ask the user anything: work with what you have, and decide for yourself.

- Search and read the code before drawing conclusions; use the tools rather than guessing.
- Do the whole task, then stop. Do not start work the task did not ask for.
- Your final message is all the main agent sees of your work: make it a complete, concise \
report of what you found or did, with the file paths and line numbers that matter. Say what \
you could not do and why."""


class AgentDefinition(Value):
    """What a subagent is: its name, when to use it, its tools, model, limit and prompt."""

    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None  # None: every tool the parent may give
    disallowed_tools: tuple[str, ...] = ()
    model: str | None = None  # None: the parent's; "fast": the fast model
    max_turns: int | None = None
    path: Path | None = None  # None: built in
    folder: Folder | None = None

    @property
    def where(self) -> str:
        if self.path is None or self.folder is None:
            return "built in"
        return self.folder.shown(self.path)


GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description=(
        "General-purpose agent for researching complex questions, searching for code and "
        "carrying out multi-step tasks on its own. Use it when a search may take several "
        "rounds, or to work on independent parts of a task in parallel."
    ),
    system_prompt=GENERAL_PURPOSE_PROMPT,
)
