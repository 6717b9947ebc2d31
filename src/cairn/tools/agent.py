"""``agent``: hand a task to a subagent, which works on it alone and reports back.

The subagent runs on the same runtime as the session that calls it, with its own conversation
and a subset of the session's tools; its final answer is this call's result. Several ``agent``
calls in one model response run at the same time (the scheduler runs consecutive calls of a
``concurrent`` tool together; the runner bounds how many subagents work at once).

How a subagent runs is not this module's: the session passes a :class:`SubagentRunner`
(:mod:`cairn.extensions.subagents`), which the tool layer cannot import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cairn.tools.arguments import require_str
from cairn.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

__all__ = ["AGENT_TOOL", "AgentTool", "AgentType", "SubagentRequest", "SubagentRunner"]

AGENT_TOOL = ToolName.AGENT


class AgentType(Value):
    """A subagent the model may ask for, as the tool's description lists it."""

    name: str
    description: str


class SubagentRequest(Value):
    description: str  # three to five words, shown to people
    prompt: str  # the whole task: the subagent sees nothing else of the conversation
    subagent_type: str


class SubagentRunner(Protocol):
    def agent_types(self) -> Sequence[AgentType]:
        """The subagents that can run now."""
        ...

    async def run(self, request: SubagentRequest, ctx: ToolContext) -> ToolResult:
        """Run one subagent to its end; its answer (or why it has none) as the result."""
        ...


_DESCRIPTION = """\
Launch a subagent to carry out a task on its own and report back. It works in its own \
conversation with its own tools, and sees nothing of this conversation but your prompt, so \
write the prompt as a complete, self-contained task: what to do, what you know, which files \
matter, what to report. Its final message comes back as this tool's result; the user does not \
see it, so tell them what matters.

Use a subagent for a search that may take several rounds, or to work on independent parts of a \
task at the same time: send several agent calls in one response and they run concurrently. Do \
not use one for something a single read_file or grep_search would answer.

Available subagent types (subagent_type):
"""


class AgentTool(BuiltinTool):
    name = AGENT_TOOL
    kind = ToolKind.OTHER
    concurrent = True  # consecutive agent calls of one response run together

    def __init__(self, runner: SubagentRunner) -> None:
        self._runner = runner

    @property
    def description(self) -> str:  # type: ignore[override]
        listed = "\n".join(f"- {a.name}: {a.description}" for a in self._runner.agent_types())
        return _DESCRIPTION + listed

    @property
    def parameters(self) -> Mapping[str, Any]:  # type: ignore[override]
        names = [a.name for a in self._runner.agent_types()]
        return {
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3 to 5 word) description of the task.",
                },
                "prompt": {"type": "string", "description": "The task for the subagent."},
                "subagent_type": {
                    "type": "string",
                    "enum": names,
                    "description": "Which subagent to run (see the list above).",
                },
            },
            "required": ["description", "prompt", "subagent_type"],
        }

    def title(self, args: Mapping[str, Any]) -> str:
        kind = args.get("subagent_type") or "agent"
        description = args.get("description") or ""
        return f"{kind}: {description}" if description else str(kind)

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        request = SubagentRequest(
            description=require_str(args, "description"),
            prompt=require_str(args, "prompt"),
            subagent_type=require_str(args, "subagent_type").strip(),
        )
        known = [a.name for a in self._runner.agent_types()]
        if request.subagent_type not in known:
            raise ToolError(
                f'There is no subagent type "{request.subagent_type}". '
                f"Use one of: {', '.join(known)}."
            )
        return await self._runner.run(request, ctx)
