"""Subagent definitions: ``<folder>/**/*.md`` in Claude Code's format (Qwen Code's keys too).

Front matter: ``name`` (what ``subagent_type`` names; required) and ``description`` (when to
use it; required), ``tools`` (the tools it may use, Claude Code's names or cairn's; default:
all the parent's), ``disallowedTools`` (taken away from that set), ``model`` and ``maxTurns``.
``model``: ``inherit``, ``sonnet`` or ``opus`` mean the parent's model, ``haiku`` or ``fast``
the fast model, anything else is a model name. The body is its system prompt. Qwen Code's
``modelConfig.model`` and ``runConfig.max_turns`` are read as ``model`` and ``maxTurns``. A file
without a ``name`` is taken for notes kept beside the agents and skipped quietly; any other
problem skips it with one warning.

:data:`~cairn.extensions.agent_definition.GENERAL_PURPOSE` is the built-in agent; a file defining
``general-purpose`` replaces it. This parser is imported only when an agents folder exists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.config.extension_files import load_each, read_extension_file, walk_files
from cairn.config.extension_folders import Folder
from cairn.config.frontmatter import (
    FrontMatter,
    FrontMatterError,
    field_list,
    field_text,
    split_front_matter,
)
from cairn.extensions.agent_definition import AgentDefinition

__all__ = ["load_agents"]

AGENT_NAME = re.compile(r"[A-Za-z][\w-]*")
# Claude Code's model aliases name Anthropic's models, which another endpoint does not have:
# its small one stands for cairn's fast model, the others for the parent's.
_INHERITED_MODELS = frozenset({"inherit", "sonnet", "opus"})
_FAST_MODELS = frozenset({"fast", "haiku"})


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
