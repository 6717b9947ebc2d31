"""The one tool loop: the main turn and every subagent (Extract and Dream included) run on it.

A run sends a request, streams the answer, runs the calls the answer makes and sends their
responses back, until the model answers without calling a tool and nothing keeps it going. It
ends early at its request cap, at a limit of the agent client (``model.maxSessionTurns``,
``model.sessionTokenLimit``), when loop detection fires, when an answer was cut at its output
bound or withheld by a content filter (its calls, maybe incomplete, are answered as not run),
when the user declines a call, or when a hook said ``continue: false``. What differs between a
main turn and a subagent (what it shows, how its calls run, what keeps it going after an
answer, what joins a request at its final send point) is its :class:`LoopDriver`'s; how the
loop ends is :class:`LoopEnd`, read from :attr:`ToolLoop.end`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from cairn.agent.client import AgentClient, AgentFinished, AgentLimit, AgentLoop, SendKind
from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text

if TYPE_CHECKING:
    from typing import Protocol

    from cairn.abort import AbortSignal
    from cairn.agent.client import AgentEvent
    from cairn.agent.loop_detection import LoopInfo
    from cairn.llm.types import Usage
    from cairn.tools.scheduler import ToolOutcome

    class LoopDriver(Protocol):
        """What one kind of run does at each point of the loop."""

        async def at_send_point(self, parts: list[Part]) -> list[Part]:
            """The request's parts once every gate let it through, right before it is sent."""
            ...

        async def on_event(self, event: AgentEvent) -> None:
            """Something streamed (text, reasoning, a retry reset, a compression)."""
            ...

        async def on_answer(self, answer: AgentFinished) -> None:
            """A whole answer arrived (its calls are run next, if it has any)."""
            ...

        async def run_tools(self, calls: list[FunctionCall]) -> list[ToolOutcome]:
            """Run one batch of calls; one outcome per call, in order."""
            ...

        def steering(self) -> list[Part]:
            """What goes to the model with the next tool responses (text typed meanwhile)."""
            ...

        async def after_stop(self, answer: AgentFinished) -> list[Part] | None:
            """The model answered without calls: the parts that keep it going, or ``None``."""
            ...


__all__ = ["CUT_CALL_ERROR", "LOOP_STOP_NOTE", "LoopEnd", "LoopEndKind", "ToolLoop"]

LOOP_STOP_NOTE = (
    "System: this turn was stopped because the model repeated itself (loop protection). "
    "Try a different approach on the next turn."
)
LOOP_SKIPPED_ERROR = "Skipped: loop protection stopped the turn."
CUT_CALL_ERROR = (  # a call in an answer cut at its output bound: it may be incomplete
    "Not run: your answer was cut at its output bound before this call was complete."
)
NORMAL_ENDS = ("stop", "tool_calls")  # finish reasons of an answer the model meant to give
CUT_ENDS = ("length", "filter")  # the output bound, a content filter: the answer is not whole


LoopEndKind: TypeAlias = Literal[
    "answered", "max_requests", "limit", "loop", "cut", "rejected", "hook_stopped"
]


class LoopEnd:
    """How a run ended (plain strings: an enum class would cost every start for nothing)."""

    ANSWERED: Final = "answered"  # the model answered without calls and nothing kept it going
    MAX_REQUESTS: Final = "max_requests"  # the loop's own request cap
    LIMIT: Final = "limit"  # a limit of the agent client (see ToolLoop.limit)
    LOOP: Final = "loop"  # loop detection (see ToolLoop.loop_info)
    CUT: Final = "cut"  # the answer was cut (ToolLoop.finish_reason: length or filter)
    REJECTED: Final = "rejected"  # the user declined a call: control goes back to them
    HOOK_STOPPED: Final = "hook_stopped"  # a PostToolUse hook said `continue: false`


