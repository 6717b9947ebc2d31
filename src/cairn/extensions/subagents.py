"""Running subagents: the ``agent`` tool's work, on the runtime of the session that calls it.

A subagent is a conversation of its own: its definition's system prompt (with the project's
context files), the environment summary, then the task the model wrote. It may use the tools
its definition names among the session's own, never ``agent`` (no subagents of subagents) or
``ask_user_question`` (it cannot talk to the user). Its tool calls go through a scheduler
derived from the session's: the same permission rules, approval mode, hooks, checkpoints and
"allow always" answers, and the same person approves, with the agent's name in the question.
It stops when it answers without calling a tool, or after its turn limit; its final answer is
the ``agent`` call's result. It never begins Recall and never schedules Extract: the parent
turn's Extract sees the answer in the parent's conversation.

What it does is reported as :class:`~cairn.vocabulary.events.SubagentUpdate` events carrying
the parent call's id, which every front end shows under that call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from cairn.debug_log import get_logger
from cairn.ids import random_hex
from cairn.tools.agent import AgentType, SubagentRequest
from cairn.tools.base import ToolContext, ToolResult
from cairn.vocabulary.events import (
    AssistantMessage,
    Notice,
    SessionEvent,
    SubagentUpdate,
    ToolCallStart,
    ToolCallUpdate,
)
from cairn.vocabulary.tool_calls import SubagentReport
from cairn.vocabulary.tool_names import ToolName, canonical_tool_name

if TYPE_CHECKING:
    from pathlib import Path

    from cairn.config.settings import Settings
    from cairn.extensions.agent_definition import AgentDefinition
    from cairn.hooks.runner import HookRunner
    from cairn.llm.types import Provider
    from cairn.tools.registry import ToolRegistry
    from cairn.tools.scheduler import ToolScheduler

__all__ = ["EXCLUDED_TOOLS", "SUBAGENT_PURPOSE", "SubagentHost", "Subagents", "subagent_tools"]

SUBAGENT_PURPOSE = "subagent"  # X-Cairn-Purpose of a subagent's requests
# Never given to a subagent.
EXCLUDED_TOOLS = frozenset({ToolName.AGENT, ToolName.ASK_USER_QUESTION})
NO_ANSWER = "(The subagent ended without a final answer.)"
MAX_STOP_BLOCKS = 8  # times SubagentStop hooks may keep one subagent working
_log = get_logger("SUBAGENT")


class SubagentHost(Protocol):
    """What a session gives the subagents it runs."""

    @property
    def session_id(self) -> str: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def provider(self) -> Provider: ...

    def parent_model(self) -> str:
        """The model the session's turn uses now."""
        ...

    def parent_tools(self) -> ToolRegistry: ...

    def parent_scheduler(self) -> ToolScheduler: ...

    def parent_hooks(self) -> HookRunner | None: ...

    def approval_mode(self) -> str:
        """The session's approval mode now."""
        ...

    def agent_definitions(self) -> Sequence[AgentDefinition]: ...

    def subagent_context(self) -> str:
        """What a subagent's system prompt says about the project (its context files ...)."""
        ...


