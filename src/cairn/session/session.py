"""The session runtime: one logical turn at a time, the same for every front end.

A turn is classified first (fresh user prompt, retry, continuation of an interrupted turn, a
restored ``ask_user_question`` answer, or a runtime-origin turn). Only a fresh turn begins Recall
and, when it ends normally, schedules Extract and Dream. The turn then runs the tool loop, the
Stop-hook loop and the todo reminder inside the same logical turn. ``finish_recall`` runs on every
exit path.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cairn.abort import AbortController, Aborted, AbortSignal
from cairn.agent.client import (
    AgentClient,
    AgentCompressed,
    AgentFinished,
    AgentLimit,
    AgentLoop,
    RecallHandle,
    SendKind,
    recall_part,
)
from cairn.agent.compression import CompressionStatus
from cairn.agent.prompt import SystemPrompt, build_system_prompt, startup_context
from cairn.agent.reminders import plan_mode_reminder, steering_text, system_reminder
from cairn.config.context_files import collect_context_files, render_context_files
from cairn.content import (
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    Text,
    insert_after_function_responses,
)
from cairn.debug_log import bind_session, get_logger
from cairn.llm.errors import ProviderError
from cairn.llm.types import Usage
from cairn.memory.remember import MemoryWrites
from cairn.recording.records import APPROVAL_MODE, CANCELLED_ANSWER
from cairn.session.attachments import Attachments, build_attachments
from cairn.session.commands import COMMANDS, SlashCommand, busy_refusal, run_slash_command
from cairn.session.gate import OPEN_GATE, GatedFrontend, PermissionGate
from cairn.session.titles import SessionTitles
from cairn.session.turn_hooks import TurnHook
from cairn.tools.base import CommandRunner, FileSystem, LocalFileSystem, TodoItem, ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.registry import default_registry
from cairn.tools.scheduler import ToolOutcome, ToolScheduler
from cairn.values import Value
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    CommandInfo,
    CommandsChanged,
    EventSink,
    MemoryChanged,
    MemoryRecalled,
    ModeChanged,
    ModelChanged,
    Notice,
    RecapShown,
    SessionEvent,
    StreamReset,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageUpdate,
)
from cairn.vocabulary.interaction import Frontend
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.config.settings import HooksSettings
    from cairn.config.trust import ProjectTrust
    from cairn.hooks.runner import HookRunner
    from cairn.llm.types import ToolDeclaration
    from cairn.mcp.config import ServerConfig
    from cairn.memory.manager import MemoryManager
    from cairn.recap.service import Recap
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder
    from cairn.recording.rewind import RewindMode
    from cairn.session.checkpoints import TurnCheckpoints
    from cairn.session.commands import SlashCommand
    from cairn.session.extensions import SessionExtensions
    from cairn.session.hook_events import SessionHookEvents
    from cairn.session.mcp import McpSessionState
    from cairn.session.models import ModelOption
    from cairn.session.rewind import Rewinder, RewindListing, RewindOutcome
    from cairn.session.runtime import Runtime
    from cairn.tools.ignore import IgnoreRules
    from cairn.tools.sandbox import SandboxPolicy

__all__ = ["PromptRequest", "Session"]

MAX_REQUESTS_PER_TURN = 100  # model requests in one logical turn (tool loop + continuations)
STOP_HOOK_BLOCK_CAP = 8  # times a Stop hook may keep the agent going in one turn
TODO_REMINDER_CAP = 3  # reminders to finish open todo items in one turn
MAX_STEERING_QUEUE = 20  # mid-turn messages kept until the next tool-result request
CONTINUE_CUT_PROMPT = (
    "Your previous answer was cut at its output bound. Continue exactly where it stopped, "
    "without repeating what you already wrote; make a tool call that was cut again, in smaller "
    "pieces if it was large."
)
CUT_CALL_ERROR = (  # a call in an answer cut at its output bound: it may be incomplete
    "Not run: your answer was cut at its output bound before this call was complete."
)
LOOP_STOP_NOTE = (
    "System: this turn was stopped because the model repeated itself (loop protection). "
    "Try a different approach on the next turn."
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


class _TurnState(Value, frozen=False):
    request: PromptRequest
    sink: EventSink
    abort: AbortController
    result: TurnResult
    stop_hook_blocks: int = 0
    todo_reminders: int = 0
    texts: list[str] = field(default_factory=list)
    streaming: list[str] = field(default_factory=list)  # the model response being streamed
    thoughts: list[str] = field(default_factory=list)


class Session:
    def __init__(
        self,
        runtime: Runtime,
        *,
        session_id: str,
        frontend: Frontend,
        approval_mode: str | None,
        cwd: Path,
        fs: FileSystem | None = None,
        loaded: LoadedSession | None = None,
        mcp_servers: Sequence[ServerConfig] = (),
        command_runner: CommandRunner | None = None,
        extra_roots: Sequence[Path] = (),
        gate: PermissionGate = OPEN_GATE,
    ) -> None:
        self.runtime = runtime
        self.id = session_id
        self.frontend = frontend
        self.gate = gate
        if approval_mode is not None:  # before anything is recorded: a refusal leaves no trace
            gate.check_mode(runtime.settings.tools.approval_mode, approval_mode)
        self.cwd = cwd.resolve()
        # More folders the file tools may read and write (an editor's additionalDirectories).
        self.extra_roots = tuple(root.resolve() for root in extra_roots)
        self.settings = runtime.settings
        self.fs: FileSystem = fs or LocalFileSystem()
        self.command_runner = command_runner  # an editor's terminals; None: run locally
        self.approval_mode = approval_mode or self.settings.tools.approval_mode
        self._remember_turn = False  # the running turn came from /remember
        self._unlisten_memory: Callable[[], None] | None = None
        self.memory_writes = MemoryWrites(
            self._memory_if_on,
            session_id=session_id,
            asked=lambda: self._remember_turn,
            turn=lambda: self.turn_count,
        )
        self.registry = self.memory_writes.wrapped(default_registry())
        self.rules = PermissionRules.from_settings(self.settings.permissions)
        self.turn_count = 0
        self.todos: list[TodoItem] = _recorded_plan(loaded)
        self.created_at = runtime.clock()
        self._lock = asyncio.Lock()
        self._abort: AbortController | None = None
        self._turn_task: asyncio.Task[TurnResult] | None = None
        self._steering: deque[str] = deque(maxlen=MAX_STEERING_QUEUE)
        self._last_prompt: tuple[int, list[Part]] | None = None
        self._closed = False
        self._memory_generation = -1
        self.loaded = loaded
        self.pending_question = _pending_question(loaded)
        self._resume_offered = False
        self._listeners: list[EventSink] = []
        self._extra_commands: dict[str, tuple[SlashCommand, ...]] = {}  # by who added them
        self.turn_hooks: list[TurnHook] = [SessionTitles()]
        self._turn: _TurnState | None = None  # the turn running now
        self._answer_cut = False  # the last turn ended with an answer cut at its output bound
        self.pending_notices: list[Notice] = []  # shown when the next turn starts
        self.pending_context: list[str] = []  # hooks' context for the model's next prompt

        self._client_servers = tuple(mcp_servers)
        self.mcp = self._make_mcp(mcp_servers)
        self.recorder = self._make_recorder(loaded)
        self.command_environment = self._make_command_environment()
        self.hooks = self._make_hooks()
        self.checkpoints = self._make_checkpoints()
        self._trust_at_start = self._project_trust()
        self.scheduler = ToolScheduler(
            registry=self.registry,
            rules=self.rules,
            frontend=GatedFrontend(frontend, gate),
            approval_mode=lambda: self.approval_mode,
            hooks=self.hooks,
            before_change=self._before_change,
            settings_changed=self._settings_changed,
        )
        self.extensions = self._make_extensions()
        startup = self._startup_context()
        history = [*startup, *(loaded.history if loaded else [])]
        self.system_prompt = self.build_system_prompt()
        self.client = AgentClient(
            provider=runtime.provider,
            settings=self.settings,
            session_id=session_id,
            system_prompt=self.system_prompt.text,
            tools=self._tool_declarations,
            history=history,
            recall=self._make_recall(),
            recall_enabled=lambda: self.settings.memory.enable_managed_auto_memory,
            on_assistant=self._record_assistant,
            startup_length=len(startup),
        )
        self._last_prompt = self._find_last_prompt()
        self.hook_events = self._make_hook_events("resume" if loaded else "startup")

    # ----- construction helpers -----

    def _make_mcp(self, client_servers: Sequence[ServerConfig]) -> McpSessionState | None:
        """The session's MCP servers, connecting in the background; None when it has none."""
        servers = self.runtime.session_mcp(client_servers)
        if servers is None:
            return None
        from cairn.session.mcp import McpSessionState

        state = McpSessionState(
            servers,
            self.runtime.mcp_warnings,
            publish=lambda commands: self.set_commands("mcp", commands),  # its prompts
        )
        state.start()
        return state

    def _make_extensions(self) -> SessionExtensions:
        """Commands, skills and agents from files (cairn.session.extensions)."""
        from cairn.session.extensions import SessionExtensions

        extensions = SessionExtensions(self)
        extensions.load()
        self.turn_hooks.append(extensions)
        return extensions

    def _make_hook_events(self, source: str) -> SessionHookEvents:
        """SessionStart, SessionEnd, PreCompact and idle hooks (cairn.session.hook_events)."""
        from cairn.session.hook_events import SessionHookEvents

        events = SessionHookEvents(self)
        self.turn_hooks.append(events)
        events.start(source)
        return events

    def _tool_declarations(self) -> list[ToolDeclaration]:
        """What the model is offered on each request: the built-ins and the MCP servers' tools."""
        if self.mcp is not None:
            self.mcp.sync_tools(self.registry)
        return self.registry.declarations()

    def _make_recorder(self, loaded: LoadedSession | None) -> ChatRecorder | None:
        if not self.runtime.record_chats:
            return None
        from cairn.recording.recorder import ChatRecorder

        return ChatRecorder(
            self.runtime.chats_dir / f"{self.id}.jsonl",
            session_id=self.id,
            cwd=self.cwd,  # the session's own folder: session/list filters by it
            version=self.runtime.version,
            parent_uuid=loaded.last_uuid if loaded else None,
        )

    def _make_command_environment(self) -> dict[str, str]:
        """What shell commands and hooks run with: cairn's environment without its secrets."""
        return self.runtime.command_environment()

    def _make_hooks(
        self, hooks: HooksSettings | None = None, *, disabled: bool | None = None
    ) -> HookRunner:
        from cairn.hooks.runner import HookRunner

        return HookRunner(
            hooks if hooks is not None else self.settings.hooks,
            cwd=self.cwd,
            session_id=self.id,
            transcript_path=self.recorder.path if self.recorder else None,
            disabled=self.settings.disable_all_hooks if disabled is None else disabled,
            environ=self.command_environment,
        )

    # ----- settings a tool call changed (cairn.tools.protected; the tools track) -----

    async def _settings_changed(self, what: str, approval: str, sink: EventSink) -> None:
        """A change the user approved in its "Settings change" dialog applies to this session's
        permission rules and hooks at once; one nobody confirmed (yolo) waits for the next
        start of cairn, where the project's trust check sees it."""
        from cairn.config.loader import SettingsError, load_settings
        from cairn.tools.scheduler import SETTINGS_APPLIED_NOTICE, SETTINGS_KEPT_NOTICE

        if approval != "user":
            await sink(Notice("warning", _sentence(SETTINGS_KEPT_NOTICE, what), "permissions"))
            return
        trust = await asyncio.to_thread(self._keep_trust)
        if trust is not None and not trust.trusted:
            await sink(Notice("warning", trust.notice, "permissions"))
        try:
            loaded = await asyncio.to_thread(load_settings, self.cwd)
        except SettingsError as exc:
            text = f"{_sentence(SETTINGS_KEPT_NOTICE, what)} It cannot be used: {exc}"
            await sink(Notice("error", text, "permissions"))
            return
        self.rules = self.scheduler.rules = PermissionRules.from_settings(
            loaded.settings.permissions
        )
        self.hooks = self.scheduler.hooks = self._make_hooks(
            loaded.settings.hooks, disabled=loaded.settings.disable_all_hooks
        )
        await sink(Notice("info", _sentence(SETTINGS_APPLIED_NOTICE, what), "permissions"))

    def _project_trust(self) -> ProjectTrust | None:
        from cairn.config.trust import project_trust

        try:
            return project_trust(self.runtime.project_root)
        except OSError as exc:
            _log.warning(f"trusted folders unreadable: {exc}")
            return None

    def _keep_trust(self) -> ProjectTrust | None:
        """A trusted folder stays trusted with the commands the user just approved (trusted
        folders: config/trust.py); None when trust cannot be recorded."""
        from cairn.config.trust import TrustFileError, keep_trust_after_approved_change

        if self._trust_at_start is None:
            return None
        try:
            return keep_trust_after_approved_change(self.runtime.project_root, self._trust_at_start)
        except TrustFileError as exc:
            _log.warning(str(exc))
            return None

    def _make_checkpoints(self) -> TurnCheckpoints | None:
        if self.recorder is None:
            return None  # a checkpoint is tied to its turn in the recording
        from cairn.session.checkpoints import TurnCheckpoints

        return TurnCheckpoints(
            self.runtime.project_root, self.settings.general.checkpointing, self.recorder
        )

    def _may_change_unasked(self) -> bool:
        """Whether a turn's changes can run without an approval nobody could give (worth the
        shadow index in the background): never in plan mode; with no one to ask (cairn -p),
        only in auto-edit or yolo. A change an allow rule lets through is checkpointed anyway."""
        if self.approval_mode == "plan":
            return False
        return self.frontend.interactive or self.approval_mode in ("auto-edit", "yolo")

    def _make_recall(self) -> RecallHandle | None:
        if not self.runtime.memory_enabled:
            return None
        from cairn.memory import RecallLifecycle

        manager = self.runtime.memory_manager()
        if self._unlisten_memory is None:
            self._unlisten_memory = manager.add_change_listener(self._memory_changed)
        return RecallLifecycle(manager, self.runtime.provider, session_id=self.id)

    # ----- memory saved outside a turn (Extract or Dream after the answer) -----

    def _stop_memory_listener(self) -> None:
        if self._unlisten_memory is not None:
            self._unlisten_memory()
            self._unlisten_memory = None

    async def _memory_changed(self, session_id: str, change: MemoryChanged | Notice) -> None:
        """What Extract saved (or that it failed) for this session, after its turn."""
        if session_id == self.id:  # after close too: `cairn -p` shows what its Extract saved
            await self.emit(change)

    def _memory_if_on(self) -> MemoryManager | None:
        if not self.settings.memory.enable_managed_auto_memory:
            return None
        return self.runtime.memory_manager()

    def build_system_prompt(self) -> SystemPrompt:
        files, warnings = collect_context_files(self.cwd, self.settings.context.file_name)
        for warning in warnings:
            _log.warning(warning)
        memory = ""
        if self.settings.memory.enable_managed_auto_memory and self.runtime.memory_warming:
            self._memory_generation = -1  # built again once the warm-up is over
        elif self.settings.memory.enable_managed_auto_memory:
            try:
                manager = self.runtime.memory_manager()
                self._memory_generation = manager.generation
                memory = manager.system_prompt_section()
            except Exception as exc:
                _log.warning(f"memory prompt section unavailable: {exc!r}")
        return build_system_prompt(
            context_files=render_context_files(files),
            memory_section=memory,
            skills=self.extensions.skills_section(),
        )

    def refresh_system_prompt(self) -> None:
        self.client.attach_recall(self._make_recall)  # memory may have been turned on since
        self.system_prompt = self.build_system_prompt()
        self.client.system_prompt = self.system_prompt.text

    async def _memory_settled(self) -> None:
        """Wait for the runtime's memory warm-up; the memory section follows once it is over."""
        if not self.settings.memory.enable_managed_auto_memory:
            return
        await self.runtime.memory_ready()
        if self._memory_generation == -1:
            self.refresh_system_prompt()

    def _refresh_if_memory_changed(self) -> None:
        """Extract, Dream or Forget changed the memory files: show the new index next turn."""
        if not self.settings.memory.enable_managed_auto_memory:
            return
        if self.runtime.memory_manager().generation != self._memory_generation:
            self.refresh_system_prompt()

    def _record_assistant(self, content: Content, model: str, usage: Usage) -> None:
        if self.recorder is not None:
            self.recorder.record_assistant(content, model=model, usage=usage.to_dict())

    def _find_last_prompt(self) -> tuple[int, list[Part]] | None:
        entries = self.client.history.shallow()
        for index in range(len(entries) - 1, self.client.startup_length - 1, -1):
            entry = entries[index]
            if entry.role == "user" and not any(
                isinstance(p, FunctionResponse) for p in entry.parts
            ):
                return index, list(entry.parts)
        return None

    # ----- state a front end reads or changes -----

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def history(self) -> list[Content]:
        return self.client.history.shallow()

    # ----- outside a turn: listeners, commands, resume -----

    def listen(self, sink: EventSink) -> Callable[[], None]:
        """Receive the events that happen outside a turn (a mode set by a route, commands added
        by an MCP server ...); a turn's own events go to the sink its prompt gave. Returns the
        function that stops listening."""
        self._listeners.append(sink)

        def remove() -> None:
            if sink in self._listeners:
                self._listeners.remove(sink)
            if self._closed and not self._listeners:
                self._stop_memory_listener()

        return remove

    async def emit(self, event: SessionEvent) -> None:
        """Send an event that is not part of a turn to every listener. Never raises."""
        for sink in list(self._listeners):
            try:
                await sink(event)
            except Exception as exc:  # one broken listener must not stop the others
                _log.warning(f"a session listener failed on {type(event).__name__}: {exc!r}")

    def commands(self) -> tuple[SlashCommand, ...]:
        """The slash commands of this session: the built-ins, then what others added."""
        return (*COMMANDS, *(c for added in self._extra_commands.values() for c in added))

    async def set_commands(self, source: str, commands: Sequence[SlashCommand]) -> None:
        """Offer ``commands`` (an MCP server's prompts, command files ...) in place of what
        ``source`` offered before; a name that is already taken is skipped with a warning.
        Every listener learns the new list (ACP ``available_commands_update``)."""
        self.offer_commands(source, commands)
        await self.emit(CommandsChanged(self.command_infos()))

    def offer_commands(self, source: str, commands: Sequence[SlashCommand]) -> None:
        """:meth:`set_commands` without telling anyone (a session being built)."""
        taken = {c.name.lower() for c in COMMANDS}
        for other, added in self._extra_commands.items():
            if other != source:
                taken.update(c.name.lower() for c in added)
        kept: list[SlashCommand] = []
        for command in commands:
            if command.name.lower() in taken:
                _log.warning(f"/{command.name} from {source} is skipped: the name is taken")
                continue
            taken.add(command.name.lower())
            kept.append(command)
        self._extra_commands[source] = tuple(kept)

    def command_infos(self) -> tuple[CommandInfo, ...]:
        return tuple(CommandInfo(c.name, c.description, c.hint) for c in self.commands())

    def resume_request(self) -> PromptRequest | None:
        """After a load, the turn a front end runs first: a question the session was asking
        when it stopped (``ask_user_question``) is asked again, and its answer continues the
        interrupted turn. ``None`` when there is none, when nobody can answer (the next prompt
        then answers it), or once it was given."""
        if self.pending_question is None or self._resume_offered or not self.frontend.interactive:
            return None
        self._resume_offered = True
        return PromptRequest(text="", restore_question=True)

    def steering_refusal(self, text: str) -> str | None:
        """Why ``text`` cannot steer the running turn (a command line is never steering)."""
        from cairn.session.commands import steering_refusal

        return steering_refusal(text, self.commands())

    # ----- prompts -----

    async def attach(self, blocks: Sequence[Any]) -> Attachments:
        """Build a prompt from content blocks (text blocks' ``@path`` mentions included), with
        files read inside this session's workspace through its file system."""
        return await build_attachments(
            blocks, workspace=self.cwd, fs=self.fs, denied=self._read_denied
        )

    async def attach_text(self, text: str) -> Attachments:
        """:meth:`attach` for a prompt typed as text (the terminal UI, ``cairn -p``)."""
        return await self.attach([{"type": "text", "text": text}])

    def _read_denied(self, path: Path) -> bool:
        match = self.rules.match(ToolName.READ_FILE, {"file_path": str(path)}, self.cwd)
        return match is not None and match.decision == "deny"

    async def set_approval_mode(self, mode: str, sink: EventSink | None = None) -> None:
        from cairn.config.settings import APPROVAL_MODES

        if mode not in APPROVAL_MODES:
            raise ValueError(
                f"unknown approval mode {mode!r}; use one of {', '.join(APPROVAL_MODES)}"
            )
        self.gate.check_mode(self.approval_mode, mode)  # WideningRefused past a closed gate
        self.approval_mode = mode
        if self.recorder is not None:  # session/load restores it
            self.recorder.record_system(APPROVAL_MODE, {"mode": mode})
        await (sink or self.emit)(ModeChanged(mode))  # inside a turn its sink; else listeners

    # ----- the model (the picker: cairn.session.models) -----

    @property
    def model(self) -> str:
        """The model this session's requests go to."""
        return self.client.session_model

    def model_options(self) -> list[ModelOption]:
        """The models this session may switch to (``model.available``; the current one too)."""
        return self.runtime.models.options(self.model)

    async def set_model(self, model: str, sink: EventSink | None = None) -> ModelOption:
        """Send this session's next requests to ``model`` (other sessions keep theirs).

        A ``model.available`` entry is served by its own endpoint; any other name goes to the
        main endpoint. Raises :class:`~cairn.session.models.ModelSwitchError` for a blank name
        or an entry whose endpoint is not set up; the session then keeps its model."""
        from cairn.session.models import ModelOption, ModelSwitchError

        name = model.strip()
        if not name:
            raise ModelSwitchError("the model name is empty")
        catalog = self.runtime.models
        option = catalog.find(name)
        self.client.provider = catalog.provider_for(option)
        self.client.session_model = name
        await (sink or self.emit)(ModelChanged(name))  # inside a turn its sink; else listeners
        return option or ModelOption(name, name, listed=False)

    def steer(self, text: str) -> bool:
        """Queue text typed while a turn runs; it reaches the model with the next tool results.
        False for blank text and command lines (see :meth:`steering_refusal`)."""
        if not text.strip() or self.steering_refusal(text) is not None:
            return False
        self._steering.append(text)
        return True

    def cancel(self, reason: str = "user_cancel") -> bool:
        """Cancel the running turn. Returns False when nothing was running."""
        if self._abort is None or self._abort.signal.aborted:
            return False
        task = self._turn_task
        if task is not None and task.done():
            return False
        # Before the turn task exists (the sink is still taking TurnStarted) the abort alone
        # is enough: prompt() cancels the task as soon as it creates it.
        self._abort.abort(reason)
        if task is not None:
            task.cancel()
        return True

    def _startup_context(self) -> list[Content]:
        if self.settings.model.skip_startup_context:
            return []
        return startup_context(self.cwd, extra_dirs=self.extra_roots)

    async def clear(self) -> None:
        """``/clear``: a fresh conversation in the same session."""
        startup = self._startup_context()
        self.client.reset(startup)
        self.todos = []
        self._last_prompt = None
        self.refresh_system_prompt()
        await self.hook_events.cleared()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._listeners:  # a front end still listening hears its last Extract first
            self._stop_memory_listener()
        self.cancel("session_dispose")
        if self._turn_task is not None:
            await asyncio.gather(self._turn_task, return_exceptions=True)
        await self.hook_events.end("other")
        await self.hook_events.close()
        self.client.cancel_recall("shutdown")
        if self.mcp is not None:
            await self.mcp.aclose()  # the servers its client passed in
        if self.checkpoints is not None:
            await self.checkpoints.close()  # a preparation still running is stopped
        if self.recorder is not None:
            # Closing syncs the recording to disk (an fsync, ~3 ms here): off the event loop,
            # which other sessions (daemon, ACP) share.
            await asyncio.to_thread(self.recorder.close)

    # ----- the turn -----

    async def prompt(self, request: PromptRequest, sink: EventSink) -> TurnResult:
        """Run one logical turn and return how it ended. Never raises for model errors."""
        if request.fresh and self.busy:
            refusal = busy_refusal(request.text, self.commands())
            if refusal is not None:  # e.g. /recap while a turn runs: refused, not queued
                await sink(Notice("error", refusal, "command"))
                return TurnResult("end_turn", text=refusal, fresh=True, handled_locally=True)
        async with self._lock:
            self.turn_count += 1
            prompt_id = f"{self.id}########{self.turn_count}"
            abort = AbortController()
            self._abort = abort
            state = _TurnState(request, sink, abort, TurnResult("end_turn", fresh=request.fresh))
            self._turn = state
            with bind_session(self.id):
                await sink(TurnStarted(prompt_id, request.fresh))
                await self._memory_settled()
                await self._run_hooks(state, lambda hook: hook.turn_started(self, request))
                while self.pending_notices:
                    await sink(self.pending_notices.pop(0))
                small = self.client.window_warning()  # a window the fixed prompt cannot fit
                if small is not None:
                    await sink(Notice("warning", small, "context"))
                task = asyncio.ensure_future(self._execute(state))
                self._turn_task = task
                if abort.signal.aborted:  # cancelled while TurnStarted was being delivered
                    task.cancel()
                try:
                    result = await task
                except (asyncio.CancelledError, Aborted):
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        task.cancel()
                        raise
                    result = state.result
                    result.stop_reason = "cancelled"
                    result.usage.add(self.client.take_unfinished_usage())  # paid for all the same
                    self._record_cancelled_answer(state)
                finally:
                    self.client.finish_recall()
                    self._remember_turn = False
                    self.client.model_override = None
                    self._turn_task = None
                    self._abort = None
                    self._turn = None
                result.text = "".join(state.texts) if not result.text else result.text
                await self._run_hooks(state, lambda hook: hook.turn_ended(self, result))
                await sink(TurnEnded(result))
                return result

    def _record_cancelled_answer(self, state: _TurnState) -> None:
        """What a cancelled response had shown is kept for a replay (never for the model)."""
        text = "".join(state.streaming)
        state.streaming.clear()
        if text.strip() and self.recorder is not None:
            self.recorder.record_system(CANCELLED_ANSWER, {"text": text})

    async def _run_hooks(
        self, state: _TurnState, call: Callable[[TurnHook], Awaitable[None]]
    ) -> None:
        for hook in list(self.turn_hooks):
            try:
                await call(hook)
            except Exception as exc:  # a hook is never a reason for a turn to fail
                _log.warning(f"turn hook {type(hook).__name__} failed: {exc!r}")
                await state.sink(
                    Notice("warning", f"{type(hook).__name__} failed: {exc}", "turn_hook")
                )

    async def _before_change(self, emit: EventSink) -> None:
        """A call that may change the workspace is about to run: the checkpoint, then hooks."""
        if self.checkpoints is not None:
            await self.checkpoints.before_change(emit)
        state = self._turn
        if state is not None and self.turn_hooks:
            await self._run_hooks(state, lambda hook: hook.before_change(self))

    async def _execute(self, state: _TurnState) -> TurnResult:
        request, result = state.request, state.result
        try:
            parts = await self._prepare(state)
        except ProviderError as exc:
            return self._failed(result, exc)
        if parts is None:
            return result
        kind = SendKind.USER_QUERY if request.fresh else SendKind.CONTINUATION
        if request.retry:
            kind = SendKind.RETRY
        try:
            await self._loop(state, parts, kind)
        except ProviderError as exc:
            return self._failed(result, exc)
        if (
            request.fresh
            and result.stop_reason == "end_turn"
            and not result.loop_stopped
            and not result.blocked
            and not result.handled_locally
        ):
            self._schedule_memory_tasks()
        return result

    def _failed(self, result: TurnResult, exc: ProviderError) -> TurnResult:
        result.stop_reason = "error"
        result.error = str(exc)
        result.error_status = exc.status
        _log.error(f"turn failed: {exc}")
        return result

    async def _prepare(self, state: _TurnState) -> list[Part] | None:
        """Build the first request of the turn; ``None`` when the turn ends before the model."""
        request, result, sink = state.request, state.result, state.sink
        if self.mcp is not None:
            await self.mcp.before_first_request(self.settings.mcp.discovery_timeout_ms / 1000, sink)
        if request.restore_question:
            return await self._restored_answer(state)
        if request.continue_turn:
            return self._continuation_parts(result)
        if request.retry:
            if self._last_prompt is None:
                await sink(Notice("warning", "There is no earlier prompt to retry.", "session"))
                return None
            index, retried = self._last_prompt
            self.client.history.truncate(index)
            return list(retried)

        for warning in request.warnings:
            await sink(Notice("warning", warning, "attachment"))
        parts: list[Part] = list(request.parts) if request.parts else [Text(request.text)]
        user_parts = list(parts)
        if request.fresh and request.text.lstrip().startswith("/"):
            command = await run_slash_command(self, request.text.strip(), sink)
            if command is not None:
                if command.prompt is None:
                    result.handled_locally = True
                    result.text = command.message or ""
                    result.unknown_command = command.unknown
                    result.blocked = command.refused  # e.g. a command file's step was refused
                    return None
                parts = list(command.parts) if command.parts else [Text(command.prompt)]
                self._remember_turn = command.remember
                self.client.model_override = command.model
                user_parts = list(parts)
        if request.fresh and self.mcp is not None and "@" in request.text:
            from cairn.session.mcp import resource_mentions

            attached = await resource_mentions(self.mcp.servers, request.text, sink)
            parts += attached
            user_parts += attached

        hook_context: str | None = None
        if request.origin == "user" and self.hooks.has("UserPromptSubmit"):
            outcome = await self.hooks.user_prompt_submit(request.text)
            for warning in outcome.warnings:
                await sink(Notice("warning", warning, "hook"))
            if outcome.system_message:
                await sink(Notice("info", outcome.system_message, "hook"))
            if outcome.blocked:
                reason = outcome.reason or "No reason provided"
                await sink(Notice("error", f"UserPromptSubmit blocked: {reason}", "hook"))
                result.blocked = True
                result.text = f"UserPromptSubmit blocked: {reason}"
                return None
            if outcome.additional_context:
                hook_context = outcome.additional_context
                parts.append(
                    Text(
                        "<cairn:user-prompt-submit-context>"
                        f"{hook_context}</cairn:user-prompt-submit-context>"
                    )
                )

        if request.fresh and self.pending_context:  # SessionStart hooks' context
            joined = "\n".join(self.pending_context)
            self.pending_context.clear()
            parts.append(
                Text(f"<cairn:session-start-context>{joined}</cairn:session-start-context>")
            )

        if self.recorder is not None and request.origin == "user":
            user_uuid = self.recorder.record_user(
                Content("user", user_parts),
                display_text=request.display_text,
                hook_context=hook_context,
            )
            if self.checkpoints is not None:
                self.checkpoints.start_turn(user_uuid, prepare=self._may_change_unasked())
        if request.fresh:
            # Recall starts only after the hook let the prompt through, with the raw text.
            self.client.begin_recall(request.text, state.abort.signal)
            self._refresh_if_memory_changed()

        reminders: list[Part] = []
        if self.approval_mode == "plan":
            reminders.append(plan_mode_reminder())
        if request.fresh:
            delivery = await self.client.consume_recall("initial")
            if delivery is not None:
                reminders.insert(0, recall_part(delivery))
                await sink(MemoryRecalled(delivery.memories, delivery.phase))
        self._last_prompt = (len(self.client.history), list(parts))
        return insert_after_function_responses(parts, reminders)

    def _continuation_parts(self, result: TurnResult) -> list[Part] | None:
        """Continue a turn that was interrupted (a crash, a cancel, a dropped connection)."""
        history = self.client.history
        dangling = history.dangling_calls()
        if self._answer_cut and not dangling:  # go on from where the output bound cut it
            self._answer_cut = False
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
        result.handled_locally = True
        return None

    async def _restored_answer(self, state: _TurnState) -> list[Part] | None:
        """Ask a pending ``ask_user_question`` again and continue the turn with the answer."""
        calls = [
            c for c in self.client.history.dangling_calls() if c.name == ToolName.ASK_USER_QUESTION
        ]
        self.pending_question = None
        if not calls:
            state.result.handled_locally = True
            return None
        outcomes = await self._run_tools(state, calls)
        return [o.response for o in outcomes]

    async def _loop(self, state: _TurnState, parts: list[Part], kind: SendKind) -> None:
        result, sink = state.result, state.sink
        while True:
            if result.requests >= MAX_REQUESTS_PER_TURN:
                result.stop_reason = "max_turn_requests"
                result.limit = "max_requests"
                await sink(
                    Notice("warning", f"Stopped after {MAX_REQUESTS_PER_TURN} model requests.")
                )
                return
            result.requests += 1
            finished = await self._send(state, parts, kind)
            if finished is None:
                return  # a limit or loop protection ended the turn
            self._answer_cut = False
            if finished.reason not in ("stop", "tool_calls") and await self._unfinished(
                state, finished
            ):
                return  # cut at the output bound, or withheld: said, and the calls not run
            if finished.calls:
                outcomes = await self._run_tools(state, list(finished.calls))
                responses: list[Part] = [o.response for o in outcomes]
                if any(o.status == "rejected" for o in outcomes):
                    # The user declined: keep the answers in history and hand control back.
                    self.client.history.append(Content("user", responses))
                    return
                stopped = next((o.stop_reason for o in outcomes if o.stop_reason), None)
                if stopped is not None:  # a PostToolUse hook said `continue: false`
                    self.client.history.append(Content("user", responses))
                    await sink(Notice("warning", f"A hook stopped the turn: {stopped}", "hook"))
                    return
                parts = [*responses, *self._drain_steering()]
                kind = SendKind.TOOL_RESULT
                continue
            next_parts = await self._after_stop(state, finished.text)
            if next_parts is None:
                return
            if self.recorder is not None:
                self.recorder.record_user(Content("user", next_parts), provenance="continuation")
            parts, kind = next_parts, SendKind.CONTINUATION

    async def _send(
        self, state: _TurnState, parts: list[Part], kind: SendKind
    ) -> AgentFinished | None:
        result, sink = state.result, state.sink
        async for event in self.client.send(parts, kind=kind, abort=state.abort.signal):
            if isinstance(event, AssistantText):
                state.texts.append(event.text)
                state.streaming.append(event.text)
                await sink(event)
            elif isinstance(event, AssistantThought):
                state.thoughts.append(event.text)
                await sink(event)
            elif isinstance(event, StreamReset):
                state.texts.clear()
                state.streaming.clear()
                state.thoughts.clear()
                await sink(event)
            elif isinstance(event, AgentCompressed):
                info = event.result
                compressed = info.status is CompressionStatus.COMPRESSED
                level: Literal["info", "warning"] = "info" if compressed else "warning"
                await sink(Notice(level, info.describe(), "compression"))
            elif isinstance(event, AgentLimit):
                result.stop_reason = (
                    "max_turn_requests" if event.kind == "max_session_turns" else "max_tokens"
                )
                result.limit = event.kind
                await sink(Notice("error", event.message, "limit"))
                return None
            elif isinstance(event, AgentLoop):
                result.usage.add(event.usage)  # the cut answer was paid for all the same
                await self._stop_for_loop(state, event.info.loop_type, event.info.detail)
                return None
            elif isinstance(event, MemoryRecalled):
                await sink(event)
            elif isinstance(event, AgentFinished):
                state.streaming.clear()  # recorded with the response
                result.usage.add(event.usage)
                thought = "".join(state.thoughts)
                state.thoughts.clear()
                await sink(
                    AssistantMessage(
                        event.text,
                        thought,
                        event.calls,
                        event.usage,
                        self.client.model,
                        finish_reason=event.reason,
                    )
                )
                await sink(
                    UsageUpdate(
                        event.usage, self.client.last_prompt_tokens, self.client.context_window
                    )
                )
                if event.text:
                    result.text = event.text
                return event
        return None

    async def _unfinished(self, state: _TurnState, finished: AgentFinished) -> bool:
        """The model did not simply finish: say why in every front end. An answer cut at its
        output bound (``length``) or withheld by a content filter ends the turn, its calls
        answered as not run (they may be incomplete); returns whether the turn ends."""
        result, reason = state.result, finished.reason
        result.finish_reason = reason
        if reason not in ("length", "filter"):
            text = f"The model stopped for a reason cairn does not know: {reason!r}."
            await state.sink(Notice("warning", text, "output"))
            return False
        if reason == "length":
            result.stop_reason = "max_tokens"
            self._answer_cut = True
            text = (
                f"The answer was cut at its output bound of {self.client.output_bound()} tokens "
                "(model.generationConfig.maxOutputTokens.main); send 'continue' to let the "
                "model go on."
            )
        else:
            result.stop_reason = "refusal"
            text = "The endpoint's content filter withheld the rest of the answer."
        await state.sink(Notice("warning", text, "output"))
        if finished.calls:
            cut: list[Part] = [
                FunctionResponse(c.id, c.name, {"error": CUT_CALL_ERROR}) for c in finished.calls
            ]
            self.client.history.append(Content("user", cut))
        return True

    async def _stop_for_loop(self, state: _TurnState, loop_type: str, detail: str) -> None:
        state.result.loop_type = loop_type
        await state.sink(Notice("error", f"Loop detected: {detail}. The turn was stopped.", "loop"))
        calls = self.client.history.dangling_calls()
        preserved: list[Part] = [
            FunctionResponse(c.id, c.name, {"error": "Skipped: loop protection stopped the turn."})
            for c in calls
        ]
        self.client.history.append(Content("user", [*preserved, Text(LOOP_STOP_NOTE)]))

    def tool_context(self, abort: AbortSignal | None = None) -> ToolContext:
        """What this session's tool calls run with; ``abort``: the running turn's signal."""
        if abort is None:
            abort = self._abort.signal if self._abort is not None else AbortController().signal
        readable = self.extensions.readable_roots  # the folders of skills loaded here
        return ToolContext(
            workspace=self.cwd,
            abort=abort,
            fs=self.fs,
            interaction=self.frontend,
            session_id=self.id,
            shell_timeout=self.settings.tools.shell_timeout_seconds,
            environment=self.command_environment,
            readable_roots=[self.cwd, *self.extra_roots, *readable]
            if readable or self.extra_roots
            else None,
            writable_roots=[self.cwd, *self.extra_roots] if self.extra_roots else None,
            sandbox=self._sandbox_policy(),
            ignore=self._ignore_rules(),
            commands=self.command_runner,
        )

    async def _run_tools(self, state: _TurnState, calls: list[FunctionCall]) -> list[ToolOutcome]:
        ctx = self.tool_context(state.abort.signal)
        outcomes = await self.scheduler.run(calls, ctx, state.sink)
        for change in self.memory_writes.drain():
            await state.sink(change)
        for outcome in outcomes:
            if outcome.terminal and self.registry.get(outcome.call.name) is not None:
                self.client.record_completed_tool_call(outcome.call.name, outcome.call.args)
            if outcome.result is not None and outcome.result.todos is not None:
                self.todos = list(outcome.result.todos)
        if self.recorder is not None:
            self.recorder.record_tool_result(
                Content("user", [o.response for o in outcomes]),
                tool_results=[_tool_call_result(o) for o in outcomes],
            )
        return outcomes

    def _ignore_rules(self) -> IgnoreRules | None:
        filtering = self.settings.context.file_filtering
        if not (filtering.respect_git_ignore or filtering.respect_cairn_ignore):
            return None
        from cairn.tools.ignore import IgnoreRules

        return IgnoreRules(
            self.runtime.project_root,
            gitignore=filtering.respect_git_ignore,
            cairnignore=filtering.respect_cairn_ignore,
        )

    def _sandbox_policy(self) -> SandboxPolicy | None:
        return self.runtime.sandbox_policy(self.cwd, run_later=self._run_later)

    def _run_later(self) -> list[tuple[str, Path]]:
        """What cairn runs outside the sandbox, with its folder: hooks and stdio MCP servers
        (the files they name stay read-only in the sandbox)."""
        import shlex

        found = [(command, self.cwd) for command in self.hooks.commands()]
        for server in (*self.runtime.mcp_servers, *self._client_servers):
            if server.transport == "stdio" and server.command:
                folder = self.cwd / server.cwd if server.cwd else self.cwd
                found.append((shlex.join([server.command, *server.args]), folder))
        return found

    def _drain_steering(self, *, record: bool = True) -> list[Part]:
        parts: list[Part] = []
        while self._steering:
            text = self._steering.popleft()
            part = steering_text(text)
            if record and self.recorder is not None:
                self.recorder.record_system(
                    "mid_turn_user_message", {"text": text}, content=Content("user", [part])
                )
            parts.append(part)
        return parts

    async def _after_stop(self, state: _TurnState, last_text: str) -> list[Part] | None:
        """The model wants to stop: Stop hooks, open todos and late steering may continue it."""
        sink = state.sink
        if state.abort.signal.aborted:
            return None
        if self.hooks.has("Stop") and state.stop_hook_blocks < STOP_HOOK_BLOCK_CAP:
            outcome = await self.hooks.stop(
                last_assistant_message=last_text or self.client.history.last_model_text(),
                stop_hook_active=state.stop_hook_blocks > 0,  # already kept going by one
            )
            for warning in outcome.warnings:
                await sink(Notice("warning", warning, "hook"))
            if outcome.system_message:
                await sink(Notice("info", outcome.system_message, "hook"))
            if outcome.stop:  # `continue: false` wins over a block: the agent stops now
                await sink(Notice("info", f"Stop hook: {outcome.stop_reason}", "hook"))
                return None
            if outcome.blocked:
                state.stop_hook_blocks += 1
                reason = outcome.reason or "No reason provided"
                if state.stop_hook_blocks >= STOP_HOOK_BLOCK_CAP:
                    await sink(
                        Notice(
                            "warning",
                            f"A Stop hook blocked stopping {STOP_HOOK_BLOCK_CAP} times; "
                            "the turn ends here.",
                            "hook",
                        )
                    )
                    return None
                await sink(Notice("info", f"Stop hook: {reason}", "hook"))
                return [Text(reason)]
        open_items = [t for t in self.todos if t.status in ("pending", "in_progress")]
        if open_items and state.todo_reminders < TODO_REMINDER_CAP:
            state.todo_reminders += 1
            listing = "\n".join(f"- [{t.status}] {t.content}" for t in open_items)
            return [
                system_reminder(
                    f"You ended your turn with {len(open_items)} todo item(s) still open:\n"
                    f"{listing}\nContinue working on them, or update the list with todo_write "
                    "if they are done or no longer needed."
                )
            ]
        late = self._drain_steering(record=False)  # recorded as the continuation itself
        if late:
            return late
        return None

    # ----- after a successful fresh turn -----

    def _schedule_memory_tasks(self) -> None:
        """Schedule Extract and Dream once, with the final history; never awaited."""
        if not self.settings.memory.enable_managed_auto_memory:
            return
        manager = self.runtime.memory_manager()
        history = self.client.history.shallow()
        try:
            manager.schedule_extract(
                project_root=self.runtime.project_root,
                session_id=self.id,
                history=history,
                runtime=self.runtime,
            )
            manager.schedule_dream(
                project_root=self.runtime.project_root, session_id=self.id, runtime=self.runtime
            )
        except Exception as exc:
            _log.warning(f"scheduling memory tasks failed: {exc!r}")

    # ----- rewind: code and conversation back to before a turn (session/rewind.py) -----

    def rewinder(self) -> Rewinder:
        from cairn.session.rewind import Rewinder, RewindError

        if self.recorder is None:
            raise RewindError("rewind needs the chat recording, which is off for this session")
        return Rewinder(
            recording=self.recorder.path,
            project_root=self.runtime.project_root,
            settings=self.settings,
            recorder=self.recorder,
            history_offset=self.client.startup_length,
        )

    async def rewind_listing(self) -> RewindListing:
        """The turns ``/rewind`` offers, newest first, with the files changed since each."""
        return await asyncio.to_thread(self.rewinder().listing)

    async def rewind(
        self,
        turn: int,
        mode: RewindMode = "both",
        *,
        check_busy: bool = True,
        announce: bool = True,
    ) -> RewindOutcome:
        """Go back to before user turn ``turn`` (1 = the first); :class:`RewindError` if not,
        :class:`~cairn.session.gate.WideningRefused` past a closed gate.

        ``announce``: tell the session's listeners (an editor, the daemon's clients) what was
        done; a caller that shows the outcome itself turns it off."""
        self._refuse_rewind_while_busy(check_busy)
        self.gate.check_unasked("Rewinding")
        outcome = await asyncio.to_thread(self.rewinder().rewind, turn, mode)
        await self._after_rewind(outcome, announce)
        return outcome

    async def undo_rewind(self, *, check_busy: bool = True, announce: bool = True) -> RewindOutcome:
        """Reverse the newest rewind (code and conversation as they were before it)."""
        self._refuse_rewind_while_busy(check_busy)
        self.gate.check_unasked("Undoing a rewind")
        outcome = await asyncio.to_thread(self.rewinder().undo)
        await self._after_rewind(outcome, announce)
        return outcome

    def _refuse_rewind_while_busy(self, check_busy: bool) -> None:
        from cairn.session.rewind import RewindError

        if check_busy and self.busy:
            raise RewindError("cannot rewind while a turn is running; cancel it first")

    async def _after_rewind(self, outcome: RewindOutcome, announce: bool) -> None:
        if announce:
            await self.emit(Notice("info", outcome.message, "rewind"))
        if outcome.loaded is None:
            return
        from cairn.session.rewind import clamp_extract_cursor

        startup = self.client.history.shallow()[: self.client.startup_length]
        self.client.reset(startup)  # also lets memories shown in the dropped turns surface again
        self.client.history.replace([*startup, *outcome.loaded.history])
        self.todos = []
        self._last_prompt = self._find_last_prompt()
        if outcome.history_length is not None:
            await clamp_extract_cursor(self.runtime, self.id, outcome.history_length)

    # ----- recap -----

    async def recap(self, abort: AbortSignal | None = None) -> str | None:
        """A "where were we" recap of this session (``None`` when there is too little)."""
        return (await self.recap_outcome(abort)).text

    async def recap_outcome(self, abort: AbortSignal | None = None) -> Recap:
        """:meth:`recap`, with the reason when there is no recap (the model was too slow, its
        answer was not a recap, there is too little conversation ...)."""
        from cairn.recap.service import session_recap

        return await session_recap(self, abort)

    async def show_recap(self, text: str, sink: EventSink, *, away: bool = False) -> None:
        """Put a recap into the conversation: recorded (a resume replays it), then shown."""
        if self.recorder is not None:
            try:
                # Only the result phase: a resume must not replay a "/recap" the user never typed.
                self.recorder.record_slash_command(
                    phase="result",
                    raw_command="/recap",
                    output_items=[{"type": "away_recap", "text": text}],
                )
            except Exception as exc:  # recording a recap is best-effort
                _log.warning(f"recording the recap failed: {exc!r}")
        await sink(RecapShown(text, away=away))


def _sentence(template: str, what: str) -> str:
    text = template.format(what=what)
    return text[0].upper() + text[1:]


def _pending_question(loaded: LoadedSession | None) -> FunctionCall | None:
    if loaded is None:
        return None
    from cairn.recording.reader import pending_question

    return pending_question(loaded)


def _recorded_plan(loaded: LoadedSession | None) -> list[TodoItem]:
    if loaded is None:
        return []  # a new session: the recording's reader and the mapper stay unimported
    from cairn.session.updates import recorded_plan

    return recorded_plan(loaded.items)


def new_session_id() -> str:
    return str(uuid.uuid4())


def prompt_text(blocks: Sequence[str]) -> str:
    return " ".join(b for b in blocks if b)


def _tool_call_result(outcome: ToolOutcome) -> dict[str, Any]:
    """A call's ``toolCallResult`` entry: its status and what people saw (summary, diff,
    places), so a replay shows what the live call showed."""
    from cairn.recording.records import diff_record, locations_record

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
    return entry