class ToolLoop:
    """One run of an agent client through requests and tool calls (see the module docstring).

    Its counters stay readable after the run, also when it was cancelled."""

    def __init__(
        self,
        client: AgentClient,
        driver: LoopDriver,
        *,
        max_requests: int,
        stop_on_rejection: bool = True,
    ) -> None:
        self.client = client
        self.driver = driver
        self.max_requests = max_requests
        self.stop_on_rejection = stop_on_rejection  # False: the model hears the refusal instead
        self.requests = 0
        self.tool_calls = 0
        self.end: LoopEndKind | None = None
        self.limit: AgentLimit | None = None
        self.loop_info: LoopInfo | None = None
        self.loop_usage: Usage | None = None  # the answer loop detection cut (paid for)
        self.finish_reason: str | None = None  # the last answer's, when it was not a normal end
        self.hook_stop: str | None = None

    async def run(self, parts: Sequence[Part], kind: SendKind, abort: AbortSignal) -> LoopEndKind:
        self.end = await self._run(list(parts), kind, abort)
        return self.end

    async def _run(self, parts: list[Part], kind: SendKind, abort: AbortSignal) -> LoopEndKind:
        while True:
            if self.requests >= self.max_requests:
                return LoopEnd.MAX_REQUESTS
            self.requests += 1
            answer = await self._request(parts, kind, abort)
            if answer is None:
                if self.loop_info is not None:
                    return LoopEnd.LOOP
                return LoopEnd.LIMIT if self.limit is not None else LoopEnd.ANSWERED
            await self.driver.on_answer(answer)
            if answer.reason not in NORMAL_ENDS:
                self.finish_reason = answer.reason  # the driver says so; a cut ends the run
                if answer.reason in CUT_ENDS:
                    self._answer_cut_calls(answer.calls)
                    return LoopEnd.CUT
            if answer.calls:
                outcomes = await self.driver.run_tools(list(answer.calls))
                self.tool_calls += len(outcomes)
                responses: list[Part] = [o.response for o in outcomes]
                if self.stop_on_rejection and any(o.status == "rejected" for o in outcomes):
                    self.client.history.append(Content("user", responses))  # kept, not sent
                    return LoopEnd.REJECTED
                stopped = next((o.stop_reason for o in outcomes if o.stop_reason), None)
                if stopped is not None:
                    self.client.history.append(Content("user", responses))
                    self.hook_stop = stopped
                    return LoopEnd.HOOK_STOPPED
                parts, kind = [*responses, *self.driver.steering()], SendKind.TOOL_RESULT
                continue
            more = await self.driver.after_stop(answer)
            if more is None:
                return LoopEnd.ANSWERED
            parts, kind = more, SendKind.CONTINUATION

    async def _request(
        self, parts: list[Part], kind: SendKind, abort: AbortSignal
    ) -> AgentFinished | None:
        """One request; its answer, or ``None`` when a limit or loop detection ended the run."""
        send = self.client.send(
            parts, kind=kind, abort=abort, at_send_point=self.driver.at_send_point
        )
        async with aclosing(send) as events:
            async for event in events:
                if isinstance(event, AgentFinished):
                    return event
                if isinstance(event, AgentLimit):
                    self.limit = event
                    return None
                if isinstance(event, AgentLoop):
                    self.loop_info, self.loop_usage = event.info, event.usage
                    self._answer_skipped_calls()
                    return None
                await self.driver.on_event(event)
        return None

    def _answer_cut_calls(self, calls: Sequence[FunctionCall]) -> None:
        """The calls of a cut answer are not run (they may be incomplete): answered so."""
        if calls:
            cut: list[Part] = [
                FunctionResponse(c.id, c.name, {"error": CUT_CALL_ERROR}) for c in calls
            ]
            self.client.history.append(Content("user", cut))

    def _answer_skipped_calls(self) -> None:
        """Loop detection cut the answer: its calls are answered as skipped, and the model is
        told why the turn stopped, so the conversation stays well formed for the next one."""
        history = self.client.history
        skipped: list[Part] = [
            FunctionResponse(c.id, c.name, {"error": LOOP_SKIPPED_ERROR})
            for c in history.dangling_calls()
        ]
        history.append(Content("user", [*skipped, Text(LOOP_STOP_NOTE)]))
