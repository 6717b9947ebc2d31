"""The agent client: one per session; it owns the chat and everything about a model request.

It sends one request at a time (:meth:`AgentClient.send`), passing every gate that could still drop
the request (turn limits, compression, token limit, cancellation) before the final send point.
It is also the single owner of the Recall state for its session: front ends and the session
runtime only call :meth:`begin_recall`, :meth:`consume_recall` and :meth:`finish_recall`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from cairn.abort import Aborted, AbortSignal
from cairn.agent.chat import ChatHistory
from cairn.agent.compactor import CompactionObserver, Compactor
from cairn.agent.compression import (
    DEFAULT_CONTEXT_WINDOW,
    CompressionResult,
    CompressionStatus,
    Summariser,
)
from cairn.agent.loop_detection import LoopDetector, LoopInfo
from cairn.agent.reminders import system_reminder
from cairn.content import (
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    Text,
    Thought,
    leading_function_responses,
)
from cairn.debug_log import get_logger
from cairn.llm.errors import ContextOverflowError
from cairn.llm.estimate import estimate_tokens, estimated_usage
from cairn.llm.limits import output_limit
from cairn.llm.types import (
    Finished,
    ModelRequest,
    Provider,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolDeclaration,
    Usage,
)
from cairn.values import Value
from cairn.vocabulary.events import AssistantText, AssistantThought, StreamReset, UsageUpdate
from cairn.vocabulary.recall import RecallDelivery
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.config.settings import Settings

__all__ = [
    "INTERRUPTED_CALL_ERROR",
    "MAX_RECENT_TOOL_NAMES",
    "UNANSWERED_QUESTION_ERROR",
    "AgentClient",
    "AgentCompressed",
    "AgentEvent",
    "AgentFinished",
    "AgentLimit",
    "AgentLoop",
    "AgentToolCall",
    "RecallHandle",
    "RecalledMemory",
    "SendKind",
    "recall_part",
]

MAX_RECENT_TOOL_NAMES = 20  # completed tool names kept for Recall's noise filter
INTERRUPTED_CALL_ERROR = "The tool call was interrupted before it could finish."
UNANSWERED_QUESTION_ERROR = (  # a question left open by a resume nobody could answer in
    "The user did not answer this question; their next message follows instead."
)
_log = get_logger("CLIENT")


def recall_part(delivery: RecallDelivery) -> Text:
    """The request part carrying recalled memory: one ``<system-reminder>`` block."""
    return system_reminder(delivery.prompt)


class SendKind(StrEnum):
    USER_QUERY = "user_query"  # a fresh user prompt
    TOOL_RESULT = "tool_result"  # function responses of the previous batch
    RETRY = "retry"  # another attempt of the same logical turn
    CONTINUATION = "continuation"  # Stop hook, todo reminder, interrupted-turn continuation


RecalledMemory: TypeAlias = RecallDelivery  # what Recall delivers at a point of the turn


class RecallHandle(Protocol):
    """What the client needs from the memory package's Recall lifecycle."""

    surfaced_paths: set[str]

    def begin(self, query: str, signal: AbortSignal, recent_tools: Sequence[str]) -> None: ...

    async def consume(self, point: Literal["initial", "tool_result"]) -> RecalledMemory | None:
        """The memory ready for ``point`` (``None``: nothing, or not yet)."""
        ...

    def request_sent(self) -> None:
        """The turn's request was written to the endpoint (work it must not wait for may run)."""
        ...

    def finish(self) -> None: ...

    def cancel(self, reason: str) -> None: ...

    def reset(self) -> None: ...


class AgentToolCall(Value):
    call: FunctionCall


class AgentCompressed(Value):
    result: CompressionResult


class AgentLimit(Value):
    kind: Literal["max_session_turns", "session_token_limit"]
    message: str


class AgentLoop(Value):
    """Loop protection stopped the model; ``usage`` is its last answer's (estimated when the
    stream was cut before the endpoint reported it)."""

    info: LoopInfo
    usage: Usage = field(default_factory=Usage)


