"""Commands, skills and subagent definitions read from files, in Claude Code's and Qwen Code's
formats, so a setup carried from those tools works here.

- :mod:`~cairn.extensions.commands`: ``/name`` prompts from ``commands/`` folders.
- :mod:`~cairn.extensions.skills`: ``SKILL.md`` folders the model loads when they apply.
- :mod:`~cairn.extensions.agents`: subagent definitions for the ``agent`` tool.
- :mod:`~cairn.extensions.catalog`: all three for one project, read again when files change.
- :mod:`~cairn.extensions.templates`: how a file's body becomes a prompt.

The names are loaded on first use: a session that never looks at extension files pays nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.config.extension_folders import Folder
    from cairn.extensions.agent_definition import GENERAL_PURPOSE, AgentDefinition
    from cairn.extensions.catalog import Catalog, CatalogState
    from cairn.extensions.commands import CommandFile
    from cairn.extensions.skills import Skill
    from cairn.extensions.templates import Expansion, ShellStep, expand_template

__all__ = [
    "GENERAL_PURPOSE",
    "AgentDefinition",
    "Catalog",
    "CatalogState",
    "CommandFile",
    "Expansion",
    "Folder",
    "ShellStep",
    "Skill",
    "expand_template",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GENERAL_PURPOSE": "agent_definition",
        "AgentDefinition": "agent_definition",
        "Catalog": "catalog",
        "CatalogState": "catalog",
        "CommandFile": "commands",
        "Skill": "skills",
        "Folder": "cairn.config.extension_folders",
        "Expansion": "templates",
        "ShellStep": "templates",
        "expand_template": "templates",
    },
    __all__,
)
