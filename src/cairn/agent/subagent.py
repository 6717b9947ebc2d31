"""A restricted background agent: the memory extractor and the dreamer run on this.

It runs the one tool loop (:mod:`cairn.agent.loop`) with a restricted tool set and a tool
context whose writable roots are limited. It never asks anyone: edits inside the allowed roots
run, read-only shell commands run, anything needing confirmation is refused with a message the
agent sees (approval mode ``auto-edit``, non-interactive).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.agent.client import AgentClient, AgentEvent, AgentFinished, SendKind
from cairn.agent.loop import LoopEnd, ToolLoop
from cairn.config.settings import PermissionsSettings, Settings
from cairn.content import Content, FunctionCall, Part, Text
from cairn.llm.types import Provider
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.registry import ToolRegistry
from cairn.tools.scheduler import ToolOutcome, ToolScheduler
from cairn.vocabulary.events import AssistantMessage, EventSink
from cairn.vocabulary.interaction import NonInteractive

__all__ = ["SubagentResult", "run_subagent"]

# How the loop's end reads in a subagent's result.
_STATUS = {
    LoopEnd.ANSWERED: "completed",
    LoopEnd.REJECTED: "completed",
    LoopEnd.MAX_REQUESTS: "max_turns",
    LoopEnd.LIMIT: "max_turns",
    LoopEnd.LOOP: "loop",
    LoopEnd.CUT: "cut",
    LoopEnd.HOOK_STOPPED: "stopped",
}


@dataclass
class SubagentResult:
    status: str  # "completed" | "max_turns" | "timeout" | "loop" | "cut" | "stopped" (a hook)
    text: str = ""  # the agent's last answer
    stop_reason: str | None = None  # why a hook stopped it (PostToolUse `continue: false`)
    files_written: list[Path] = field(default_factory=list)
    tool_calls: int = 0
    turns: int = 0
    duration_s: float = 0.0


async def run_subagent(
    *,
    provider: Provider,
    settings: Settings,
    purpose: str,
    system_prompt: str,
    task: str,
    registry: ToolRegistry,
    ctx: ToolContext,
    history: Sequence[Content] = (),
    max_turns: int = 5,
    timeout: float | None = 120.0,
    session_id: str = "",
    events: EventSink | None = None,
    scheduler: ToolScheduler | None = None,
    model: str | None = None,
    on_answer: Callable[[str], Awaitable[str | None]] | None = None,
) -> SubagentResult:
    """Run the agent until it answers without tool calls, or a limit stops it.

    ``events`` receives the tool-call events (start, progress, end) and each whole answer
    (:class:`AssistantMessage`), e.g. to show progress. ``scheduler`` runs its tool calls
    (default: nobody is asked, edits are allowed, the memory agents' way); ``model`` is the
    model to ask (default: the provider's). ``on_answer`` sees each final answer and may return
    a message that keeps the agent working (a ``SubagentStop`` hook).
    """
    started = time.monotonic()
    restricted = settings.model_copy(deep=True)
    restricted.model.max_session_turns = -1
    restricted.model.chat_compression.context_percentage_threshold = 0
    client = AgentClient(
        provider=provider,
        settings=restricted,
        session_id=session_id,
        system_prompt=system_prompt,
        tools=registry.declarations,
        history=history,
        recall=None,
        purpose=purpose,
    )
    client.override_model(model)
    if scheduler is None:
        scheduler = ToolScheduler(
            registry=registry,
            rules=PermissionRules.from_settings(PermissionsSettings()),
            frontend=NonInteractive(),
            approval_mode=lambda: "auto-edit",
        )
    driver = _Subagent(client, scheduler, ctx, events, on_answer)
    # A declined call is an answer the subagent hears, not the end of it.
    loop = ToolLoop(client, driver, max_requests=max_turns, stop_on_rejection=False)
    result = driver.result
    try:
        async with asyncio.timeout(timeout if timeout and timeout > 0 else None):
            result.status = _STATUS[await loop.run([Text(task)], SendKind.USER_QUERY, ctx.abort)]
    except TimeoutError:
        result.status = "timeout"
    result.stop_reason = loop.hook_stop
    result.turns = loop.requests
    result.tool_calls = loop.tool_calls
    result.duration_s = time.monotonic() - started
    return result


class _Subagent:
    """The subagent's side of the tool loop: it shows only whole answers and tool calls."""

    def __init__(
        self,
        client: AgentClient,
        scheduler: ToolScheduler,
        ctx: ToolContext,
        events: EventSink | None,
        on_answer: Callable[[str], Awaitable[str | None]] | None,
    ) -> None:
        self.client = client
        self.scheduler = scheduler
        self.ctx = ctx
        self.events = events
        self.on_answer_hook = on_answer
        self.result = SubagentResult("completed")

    async def at_send_point(self, parts: list[Part]) -> list[Part]:
        return parts

    async def on_event(self, event: AgentEvent) -> None:
        return None

    async def on_answer(self, answer: AgentFinished) -> None:
        self.result.text = answer.text or self.result.text
        if self.events is not None:
            await self.events(
                AssistantMessage(answer.text, "", answer.calls, answer.usage, self.client.model)
            )

    async def run_tools(self, calls: list[FunctionCall]) -> list[ToolOutcome]:
        outcomes = await self.scheduler.run(calls, self.ctx, self.events or _ignore)
        written = self.result.files_written
        for outcome in outcomes:
            diff = outcome.result.diff if outcome.result is not None else None
            if outcome.status == "completed" and diff is not None and diff.path not in written:
                written.append(diff.path)
        return outcomes

    def steering(self) -> list[Part]:
        return []

    async def after_stop(self, answer: AgentFinished) -> list[Part] | None:
        if self.on_answer_hook is None:
            return None
        more = await self.on_answer_hook(self.result.text)
        return [Text(more)] if more else None


async def _ignore(event: object) -> None:
    return None
