"""One logical turn of a session, the same for every front end, in four named phases.

1. **prepare**: the turn is classified (a fresh user prompt, a retry, the continuation of an
   interrupted turn, a restored ``ask_user_question`` answer, or a runtime-origin turn) and its
   first request is built: a slash command runs, ``UserPromptSubmit`` hooks may block or add
   context, the prompt is recorded, and a fresh turn begins Recall. Recall's first delivery
   point is here: memory ready within 100 ms goes with the prompt.
2. **request**: the one tool loop (:mod:`cairn.agent.loop`) sends it. Recall's second delivery
   point is the loop's final send point: memory refined meanwhile joins the next tool results.
3. **tools**: the answer's calls run through the session's scheduler; text typed meanwhile
   (steering) goes back with their results.
4. **after-stop**: the model wants to stop; Stop hooks, open todo items and late steering may
   keep it going within the same logical turn.

Only a fresh turn that ends normally schedules Extract and Dream; ``finish_recall`` runs on
every exit path. :class:`Carryover` is what one turn leaves for the next.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from cairn.abort import AbortController, Aborted
from cairn.agent.client import AgentCompressed, AgentFinished, SendKind, recall_part
from cairn.agent.compression import CompressionStatus
from cairn.agent.loop import CUT_ENDS, NORMAL_ENDS, LoopEnd, ToolLoop
from cairn.agent.reminders import plan_mode_reminder, steering_text, system_reminder
from cairn.content import (
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    Text,
    insert_after_function_responses,
    leading_function_responses,
)
from cairn.debug_log import get_logger
from cairn.llm.errors import ProviderError
from cairn.recording.records import CANCELLED_ANSWER, diff_record, locations_record
from cairn.session.commands import run_slash_command
from cairn.values import Value
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    EventSink,
    MemoryRecalled,
    Notice,
    StreamReset,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageUpdate,
)
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.agent.client import AgentClient, AgentEvent
    from cairn.recording.reader import LoadedSession
    from cairn.session.attachments import Attachments
    from cairn.session.session import Session
    from cairn.session.turn_hooks import TurnHook
    from cairn.tools.base import TodoItem
    from cairn.tools.scheduler import ToolOutcome

__all__ = ["Carryover", "PromptRequest", "Turn", "newest_prompt"]

MAX_REQUESTS_PER_TURN = 100  # model requests in one logical turn (tool loop + continuations)
STOP_HOOK_BLOCK_CAP = 8  # times a Stop hook may keep the agent going in one turn
TODO_REMINDER_CAP = 3  # reminders to finish open todo items in one turn
MAX_STEERING_QUEUE = 20  # mid-turn messages kept until the next tool-result request
CONTINUE_CUT_PROMPT = (
    "Your previous answer was cut at its output bound. Continue exactly where it stopped, "
    "without repeating what you already wrote; make a tool call that was cut again, in smaller "
    "pieces if it was large."
)
_log = get_logger("SESSION")


class PromptRequest(Value, frozen=False):
    """One prompt from a front end. ``text`` is the raw prompt as the user typed it."""

    text: str
    parts: list[Part] | None = None  # resolved parts (e.g. with @file contents); default: text
    retry: bool = False
    continue_turn: bool = False
    restore_question: bool = False
    origin: Literal["user", "runtime"] = "user"
    display_text: str | None = None
    warnings: Sequence[str] = ()  # shown when the turn starts (e.g. a file not attached)

    @classmethod
    def attaching(cls, attachments: Attachments, **fields: Any) -> PromptRequest:
        """The prompt :func:`~cairn.session.attachments.build_attachments` built."""
        if attachments.plain:
            return cls(text=attachments.text, warnings=tuple(attachments.warnings), **fields)
        fields.setdefault("display_text", attachments.text)
        return cls(
            text=attachments.text,
            parts=list(attachments.parts),
            warnings=tuple(attachments.warnings),
            **fields,
        )

    @property
    def fresh(self) -> bool:
        """A fresh user turn: the only kind that begins Recall and schedules Extract and Dream."""
        return (
            not self.retry
            and not self.continue_turn
            and not self.restore_question
            and self.origin != "runtime"
        )


class Carryover:
    """What one turn leaves for the next, and what others queue for it: the plan (todo items),
    the prompt a retry repeats, a question left open by a resume, notices to show when the next
    turn starts, hooks' context for the model's next prompt, and text typed while a turn runs."""

    def __init__(self, todos: list[TodoItem], question: FunctionCall | None) -> None:
        self.todos = todos
        self.question = question  # an ask_user_question the recording left unanswered
        self.last_prompt: tuple[int, list[Part]] | None = None  # history index, the parts
        self._asked_again = False
        self._answer_cut = False  # the last answer was cut at its output bound
        self._notices: list[Notice] = []
        self._context: list[str] = []
        self._steering: deque[str] = deque(maxlen=MAX_STEERING_QUEUE)

    @classmethod
    def of(cls, loaded: LoadedSession | None) -> Carryover:
        """A new session's (nothing), or a loaded one's: its plan and its open question."""
        if loaded is None:
            return cls([], None)  # the recording's reader and the mapper stay unimported
        from cairn.recording.reader import pending_question
        from cairn.session.updates import recorded_plan

        return cls(recorded_plan(loaded.items), pending_question(loaded))

    def add_notice(self, notice: Notice) -> None:
        """Show ``notice`` when the next turn starts."""
        self._notices.append(notice)

    def take_notices(self) -> list[Notice]:
        notices, self._notices = self._notices, []
        return notices

    def add_context(self, text: str) -> None:
        """Send ``text`` to the model with the next fresh prompt (a SessionStart hook's)."""
        self._context.append(text)

    def take_context(self) -> list[str]:
        context, self._context = self._context, []
        return context

    def steer(self, text: str) -> None:
        self._steering.append(text)

    def take_steering(self) -> list[str]:
        texts = list(self._steering)
        self._steering.clear()
        return texts

    def note_answer_cut(self) -> None:
        """The turn ended with an answer cut at its output bound: ``continue`` goes on."""
        self._answer_cut = True

    def take_answer_cut(self) -> bool:
        cut, self._answer_cut = self._answer_cut, False
        return cut

    def set_todos(self, todos: Sequence[TodoItem]) -> None:
        self.todos = list(todos)

    def remember_prompt(self, prompt: tuple[int, list[Part]] | None) -> None:
        self.last_prompt = prompt

    def ask_again(self, someone_can_answer: bool) -> bool:
        """Whether the question left open is asked again now: once, and only where someone
        can answer it (else the next prompt answers it)."""
        if self.question is None or self._asked_again or not someone_can_answer:
            return False
        self._asked_again = True
        return True

    def take_question(self) -> FunctionCall | None:
        question, self.question = self.question, None
        return question

    def clear(self) -> None:
        """``/clear`` or a rewind: the plan and the prompt to retry belong to the old chat."""
        self.todos = []
        self.last_prompt = None


class Turn:
    """One logical turn of ``session`` (see the module docstring); it owns the turn's state."""

    def __init__(self, session: Session, request: PromptRequest, sink: EventSink, number: int):
        self.session = session
        self.client = session.client
        self.carry = session.carry
        self.request = request
        self.sink = sink
        self.prompt_id = f"{session.id}########{number}"
        self.abort = AbortController()
        self.result = TurnResult("end_turn", fresh=request.fresh)
        self.remember = False  # from /remember: its memory writes need no approval
        self.loop = ToolLoop(self.client, self, max_requests=MAX_REQUESTS_PER_TURN)
        self._task: asyncio.Task[TurnResult] | None = None
        self._over = False
        self._stop_hook_blocks = 0
        self._todo_reminders = 0
        self._texts: list[str] = []
        self._streaming: list[str] = []  # the model response being streamed
        self._thoughts: list[str] = []

    # ----- the turn from start to end -----

    async def play(self) -> TurnResult:
        """Run the turn and return how it ended. Never raises for model errors."""
        session, sink = self.session, self.sink
        await sink(TurnStarted(self.prompt_id, self.request.fresh))
        if await session.memory.settled(self.request):  # the warm-up is over: the section joins
            session.refresh_system_prompt()
        await self.run_hooks(lambda hook: hook.turn_started(session, self.request))
        for notice in self.carry.take_notices():
            await sink(notice)
        small = self.client.window_warning()  # a window the fixed prompt cannot fit
        if small is not None:
            await sink(Notice("warning", small, "context"))
        task = asyncio.ensure_future(self._run())
        self._task = task
        if self.abort.signal.aborted:  # cancelled while TurnStarted was being delivered
            task.cancel()
        try:
            result = await task
        except (asyncio.CancelledError, Aborted):
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()
                raise
            result = self.result
            result.stop_reason = "cancelled"
            result.usage.add(self.client.take_unfinished_usage())  # paid for all the same
            self._record_cancelled_answer()
        finally:
            self.client.finish_recall()
            self.client.override_model(None)
            self.result.requests = self.loop.requests
            self._task = None
            self._over = True
        result.text = "".join(self._texts) if not result.text else result.text
        await self.run_hooks(lambda hook: hook.turn_ended(session, result))
        await sink(TurnEnded(result))
        return result

    def cancel(self, reason: str) -> bool:
        """Stop the turn; False when it is over or already stopping."""
        if self._over or self.abort.signal.aborted:
            return False
        if self._task is not None and self._task.done():
            return False
        # Before the task exists (the sink is still taking TurnStarted) the abort alone is
        # enough: play() cancels the task as soon as it creates it.
        self.abort.abort(reason)
        if self._task is not None:
            self._task.cancel()
        return True

    async def wait(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> TurnResult:
        request, result = self.request, self.result
        try:
            parts = await self.prepare()
            if parts is None:
                return result
            parts = self.session.task_state.with_resume_reminder(parts)  # after a crash
            kind = SendKind.USER_QUERY if request.fresh else SendKind.CONTINUATION
            await self._request(parts, SendKind.RETRY if request.retry else kind)
        except ProviderError as exc:
            return self._failed(exc)
        if request.fresh and self._ended_normally():
            self.session.memory.schedule_tasks(self.client.history.shallow())
        return result

    def _ended_normally(self) -> bool:
        result = self.result
        return (
            result.stop_reason == "end_turn"
            and not result.loop_stopped
            and not result.blocked
            and not result.handled_locally
        )

    def _failed(self, exc: ProviderError) -> TurnResult:
        result = self.result
        result.stop_reason = "error"
        result.error = str(exc)
        result.error_status = exc.status
        _log.error(f"turn failed: {exc}")
        return result

    def _record_cancelled_answer(self) -> None:
        """What a cancelled response had shown is kept for a replay (never for the model)."""
        text = "".join(self._streaming)
        self._streaming.clear()
        recorder = self.session.recorder
        if text.strip() and recorder is not None:
            recorder.record_system(CANCELLED_ANSWER, {"text": text})

    async def run_hooks(self, call: Callable[[TurnHook], Awaitable[None]]) -> None:
        for hook in list(self.session.turn_hooks):
            try:
                await call(hook)
            except Exception as exc:  # a hook is never a reason for a turn to fail
                _log.warning(f"turn hook {type(hook).__name__} failed: {exc!r}")
                await self.sink(
                    Notice("warning", f"{type(hook).__name__} failed: {exc}", "turn_hook")
                )

    # ----- phase 1: prepare -----

    async def prepare(self) -> list[Part] | None:
        """Build the first request of the turn; ``None`` when the turn ends before the model."""
        request, session, sink = self.request, self.session, self.sink
        if session.mcp is not None:
            bound = session.settings.mcp.discovery_timeout_ms / 1000
            await session.mcp.before_first_request(bound, sink)
        if request.restore_question:
            return await self._restored_answer()
        if request.continue_turn:
            return self._continuation_parts()
        if request.retry:
            return await self._retried_parts()

        for warning in request.warnings:
            await sink(Notice("warning", warning, "attachment"))
        parts: list[Part] = list(request.parts) if request.parts else [Text(request.text)]
        if request.fresh and request.text.lstrip().startswith("/"):
            command = await run_slash_command(session, request.text.strip(), sink)
            if command is not None:
                if command.prompt is None:
                    self.result.handled_locally = True
                    self.result.text = command.message or ""
                    self.result.unknown_command = command.unknown
                    self.result.blocked = command.refused  # e.g. a command file's step refused
                    return None
                parts = list(command.parts) if command.parts else [Text(command.prompt)]
                self.remember = command.remember
                self.client.override_model(command.model)
        if request.fresh and session.mcp is not None and "@" in request.text:
            from cairn.session.mcp import resource_mentions

            parts += await resource_mentions(session.mcp.servers, request.text, sink)
        user_parts = list(parts)

        hook_context = await self._prompt_hooks(parts)
        if self.result.blocked:
            return None
        if request.fresh:
            context = self.carry.take_context()  # SessionStart hooks' context
            if context:
                joined = "\n".join(context)
                text = f"<cairn:session-start-context>{joined}</cairn:session-start-context>"
                parts.append(Text(text))
        self._record_prompt(user_parts, hook_context)
        if request.fresh:
            session.task_state.user_said(request.text)  # word for word, for the checkpoint
            # Recall starts only after the hook let the prompt through, with the raw text.
            self.client.begin_recall(request.text, self.abort.signal)
            if session.memory.stale():  # Extract, Dream or Forget changed the memory files
                session.refresh_system_prompt()

        reminders: list[Part] = []
        if session.approval_mode == "plan":
            reminders.append(plan_mode_reminder())
        if request.fresh:
            reminders[:0] = await self._initial_recall()
        self.carry.remember_prompt((len(self.client.history), list(parts)))
        return insert_after_function_responses(parts, reminders)

    async def _prompt_hooks(self, parts: list[Part]) -> str | None:
        """``UserPromptSubmit`` hooks: they may block the prompt (``result.blocked``) or add
        context, which goes with it (and is returned, for the recording)."""
        hooks = self.session.hooks
        if self.request.origin != "user" or not hooks.has("UserPromptSubmit"):
            return None
        outcome = await hooks.user_prompt_submit(self.request.text)
        for warning in outcome.warnings:
            await self.sink(Notice("warning", warning, "hook"))
        if outcome.system_message:
            await self.sink(Notice("info", outcome.system_message, "hook"))
        if outcome.blocked:
            reason = outcome.reason or "No reason provided"
            await self.sink(Notice("error", f"UserPromptSubmit blocked: {reason}", "hook"))
            self.result.blocked = True
            self.result.text = f"UserPromptSubmit blocked: {reason}"
            return None
        context = outcome.additional_context
        if context:
            tag = "cairn:user-prompt-submit-context"
            parts.append(Text(f"<{tag}>{context}</{tag}>"))
        return context or None

    def _record_prompt(self, user_parts: list[Part], hook_context: str | None) -> None:
        """The prompt as the user sent it joins the recording; the turn's checkpoint starts."""
        session = self.session
        if session.recorder is None or self.request.origin != "user":
            return
        user_uuid = session.recorder.record_user(
            Content("user", user_parts),
            display_text=self.request.display_text,
            hook_context=hook_context,
        )
        if session.checkpoints is not None:
            session.checkpoints.start_turn(user_uuid, prepare=self._may_change_unasked())

    def _may_change_unasked(self) -> bool:
        """Whether the turn's changes can run without an approval nobody could give (worth
        the shadow index in the background once the model answers): never in plan mode; with
        no one to ask (cairn -p), only in auto-edit or yolo. A change a rule allows is
        checkpointed anyway."""
        mode = self.session.approval_mode
        if mode == "plan":
            return False
        return self.session.frontend.interactive or mode in ("auto-edit", "yolo")

    async def _initial_recall(self) -> list[Part]:
        """Recall's first delivery point: memory ready within 100 ms goes with the prompt."""
        delivery = await self.client.consume_recall("initial")
        if delivery is None:
            return []
        await self.sink(MemoryRecalled(delivery.memories, delivery.phase))
        return [recall_part(delivery)]

    async def _retried_parts(self) -> list[Part] | None:
        if self.carry.last_prompt is None:
            await self.sink(Notice("warning", "There is no earlier prompt to retry.", "session"))
            return None
        index, retried = self.carry.last_prompt
        self.client.history.truncate(index)
        return list(retried)

    def _continuation_parts(self) -> list[Part] | None:
        """Continue a turn that was interrupted (a crash, a cancel, a dropped connection)."""
        history = self.client.history
        dangling = history.dangling_calls()
        if self.carry.take_answer_cut() and not dangling:  # go on from where the bound cut it
            return [Text(CONTINUE_CUT_PROMPT)]
        if dangling:
            return [
                FunctionResponse(c.id, c.name, {"error": "The tool call was interrupted."})
                for c in dangling
            ]
        last = history.last()
        if last is not None and last.role == "user" and len(history) > self.client.startup_length:
            stripped = history.strip_trailing_user_entries()
            return [p for entry in stripped for p in entry.parts]
        self.result.handled_locally = True
        return None

    async def _restored_answer(self) -> list[Part] | None:
        """Ask a pending ``ask_user_question`` again and continue the turn with the answer."""
        self.carry.take_question()
        history = self.client.history
        calls = [c for c in history.dangling_calls() if c.name == ToolName.ASK_USER_QUESTION]
        if not calls:
            self.result.handled_locally = True
            return None
        outcomes = await self.run_tools(calls)
        return [o.response for o in outcomes]

    # ----- phase 2: request (the one tool loop drives phases 2 to 4) -----

    async def _request(self, parts: list[Part], kind: SendKind) -> None:
        result, sink = self.result, self.sink
        end = await self.loop.run(parts, kind, self.abort.signal)
        if end == LoopEnd.MAX_REQUESTS:
            result.stop_reason = "max_turn_requests"
            result.limit = "max_requests"
            await sink(Notice("warning", f"Stopped after {MAX_REQUESTS_PER_TURN} model requests."))
        elif end == LoopEnd.LIMIT and self.loop.limit is not None:
            limit = self.loop.limit
            session_turns = limit.kind == "max_session_turns"
            result.stop_reason = "max_turn_requests" if session_turns else "max_tokens"
            result.limit = limit.kind
            await sink(Notice("error", limit.message, "limit"))
        elif end == LoopEnd.LOOP and self.loop.loop_info is not None:
            info = self.loop.loop_info
            result.loop_type = info.loop_type
            if self.loop.loop_usage is not None:
                result.usage.add(self.loop.loop_usage)  # the cut answer was paid for all the same
            text = f"Loop detected: {info.detail}. The turn was stopped."
            await sink(Notice("error", text, "loop"))
        elif end == LoopEnd.CUT:
            await self._cut()
        elif end == LoopEnd.HOOK_STOPPED:
            await sink(Notice("warning", f"A hook stopped the turn: {self.loop.hook_stop}", "hook"))

    async def _cut(self) -> None:
        """The answer was cut at its output bound (``length``: ``continue`` goes on from there)
        or withheld by a content filter: the turn ends, and every front end says why."""
        result = self.result
        if self.loop.finish_reason == "length":
            result.stop_reason = "max_tokens"
            self.carry.note_answer_cut()
            text = (
                f"The answer was cut at its output bound of {self.client.output_bound()} tokens "
                "(model.generationConfig.maxOutputTokens.main); send 'continue' to let the "
                "model go on."
            )
        else:
            result.stop_reason = "refusal"
            text = "The endpoint's content filter withheld the rest of the answer."
        await self.sink(Notice("warning", text, "output"))

    async def at_send_point(self, parts: list[Part]) -> list[Part]:
        """Recall's second delivery point: memory ready when tool results go back joins them,
        right after the function responses (it never waits)."""
        if not leading_function_responses(parts):
            return parts
        delivery = await self.client.consume_recall("tool_result")
        if delivery is None:
            return parts
        await self.sink(MemoryRecalled(delivery.memories, delivery.phase))
        return insert_after_function_responses(parts, [recall_part(delivery)])

    async def on_event(self, event: AgentEvent) -> None:
        if self.session.checkpoints is not None:
            self.session.checkpoints.answering()
        sink = self.sink
        if isinstance(event, AssistantText):
            self._texts.append(event.text)
            self._streaming.append(event.text)
            await sink(event)
        elif isinstance(event, AssistantThought):
            self._thoughts.append(event.text)
            await sink(event)
        elif isinstance(event, StreamReset):
            self._texts.clear()
            self._streaming.clear()
            self._thoughts.clear()
            await sink(event)
        elif isinstance(event, AgentCompressed):
            info = event.result
            compressed = info.status is CompressionStatus.COMPRESSED
            level: Literal["info", "warning"] = "info" if compressed else "warning"
            await sink(Notice(level, info.describe(), "compression"))

    async def on_answer(self, answer: AgentFinished) -> None:
        if self.session.checkpoints is not None:
            self.session.checkpoints.answering()
        client, result = self.client, self.result
        self._streaming.clear()  # recorded with the response
        self.carry.take_answer_cut()  # this answer is the one a continuation goes on from
        result.usage.add(answer.usage)
        thought = "".join(self._thoughts)
        self._thoughts.clear()
        reason = answer.reason
        message = AssistantMessage(
            answer.text, thought, answer.calls, answer.usage, client.model, finish_reason=reason
        )
        await self.sink(message)
        await self.sink(UsageUpdate(answer.usage, client.last_prompt_tokens, client.context_window))
        if answer.text:
            result.text = answer.text
        if reason not in NORMAL_ENDS:
            result.finish_reason = reason
            if reason not in CUT_ENDS:  # the loop goes on; a cut ends the turn (see _cut)
                text = f"The model stopped for a reason cairn does not know: {reason!r}."
                await self.sink(Notice("warning", text, "output"))

    # ----- phase 3: tools -----

    async def run_tools(self, calls: list[FunctionCall]) -> list[ToolOutcome]:
        session = self.session
        ctx = session.tool_context(self.abort.signal)
        outcomes = await session.scheduler.run(calls, ctx, self.sink)
        for change in session.memory.writes.drain():
            await self.sink(change)
        for outcome in outcomes:
            if outcome.terminal and session.registry.get(outcome.call.name) is not None:
                self.client.record_completed_tool_call(outcome.call.name, outcome.call.args)
            if outcome.result is not None and outcome.result.todos is not None:
                self.carry.set_todos(outcome.result.todos)
        if session.recorder is not None:
            session.recorder.record_tool_result(
                Content("user", [o.response for o in outcomes]),
                tool_results=[_tool_call_result(o) for o in outcomes],
            )
        return outcomes

    def steering(self, *, record: bool = True) -> list[Part]:
        """Text typed while the turn runs, as parts for the model (recorded as such)."""
        parts: list[Part] = []
        recorder = self.session.recorder
        for text in self.carry.take_steering():
            self.session.task_state.user_said(text, steering=True)
            part = steering_text(text)
            if record and recorder is not None:
                recorder.record_system(
                    "mid_turn_user_message", {"text": text}, content=Content("user", [part])
                )
            parts.append(part)
        return parts

    # ----- phase 4: after-stop -----

    async def after_stop(self, answer: AgentFinished) -> list[Part] | None:
        """The model wants to stop: Stop hooks, open todos and late steering may continue it."""
        if self.abort.signal.aborted:
            return None
        more = await self._stop_hooks(answer.text)
        if more is None:
            more = self._todo_reminder() or self.steering(record=False)  # recorded below
        if not more:
            return None
        recorder = self.session.recorder
        if recorder is not None:
            recorder.record_user(Content("user", more), provenance="continuation")
        return more

    async def _stop_hooks(self, last_text: str) -> list[Part] | None:
        """``Stop`` hooks: a block keeps the agent going with its reason (at most
        :data:`STOP_HOOK_BLOCK_CAP` times); ``[]`` when they end the turn here."""
        hooks, sink = self.session.hooks, self.sink
        if not hooks.has("Stop") or self._stop_hook_blocks >= STOP_HOOK_BLOCK_CAP:
            return None
        outcome = await hooks.stop(
            last_assistant_message=last_text or self.client.history.last_model_text(),
            stop_hook_active=self._stop_hook_blocks > 0,  # already kept going by one
        )
        for warning in outcome.warnings:
            await sink(Notice("warning", warning, "hook"))
        if outcome.system_message:
            await sink(Notice("info", outcome.system_message, "hook"))
        if outcome.stop:  # `continue: false` wins over a block: the agent stops now
            await sink(Notice("info", f"Stop hook: {outcome.stop_reason}", "hook"))
            return []
        if not outcome.blocked:
            return None
        self._stop_hook_blocks += 1
        reason = outcome.reason or "No reason provided"
        if self._stop_hook_blocks >= STOP_HOOK_BLOCK_CAP:
            text = f"A Stop hook blocked stopping {STOP_HOOK_BLOCK_CAP} times; the turn ends here."
            await sink(Notice("warning", text, "hook"))
            return []
        await sink(Notice("info", f"Stop hook: {reason}", "hook"))
        return [Text(reason)]

    def _todo_reminder(self) -> list[Part]:
        open_items = [t for t in self.carry.todos if t.status in ("pending", "in_progress")]
        if not open_items or self._todo_reminders >= TODO_REMINDER_CAP:
            return []
        self._todo_reminders += 1
        listing = "\n".join(f"- [{t.status}] {t.content}" for t in open_items)
        return [
            system_reminder(
                f"You ended your turn with {len(open_items)} todo item(s) still open:\n"
                f"{listing}\nContinue working on them, or update the list with todo_write "
                "if they are done or no longer needed."
            )
        ]


def newest_prompt(client: AgentClient) -> tuple[int, list[Part]] | None:
    """The newest user prompt in the history (what a retry sends again), with its index."""
    entries = client.history.shallow()
    for index in range(len(entries) - 1, client.startup_length - 1, -1):
        entry = entries[index]
        if entry.role == "user" and not any(isinstance(p, FunctionResponse) for p in entry.parts):
            return index, list(entry.parts)
    return None


def _tool_call_result(outcome: ToolOutcome) -> dict[str, Any]:
    """A call's ``toolCallResult`` entry: its status and what people saw (summary, diff,
    places), so a replay shows what the live call showed."""
    entry: dict[str, Any] = {"callId": outcome.call.id, "status": outcome.status}
    result = outcome.result
    if result is None:
        return entry
    if result.display:
        entry["resultDisplay"] = result.display
    diff = diff_record(result.diff) if result.diff is not None else None
    if diff is not None:
        entry["diff"] = diff
    if result.locations:
        entry["locations"] = locations_record(result.locations)
    if result.subagent is not None:
        entry["subagent"] = result.subagent.to_record()
    return entry