class AgentFinished(Value):
    reason: str
    usage: Usage
    calls: tuple[FunctionCall, ...] = ()
    text: str = ""


# Streamed text, reasoning and retries are the session's own events.
AgentEvent = (
    AssistantText
    | AssistantThought
    | AgentToolCall
    | StreamReset
    | AgentCompressed
    | AgentLimit
    | AgentLoop
    | AgentFinished
)


class _Stats(Value, frozen=False):
    session_turn_count: int = 0
    tool_call_count: int = 0
    usage: Usage = field(default_factory=Usage)


class _Thoughts:
    """The reasoning of one response as parts: one per signed block, the rest together."""

    def __init__(self) -> None:
        self._done: list[Thought] = []
        self._pending: list[str] = []

    def add(self, delta: ThoughtDelta) -> None:
        self._pending.append(delta.text)
        if delta.signature:  # the block is complete; its signature must go back with it
            self._done.append(Thought("".join(self._pending), delta.signature, delta.redacted))
            self._pending.clear()

    def parts(self) -> list[Thought]:
        text = "".join(self._pending)
        return [*self._done, Thought(text)] if text else list(self._done)


class AgentClient:
    def __init__(
        self,
        *,
        provider: Provider,
        settings: Settings,
        session_id: str,
        system_prompt: str,
        tools: Callable[[], Sequence[ToolDeclaration]],
        history: Sequence[Content] = (),
        recall: RecallHandle | None = None,
        recall_enabled: Callable[[], bool] = lambda: True,
        on_assistant: Callable[[Content, str, Usage], None] | None = None,
        startup_length: int = 0,
        purpose: str = "main",
        model: str | None = None,
    ) -> None:
        self.provider = provider
        self._model = model  # None: the provider's model
        self.purpose = purpose
        self.settings = settings
        self.session_id = session_id
        self.system_prompt = system_prompt
        self._tools = tools
        self.history = ChatHistory(history)
        self._recall = recall
        self._recall_enabled = recall_enabled
        self._on_assistant = on_assistant
        self.startup_length = startup_length
        self.loop_detector = LoopDetector()
        self.recent_tools: list[str] = []
        self.stats = _Stats()
        self.last_prompt_tokens = 0
        self._window_asked = False
        self._window_warned: int | None = None  # the window told too small for the prompt
        self._unfinished = Usage()  # answers cut by a cancel, not yet counted in a turn
        self._background: set[asyncio.Future[int | None]] = set()
        self.model_override: str | None = None  # this turn's model (a command file's `model`)
        self.last_output_tokens = 0
        self.compactor = Compactor(self)
        self._seed_recent_tools()

    def on_compress(
        self,
        before: Callable[[str], Awaitable[str | None]],
        after: Callable[[], Awaitable[None]],
    ) -> None:
        """Follow compression: ``before`` is given the trigger (``manual``, ``auto``) and may
        return a reason not to compress (PreCompact hooks); ``after`` runs once it happened."""
        self.compactor.on_compress(before, after)

    def summarise_with(self, summariser: Summariser) -> None:
        """Compress with the session's task checkpoint (:class:`~cairn.agent.compression.
        TaskSummary`): the older part of the history becomes the checkpoint, with the user's
        words kept word for word, instead of a model-written summary."""
        self.compactor.summarise_with(summariser)

    def on_compacted(self, observer: CompactionObserver) -> None:
        """Call ``observer`` with every compression that replaced the history (see
        :data:`~cairn.agent.compactor.CompactionObserver`): a resume starts from it."""
        self.compactor.on_compacted(observer)

    def override_model(self, model: str | None) -> None:
        """Send this turn's requests to ``model`` (a command file's ``model``); ``None``: the
        session's model again."""
        self.model_override = model

    # ----- Recall lifecycle: the only way front ends and the session touch Recall -----

    @property
    def surfaced_paths(self) -> set[str]:
        return self._recall.surfaced_paths if self._recall else set()

    def begin_recall(self, query: str, abort: AbortSignal) -> None:
        """Start Recall for a fresh user turn (cancelling any earlier one with ``new_query``)."""
        if self._recall is None or not self._recall_enabled():
            return
        self._recall.begin(query, abort, list(self.recent_tools))

    async def consume_recall(
        self, point: Literal["initial", "tool_result"]
    ) -> RecallDelivery | None:
        """The recalled memory ready for ``point`` (see :func:`recall_part`), or ``None``.

        ``initial`` waits at most 100 ms; ``tool_result`` never waits.
        """
        if self._recall is None:
            return None
        try:
            delivery = await self._recall.consume(point)
        except Exception as exc:
            _log.warning(f"recall consume failed: {exc!r}")
            return None
        return delivery if delivery is not None and delivery.prompt else None

    def attach_recall(self, make: Callable[[], RecallHandle | None]) -> None:
        """Create the Recall handle of a session started with memory off (``/memory on``)."""
        if self._recall is None:
            self._recall = make()

    def finish_recall(self) -> None:
        if self._recall is not None:
            self._recall.finish()

    def cancel_recall(self, reason: str) -> None:
        if self._recall is not None:
            self._recall.cancel(reason)

    def reset(self, startup: Sequence[Content] = ()) -> None:
        """``/clear``: a fresh chat; the session's surfaced memories may be recalled again."""
        if self._recall is not None:
            self._recall.reset()
        self.history.replace(startup)
        self.startup_length = len(startup)
        self.recent_tools.clear()
        self.loop_detector.reset()
        self.last_prompt_tokens = 0
        self.compactor.reset()

    def close(self) -> None:
        """The session ends: Recall and a compression running in the background are stopped."""
        self.cancel_recall("shutdown")
        self.compactor.stop()

    def record_completed_tool_call(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        """Note a tool call that ran (successfully or not); cancelled calls are not recorded."""
        name = name.strip()
        if not name:
            return
        if name in self.recent_tools:
            self.recent_tools.remove(name)
        self.recent_tools.append(name)
        del self.recent_tools[:-MAX_RECENT_TOOL_NAMES]
        self.stats.tool_call_count += 1

    def _seed_recent_tools(self) -> None:
        answered = {
            p.id for e in self.history.shallow() for p in e.parts if isinstance(p, FunctionResponse)
        }
        for entry in self.history.shallow():
            for part in entry.parts:
                if isinstance(part, FunctionCall) and part.id in answered:
                    self.record_completed_tool_call(part.name)
        self.stats.tool_call_count = 0

    # ----- sending -----

    @property
    def model(self) -> str:
        """The model requests go to: this turn's override, else the session's model."""
        return self.model_override or self.session_model

    @property
    def context_window(self) -> int:
        """The window the model serves: the smaller of ``contextWindowSize`` and what the
        server said (:meth:`Provider.context_window`), else :data:`DEFAULT_CONTEXT_WINDOW`."""
        configured = self.settings.model.generation_config.context_window_size
        told = self.provider.context_window(self.model)
        known = [window for window in (configured, told) if window]
        return min(known) if known else DEFAULT_CONTEXT_WINDOW

    def context_used(self) -> UsageUpdate:
        """How full the context is now, for front ends that show it (no request was made)."""
        return UsageUpdate(Usage(), self.last_prompt_tokens, self.context_window)

    def _learn_context_window(self) -> None:
        """Ask the server for the model's window, in the background, once per client (the
        provider asks once per model); after the first answer, so it never delays one."""
        if self._window_asked:
            return
        self._window_asked = True
        task = asyncio.ensure_future(self.provider.learn_context_window(self.model))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def session_model(self) -> str:
        """The conversation's model outside overrides (``/model`` switches it)."""
        return self._model or self.provider.model

    @session_model.setter
    def session_model(self, value: str) -> None:
        self._model = value

    def use_model(self, provider: Provider, model: str) -> None:
        """Send the conversation's next requests to ``model``, served by ``provider``."""
        self.provider = provider
        self._model = model

    async def compress(self, *, force: bool = False, trigger: str = "") -> CompressionResult:
        """Compress the conversation now (``force``: whatever its size, as ``/compress`` and a
        prompt the server refused as too long ask; else only past the threshold); ``trigger``
        is what PreCompact hooks are told (``manual`` or ``auto``; default: ``manual`` when
        forced). A compression running in the background is stopped first."""
        return await self.compactor.compress(force=force, trigger=trigger)

    @property
    def background_compression(self) -> Literal["running", "ready"] | None:
        """A compression started in the background (:mod:`cairn.agent.compactor`)."""
        return self.compactor.background

    def repair_dangling_calls(self, parts: Sequence[Part]) -> list[Part]:
        """Answer calls left open by an interruption so the next request is well formed."""
        dangling = self.history.dangling_calls()
        answered = {p.id for p in parts if isinstance(p, FunctionResponse)}
        fixes: list[Part] = [
            FunctionResponse(c.id, c.name, {"error": _interrupted_error(c)})
            for c in dangling
            if c.id not in answered
        ]
        if not fixes:
            return list(parts)
        cut = leading_function_responses(parts)
        return [*parts[:cut], *fixes, *parts[cut:]]

    async def send(
        self,
        parts: Sequence[Part],
        *,
        kind: SendKind,
        abort: AbortSignal,
        at_send_point: Callable[[list[Part]], Awaitable[list[Part]]] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Send one request and stream what comes back; the model's answer joins the history.

        ``at_send_point`` sees the parts once every gate let the request through (the session's
        turn adds the memory Recall has ready for tool results there)."""
        if kind is not SendKind.RETRY:
            self.stats.session_turn_count += 1
            limit = self.settings.model.max_session_turns
            if limit > 0 and self.stats.session_turn_count > limit:
                yield AgentLimit(
                    "max_session_turns",
                    f"Reached the session limit of {limit} model requests "
                    "(model.maxSessionTurns / --max-session-turns). Raise it to continue.",
                )
                return
        if kind is SendKind.USER_QUERY:
            self.loop_detector.reset()

        abort.raise_if_aborted()
        compressed = await self.compactor.before_sending(parts)
        if compressed is not None and compressed.status is not CompressionStatus.NOOP:
            yield AgentCompressed(compressed)
        abort.raise_if_aborted()

        token_limit = self.settings.model.session_token_limit
        if token_limit and token_limit > 0 and self.last_prompt_tokens > token_limit:
            yield AgentLimit(
                "session_token_limit",
                f"Session token limit exceeded: {self.last_prompt_tokens} tokens > {token_limit} "
                "limit. Start a new session or raise model.sessionTokenLimit in settings.json.",
            )
            return
        abort.raise_if_aborted()

        parts = self.repair_dangling_calls(parts)
        # The final send point: nothing below can drop this request any more.
        if at_send_point is not None:
            parts = await at_send_point(parts)
        self.history.append(Content("user", list(parts)))
        failing = self._failure_loop(parts)
        if failing is not None:  # the results are answered in the history; asking again won't help
            yield AgentLoop(failing)
            return

        try:
            async for event in self._stream(abort):
                yield event
            return
        except ContextOverflowError as overflow:
            if overflow.prompt_tokens:
                self.last_prompt_tokens = overflow.prompt_tokens
            compressed = await self.compress(force=True, trigger="auto")
            yield AgentCompressed(compressed)
            if compressed.status is not CompressionStatus.COMPRESSED:
                raise self._does_not_fit(overflow, compressed) from overflow
        abort.raise_if_aborted()
        try:  # once: a prompt that still does not fit is reported
            async for event in self._stream(abort):
                yield event
        except ContextOverflowError as overflow:
            raise self._does_not_fit(overflow, None) from overflow

    def tool_declarations(self) -> list[ToolDeclaration]:
        """The tools the next request offers (the built-ins and the MCP servers' tools)."""
        return list(self._tools())

    def fixed_prompt_tokens(self) -> int:
        """About how many tokens every request holds whatever is said: the system prompt, the
        tool declarations and the startup context."""
        startup = self.history.shallow()[: self.startup_length]
        tools = [json.dumps(dict(t.parameters)) + t.name + t.description for t in self._tools()]
        texts = [self.system_prompt, *tools, *(json.dumps(c.to_dict()) for c in startup)]
        return estimate_tokens(texts)

    def window_warning(self) -> str | None:
        """What to tell the user when the model's known window cannot hold the fixed prompt
        (``None`` when it can, or when this window was told already)."""
        configured = self.settings.model.generation_config.context_window_size
        told = self.provider.context_window(self.model)
        known = [window for window in (configured, told) if window]
        if not known:
            return None
        window = min(known)
        fixed = self.fixed_prompt_tokens()
        if window >= fixed or window == self._window_warned:
            return None
        self._window_warned = window
        from_server = told is not None and told == window and told != configured
        where = f"{window} tokens, as the server says" if from_server else f"{window} tokens"
        fix = (
            "Serve the model with a larger context (llama-server -c 32768, Ollama's num_ctx or "
            "OLLAMA_CONTEXT_LENGTH, vLLM --max-model-len)."
            if from_server
            else "Raise model.generationConfig.contextWindowSize if the model has more, or serve "
            "it with a larger context."
        )
        return (
            f"The model's context window ({where}) cannot hold cairn's fixed prompt (about "
            f"{fixed} tokens: the system prompt, the tool declarations and the environment "
            f"summary). {fix}"
        )

    def output_bound(self) -> int:
        """The output bound of this client's requests (the user's setting for its kind, the
        conversation's ``samplingParams.max_tokens``, or the kind's default)."""
        generation = self.settings.model.generation_config
        asked = generation.sampling_params.max_tokens
        return output_limit(self.purpose, asked, generation.max_output_tokens.by_kind())

    def _does_not_fit(
        self, overflow: ContextOverflowError, compressed: CompressionResult | None
    ) -> ContextOverflowError:
        """The error that says a prompt does not fit, and what to do about it."""
        window = overflow.window or self.provider.context_window(self.model)
        size = f" ({overflow.prompt_tokens} tokens)" if overflow.prompt_tokens else ""
        where = f"context window of {window} tokens" if window else "context window"
        if compressed is None:
            tried = "even after compressing the conversation"
        else:
            tried = f"and compressing it did not help: {compressed.describe()}"
        message = (
            f"The prompt{size} does not fit the model's {where}, {tried} "
            f"(cairn's fixed prompt, the system prompt and tool declarations, is about "
            f"{self.fixed_prompt_tokens()} tokens). Serve the model with a larger context "
            "(llama-server -c 32768, Ollama's num_ctx or OLLAMA_CONTEXT_LENGTH, vLLM "
            "--max-model-len) or start a new session. The server said: "
            f"{overflow.message.removeprefix('HTTP 400: ')}"
        )
        return ContextOverflowError(
            message,
            status=overflow.status,
            window=overflow.window,
            prompt_tokens=overflow.prompt_tokens,
        )

    def _failure_loop(self, parts: Sequence[Part]) -> LoopInfo | None:
        """Loop protection over the tool results being sent: one tool failing the same way."""
        if self.settings.model.skip_loop_detection:
            return None
        found: LoopInfo | None = None
        for part in parts:
            if isinstance(part, FunctionResponse):
                error = part.text if part.is_error else None
                found = found or self.loop_detector.check_tool_result(part.name, error)
        return found

    async def _stream(self, abort: AbortSignal) -> AsyncIterator[AgentEvent]:
        sampling = self.settings.model.generation_config.sampling_params
        request = ModelRequest(
            model=self.model,
            contents=self.history.shallow(),
            system=self.system_prompt,
            tools=list(self._tools()),
            purpose=self.purpose,
            session_id=self.session_id,
            max_output_tokens=self.output_bound(),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_attempts=self.settings.model.generation_config.max_retries,
            on_sent=self._recall.request_sent if self._recall is not None else None,
        )
        texts: list[str] = []
        thoughts = _Thoughts()
        calls: list[FunctionCall] = []
        finish: Finished | None = None
        loop: LoopInfo | None = None
        detect = not self.settings.model.skip_loop_detection
        try:
            async with aclosing(self.provider.stream(request)) as stream:
                async for event in stream:
                    if isinstance(event, StreamRetry):
                        texts.clear()
                        thoughts = _Thoughts()
                        calls.clear()
                        yield StreamReset(
                            event.reason, event.delay, event.attempt, event.max_attempts
                        )
                    elif isinstance(event, TextDelta):
                        texts.append(event.text)
                        yield AssistantText(event.text)
                        loop = self.loop_detector.check_text(event.text) if detect else None
                        if loop is not None:
                            break  # a chanting model may never stop: cut the stream here
                    elif isinstance(event, ThoughtDelta):
                        thoughts.add(event)
                        if event.text:
                            yield AssistantThought(event.text)
                    elif isinstance(event, ToolCallDelta):
                        if loop is not None:
                            continue  # calls after the loop's are dropped; the usage follows
                        calls.append(event.call)
                        yield AgentToolCall(event.call)
                        loop = self.loop_detector.check_tool_call(event.call) if detect else None
                    elif isinstance(event, Finished):
                        finish = event
        except (asyncio.CancelledError, Aborted, GeneratorExit):
            self._unfinished.add(estimated_usage(request, _output(texts, thoughts, calls)))
            raise
        if abort.aborted:
            usage = (
                finish.usage
                if finish
                else estimated_usage(request, _output(texts, thoughts, calls))
            )
            self._unfinished.add(usage)
            raise Aborted(abort.reason)
        model_parts: list[Part] = [*thoughts.parts()]
        text = "".join(texts)
        if text:
            model_parts.append(Text(text))
        model_parts.extend(calls)
        usage = (
            finish.usage if finish else estimated_usage(request, _output(texts, thoughts, calls))
        )
        if model_parts:
            content = Content("model", model_parts)
            self.history.append(content)
            if self._on_assistant is not None:
                self._on_assistant(content, self.model, usage)
        self.stats.usage.add(usage)
        if finish is not None and (usage.input_tokens or usage.total_tokens):
            self.last_prompt_tokens = usage.input_tokens or usage.total_tokens
            self.last_output_tokens = usage.output_tokens
            self.compactor.measured()
        self._learn_context_window()
        self.compactor.start()
        if loop is not None:
            yield AgentLoop(loop, usage)
            return
        yield AgentFinished(finish.reason if finish else "stop", usage, tuple(calls), text)

    def take_unfinished_usage(self) -> Usage:
        """The usage of answers cut by a cancel since the last call (estimated where the
        endpoint never reported it): a turn that was cancelled still paid for them."""
        usage, self._unfinished = self._unfinished, Usage()
        self.stats.usage.add(usage)
        return usage


def _output(texts: list[str], thoughts: _Thoughts, calls: list[FunctionCall]) -> list[str]:
    """What an answer streamed, as text (for an estimate of its tokens)."""
    written = [*texts, *(part.text for part in thoughts.parts())]
    return written + [call.name + json.dumps(dict(call.args), default=str) for call in calls]


def _interrupted_error(call: FunctionCall) -> str:
    if call.name == ToolName.ASK_USER_QUESTION:
        return UNANSWERED_QUESTION_ERROR
    return INTERRUPTED_CALL_ERROR
