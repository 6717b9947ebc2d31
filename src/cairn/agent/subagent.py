"""A restricted background agent: the memory extractor and the dreamer run on this.

It reuses the agent client and the tool scheduler with a restricted tool set and a tool context
whose writable roots are limited. It never asks anyone: edits inside the allowed roots run,
read-only shell commands run, anything needing confirmation is refused with a message the agent
sees (approval mode ``auto-edit``, non-interactive).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.agent.client import AgentClient, AgentFinished, AgentLimit, AgentLoop, SendKind
from cairn.config.settings import PermissionsSettings, Settings
from cairn.content import Content, Part, Text
from cairn.llm.types import Provider
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.registry import ToolRegistry
from cairn.tools.scheduler import ToolScheduler
from cairn.vocabulary.events import AssistantMessage, EventSink, SessionEvent
from cairn.vocabulary.interaction import NonInteractive

__all__ = ["SubagentResult", "run_subagent"]


@dataclass
class SubagentResult:
    status: str  # "completed" | "max_turns" | "timeout" | "loop" | "cancelled"
    text: str = ""  # the agent's last answer
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
    result = SubagentResult("completed")
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
    client.model_override = model
    if scheduler is None:
        scheduler = ToolScheduler(
            registry=registry,
            rules=PermissionRules.from_settings(PermissionsSettings()),
            frontend=NonInteractive(),
            approval_mode=lambda: "auto-edit",
        )

    async def ignore(event: SessionEvent) -> None:
        return None

    emit: EventSink = events or ignore

    async def loop() -> None:
        parts: list[Part] = [Text(task)]
        kind = SendKind.USER_QUERY
        while result.turns < max_turns:
            result.turns += 1
            finished: AgentFinished | None = None
            async for event in client.send(parts, kind=kind, abort=ctx.abort):
                if isinstance(event, AgentFinished):
                    finished = event
                elif isinstance(event, AgentLoop):
                    result.status = "loop"
                    return
                elif isinstance(event, AgentLimit):
                    result.status = "max_turns"
                    return
            if finished is None:
                return
            result.text = finished.text or result.text
            if events is not None:
                await emit(
                    AssistantMessage(
                        finished.text, "", finished.calls, finished.usage, client.model
                    )
                )
            if not finished.calls:
                more = await on_answer(result.text) if on_answer is not None else None
                if not more:
                    return
                parts, kind = [Text(more)], SendKind.CONTINUATION
                continue
            outcomes = await scheduler.run(list(finished.calls), ctx, emit)
            result.tool_calls += len(outcomes)
            for outcome in outcomes:
                diff = outcome.result.diff if outcome.result is not None else None
                if (
                    outcome.status == "completed"
                    and diff is not None
                    and diff.path not in result.files_written
                ):
                    result.files_written.append(diff.path)
            parts = [o.response for o in outcomes]
            kind = SendKind.TOOL_RESULT
        result.status = "max_turns"

    try:
        if timeout and timeout > 0:
            async with asyncio.timeout(timeout):
                await loop()
        else:
            await loop()
    except TimeoutError:
        result.status = "timeout"
    result.duration_s = time.monotonic() - started
    return result
