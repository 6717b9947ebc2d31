"""Subagent definitions: ``<folder>/**/*.md`` in Claude Code's format (Qwen Code's keys too).

Front matter: ``name`` (what ``subagent_type`` names; required) and ``description`` (when to
use it; required), ``tools`` (the tools it may use, Claude Code's names or cairn's; default:
all the parent's), ``disallowedTools`` (taken away from that set), ``model`` and ``maxTurns``.
``model``: ``inherit``, ``sonnet`` or ``opus`` mean the parent's model, ``haiku`` or ``fast``
the fast model, anything else is a model name. The body is its system prompt. Qwen Code's
``modelConfig.model`` and ``runConfig.max_turns`` are read as ``model`` and ``maxTurns``. A file
without a ``name`` is taken for notes kept beside the agents and skipped quietly; any other
problem skips it with one warning.

:data:`GENERAL_PURPOSE` is the built-in agent; a file defining ``general-purpose`` replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.extensions.files import load_each, read_extension_file, walk_files
from cairn.extensions.frontmatter import (
    FrontMatter,
    FrontMatterError,
    field_list,
    field_text,
    split_front_matter,
)
from cairn.extensions.sources import Folder

__all__ = ["GENERAL_PURPOSE", "AgentDefinition", "load_agents"]

AGENT_NAME = re.compile(r"[A-Za-z][\w-]*")
# Claude Code's model aliases name Anthropic's models, which another endpoint does not have:
# its small one stands for cairn's fast model, the others for the parent's.
_INHERITED_MODELS = frozenset({"inherit", "sonnet", "opus"})
_FAST_MODELS = frozenset({"fast", "haiku"})

GENERAL_PURPOSE_PROMPT = """\
You are a subagent of cairn, a coding agent, working on one task the main agent gave you. \
You cannot ask the user anything: work with what you have, and decide for yourself.

- Search and read the code before drawing conclusions; use the tools rather than guessing.
- Do the whole task, then stop. Do not start work the task did not ask for.
- Your final message is all the main agent sees of your work: make it a complete, concise \
report of what you found or did, with the file paths and line numbers that matter. Say what \
you could not do and why."""


@dataclass(frozen=True)
class AgentDefinition:
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


def load_agents(folder: Folder) -> tuple[list[AgentDefinition], list[str]]:
    """The agents defined in ``folder`` and a warning for each file skipped."""
    return load_each(folder, walk_files(folder.path, (".md",)), lambda path: _load(path, folder))


def _load(path: Path, folder: Folder) -> AgentDefinition | None:
    front = split_front_matter(read_extension_file(path))
    fields = front.fields
    name = front.text("name")
    if not name:
        return None  # notes kept beside the agents, as Claude Code treats them
    if AGENT_NAME.fullmatch(name) is None:
        raise FrontMatterError(
            f"its name {name!r} is not an agent name (letters, digits, - and _, starting with "
            "a letter)"
        )
    description = front.text("description")
    if not description:
        raise FrontMatterError("it has no `description` (the model needs it to choose the agent)")
    prompt = front.body.strip()
    if not prompt:
        raise FrontMatterError("its body, the agent's system prompt, is empty")
    return AgentDefinition(
        name=name,
        description=description,
        system_prompt=prompt,
        tools=field_list(fields, "tools"),
        disallowed_tools=field_list(fields, "disallowedTools") or (),
        model=_model(front),
        max_turns=_max_turns(fields),
        path=path,
        folder=folder,
    )


def _model(front: FrontMatter) -> str | None:
    value = front.text("model")
    config = front.fields.get("modelConfig")
    if value is None and isinstance(config, Mapping):
        value = field_text(config, "model")
    if value is None or value.lower() in _INHERITED_MODELS:
        return None
    return "fast" if value.lower() in _FAST_MODELS else value


def _max_turns(fields: Mapping[str, Any]) -> int | None:
    value = fields.get("maxTurns")
    run = fields.get("runConfig")
    if value is None and isinstance(run, Mapping):
        value = run.get("max_turns")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FrontMatterError("`maxTurns` must be a whole number")
    try:
        turns = int(value)
    except ValueError:
        raise FrontMatterError(f"`maxTurns` must be a whole number, not {value!r}") from None
    if turns < 1:
        raise FrontMatterError("`maxTurns` must be at least 1")
    return turns