class Subagents:
    """The :class:`~cairn.tools.agent.SubagentRunner` of one session."""

    def __init__(self, host: SubagentHost) -> None:
        self.host = host
        self._slots: asyncio.Semaphore | None = None

    def agent_types(self) -> list[AgentType]:
        return [AgentType(a.name, a.description) for a in self.host.agent_definitions()]

    async def run(self, request: SubagentRequest, ctx: ToolContext) -> ToolResult:
        host = self.host
        definition = next(
            (a for a in host.agent_definitions() if a.name == request.subagent_type), None
        )
        if definition is None:
            return ToolResult(error=f'There is no subagent type "{request.subagent_type}".')
        available = host.parent_tools().names()
        names = subagent_tools(available, definition.tools, definition.disallowed_tools)
        if not names:
            wanted = ", ".join(definition.tools or ()) or "none"
            return ToolResult(
                error=f"The {definition.name} subagent would have no tools: none of its tools "
                f"({wanted}) is available here. Fix `tools` in {definition.where}."
            )
        async with self._semaphore():
            return await self._run(definition, request, names, ctx)

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:  # made on first use, inside the running event loop
            self._slots = asyncio.Semaphore(self.host.settings.agents.max_concurrent)
        return self._slots

    async def _run(
        self,
        definition: AgentDefinition,
        request: SubagentRequest,
        names: Sequence[str],
        ctx: ToolContext,
    ) -> ToolResult:
        from cairn.agent.prompt import startup_context
        from cairn.agent.subagent import run_subagent
        from cairn.llm.errors import ProviderError

        host = self.host
        agent_id = f"agent-{random_hex(12)}"
        registry = host.parent_tools().subset(names)
        scheduler = host.parent_scheduler().derived(
            registry=registry, hooks=host.parent_hooks(), label=definition.name
        )
        parent_events = ctx.events
        seen = _SubagentSteps()

        async def report(event: SessionEvent) -> None:
            seen.note(event)
            if parent_events is not None:
                await parent_events(SubagentUpdate(ctx.call_id, agent_id, definition.name, event))

        on_answer = self._subagent_stop(agent_id, definition.name, report)
        settings = host.settings
        history = [] if settings.model.skip_startup_context else startup_context(host.cwd)
        max_turns = definition.max_turns or settings.agents.max_turns
        _log.info(f"{agent_id} ({definition.name}) starts: {request.description}")
        try:
            result = await run_subagent(
                provider=host.provider,
                settings=settings,
                purpose=SUBAGENT_PURPOSE,
                system_prompt=self._system_prompt(definition),
                task=request.prompt,
                registry=registry,
                ctx=ctx,
                history=history,
                max_turns=max_turns,
                timeout=None,
                session_id=host.session_id,
                events=report,
                scheduler=scheduler,
                model=self._model(definition),
                on_answer=on_answer,
            )
        except ProviderError as exc:
            return ToolResult(error=f"The {definition.name} subagent failed: {exc}")
        _log.info(
            f"{agent_id} ends: {result.status}, {result.turns} requests, "
            f"{result.tool_calls} tool calls, {result.duration_s:.1f} s"
        )
        text = result.text.strip() or NO_ANSWER
        if result.status == "max_turns":
            text = (
                f"(The subagent stopped at its limit of {max_turns} model requests before it "
                f"finished; its last answer follows.)\n\n{text}"
            )
        elif result.status == "loop":
            text = f"(The subagent was stopped: it repeated itself.)\n\n{text}"
        elif result.status == "cut":
            text = f"(The subagent's answer was cut at its output bound.)\n\n{text}"
        elif result.status == "stopped":
            text = f"(A hook stopped the subagent: {result.stop_reason}.)\n\n{text}"
        # the answer is what people see too, under the subagent's steps
        return ToolResult(output=text, subagent=seen.report(definition.name))

    def _subagent_stop(
        self, agent_id: str, agent_type: str, report: Callable[[SessionEvent], Awaitable[None]]
    ) -> Callable[[str], Awaitable[str | None]] | None:
        """``SubagentStop`` hooks, asked each time the subagent would stop: a block keeps it
        working with the reason as its next message (at most :data:`MAX_STOP_BLOCKS` times)."""
        hooks = self.host.parent_hooks()
        if hooks is None or not hooks.has("SubagentStop"):
            return None
        blocks = 0

        async def on_answer(text: str) -> str | None:
            nonlocal blocks
            if blocks >= MAX_STOP_BLOCKS:
                return None
            outcome = await hooks.subagent_stop(
                agent_id=agent_id,
                agent_type=agent_type,
                last_assistant_message=text,
                stop_hook_active=blocks > 0,
                permission_mode=self.host.approval_mode(),
            )
            for warning in outcome.warnings:
                await report(Notice("warning", warning, "hook"))
            if outcome.stop or not outcome.blocked:
                return None
            blocks += 1
            return outcome.reason or "No reason provided"

        return on_answer

    def _system_prompt(self, definition: AgentDefinition) -> str:
        context = self.host.subagent_context().strip()
        if not context:
            return definition.system_prompt
        return f"{definition.system_prompt}\n\n---\n\n{context}"

    def _model(self, definition: AgentDefinition) -> str:
        host = self.host
        if definition.model is None:
            return host.parent_model()
        if definition.model == "fast":
            return host.settings.fast_model or host.provider.fast_model or host.parent_model()
        return definition.model


def subagent_tools(
    available: Iterable[str], tools: Sequence[str] | None, disallowed: Sequence[str] = ()
) -> list[str]:
    """The tools a subagent gets: ``available`` minus :data:`EXCLUDED_TOOLS` and ``disallowed``,
    narrowed to ``tools`` when given. Names may be Claude Code's (``Read``, ``Bash``) or
    cairn's; ``mcp__server`` and ``mcp__server__*`` name every tool of an MCP server, ``*`` all.
    """
    pool = [name for name in available if name not in EXCLUDED_TOOLS]
    pool = [name for name in pool if not any(_names(p, name) for p in disallowed)]
    if tools is None:
        return pool
    return [name for name in pool if any(_names(p, name) for p in tools)]


def _names(pattern: str, name: str) -> bool:
    pattern = pattern.strip()
    if pattern == "*":
        return True
    if pattern.startswith("mcp__"):
        if pattern.endswith("*"):
            return name.startswith(pattern[:-1])
        return name == pattern or name.startswith(pattern + "__")
    return canonical_tool_name(pattern) == name


class _SubagentSteps:
    """What a subagent did, as front ends show it under its call (kept with the result)."""

    def __init__(self) -> None:
        self.steps: dict[str, list[str]] = {}  # call id -> [title, status]
        self.answers: list[str] = []

    def note(self, event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            self.steps[event.call_id] = [event.title or event.name, "pending"]
        elif isinstance(event, ToolCallUpdate) and event.call_id in self.steps:
            self.steps[event.call_id][1] = event.status
        elif isinstance(event, AssistantMessage) and event.text.strip():
            self.answers.append(event.text.strip())

    def report(self, agent_type: str) -> SubagentReport:
        steps = tuple((title, status) for title, status in self.steps.values())
        return SubagentReport(agent_type, steps, tuple(self.answers))
