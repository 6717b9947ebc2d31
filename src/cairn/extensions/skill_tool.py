"""The ``skill`` tool: the model loads a skill's instructions when a task matches it.

The system prompt lists each skill's name and description only (:func:`skills_section`); the
tool returns the whole ``SKILL.md`` body, with its arguments put in, and names the skill's other
files so the model can read the ones it needs with ``read_file``. How a skill is loaded (its
shell steps run, its folder made readable) is the session's: it passes ``load``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.tools.arguments import optional_str, require_str
from cairn.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:  # a project without skills never imports their parser
    from cairn.extensions.skills import Skill

__all__ = ["SKILL_TOOL", "SkillTool", "skill_text", "skills_section"]

SKILL_TOOL = ToolName.SKILL

_PARAMETERS = object_schema(
    {
        "skill": string_property("The name of the skill, as listed."),
        "args": string_property(
            "Optional arguments for the skill (what the user asked it to work on)."
        ),
    },
    required=["skill"],
)

Loader = Callable[["Skill", str, ToolContext], Awaitable[ToolResult]]


class SkillTool(BuiltinTool):
    name = SKILL_TOOL
    description = (
        "Load a skill: its instructions for a kind of task, and the files that come with it. "
        "When the user's task matches a skill listed in the system prompt, load it before you "
        "start and follow it. Load each skill once per conversation; its instructions stay."
    )
    parameters = _PARAMETERS
    kind = ToolKind.READ

    def __init__(self, skills: Callable[[], Sequence[Skill]], load: Loader) -> None:
        self._skills = skills
        self._load = load

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Load skill {args.get('skill', '')}".strip()

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        name = require_str(args, "skill").strip().lstrip("/")
        skills = [s for s in self._skills() if s.model_invocable]
        skill = next((s for s in skills if name in (s.name, s.title)), None)
        if skill is None:
            listed = ", ".join(s.name for s in skills) or "none"
            raise ToolError(f'There is no skill named "{name}". Available skills: {listed}.')
        return await self._load(skill, optional_str(args, "args") or "", ctx)


def skill_text(skill: Skill, body: str) -> str:
    """What the model reads when a skill is loaded: where it is, its body, its other files."""
    lines = [f'Skill "{skill.name}" (folder: {skill.directory}):', "", body.strip()]
    files = skill.other_files()
    if files:
        lines += [
            "",
            "Other files in this skill's folder (read them with read_file when the "
            "instructions call for them):",
            *(f"- {skill.directory / f}" for f in files),
        ]
    return "\n".join(lines)


def skills_section(skills: Sequence[Skill]) -> str:
    """The system prompt's list of the skills the model may load ("" when there are none)."""
    listed = [s for s in skills if s.model_invocable]
    if not listed:
        return ""
    lines = [
        "# Skills",
        "Skills are instructions and files for particular kinds of tasks. When a task matches "
        "a skill below, load it with the `skill` tool before you start, and follow it.",
        "",
    ]
    lines += [f"- {s.name}: {s.listing}" for s in listed]
    return "\n".join(lines)
