"""The session: one conversation's identity, settings and collaborators, and the API every front
end uses (prompts, cancel, steering, listeners, commands, modes, models, rewind, recaps).

How a turn runs is :mod:`cairn.session.turn`, its memory :mod:`cairn.session.memory`; its
satellites (commands, command and skill files, lifecycle hooks, MCP servers, rewind, titles)
register through methods (``add_turn_hook``, ``set_commands``, ``carry.add_notice`` ...), never
assigning into it or its collaborators (``tests/session/test_satellites.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.abort import AbortController, AbortSignal
from cairn.agent.client import AgentClient
from cairn.agent.prompt import SystemPrompt, build_system_prompt
from cairn.config.context_files import render_context_files
from cairn.content import Content, FunctionCall
from cairn.debug_log import bind_session, get_logger
from cairn.recording.records import APPROVAL_MODE
from cairn.session.attachments import Attachments, build_attachments
from cairn.session.checkpoints import TurnCheckpoints
from cairn.session.commands import CommandList, SlashCommand, busy_refusal
from cairn.session.gate import OPEN_GATE, GatedFrontend, PermissionGate
from cairn.session.listeners import Listeners
from cairn.session.live_settings import LiveSettings
from cairn.session.memory import SessionMemory
from cairn.session.task_state import TaskState
from cairn.session.titles import SessionTitles
from cairn.session.turn import Carryover, PromptRequest, Turn, newest_prompt
from cairn.session.turn_hooks import TurnHook
from cairn.session.workspace import SessionWorkspace, run_outside
from cairn.tools.base import CommandRunner, FileSystem, TodoItem, ToolContext
from cairn.tools.permissions import PermissionRules
from cairn.tools.registry import default_registry
from cairn.tools.scheduler import ToolScheduler
from cairn.vocabulary.events import (
    CommandInfo,
    CommandsChanged,
    EventSink,
    ModeChanged,
    ModelChanged,
    Notice,
    RecapShown,
    SessionEvent,
    TurnResult,
)
from cairn.vocabulary.interaction import Frontend
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.hooks.runner import HookRunner
    from cairn.llm.types import ToolDeclaration
    from cairn.mcp.config import ServerConfig
    from cairn.recap.service import Recap
    from cairn.recording.reader import LoadedSession
    from cairn.recording.rewind import RewindMode
    from cairn.session.checkpoints import TurnCheckpoints
    from cairn.session.extensions import SessionExtensions
    from cairn.session.hook_events import SessionHookEvents
    from cairn.session.mcp import McpSessionState
    from cairn.session.models import ModelOption
    from cairn.session.rewind import RewindListing, RewindOutcome, SessionRewind
    from cairn.session.runtime import Runtime
    from cairn.tools.sandbox import RunLater

__all__ = ["PromptRequest", "Session"]

_log = get_logger("SESSION")


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
        self.settings = runtime.settings
        self._client_servers = tuple(mcp_servers)  # an editor's: they run outside the sandbox
        self.workspace = SessionWorkspace.of(
            runtime, cwd, extra_roots, fs, command_runner, run_later=self._run_later
        )
        self.cwd = self.workspace.cwd
        self.approval_mode = approval_mode or self.settings.tools.approval_mode
        self.loaded = loaded
        self.turn_count = 0
        self.created_at = runtime.clock()
        self._lock = asyncio.Lock()
        self._turn: Turn | None = None  # the turn running now
        self._closed = False
        self._listeners = Listeners()
        self._commands = CommandList()
        self.turn_hooks: list[TurnHook] = [SessionTitles()]
        self.carry = Carryover.of(loaded)
        self.task_state = TaskState.of(self, loaded)  # a turn hook: the task checkpoint
        self.memory = SessionMemory(
            runtime, session_id, emit=self.emit, asked=self._remembering, turn=self._turn_number
        )
        self.registry = self.memory.writes.wrapped(default_registry())

        self.mcp = self._make_mcp(mcp_servers)
        self.recorder = runtime.chat_recorder(session_id, self.cwd, loaded)
        self.checkpoints = TurnCheckpoints.of(runtime.project_root, self.settings, self.recorder)
        transcript = self.recorder.path if self.recorder else None
        self.live_settings = LiveSettings(
            self.workspace,
            session_id,
            transcript,
            provider=runtime.provider,  # prompt hooks ask the fast model
            approval_mode=lambda: self.approval_mode,
            env_file=runtime.chats_dir.parent / "session-env" / f"{session_id}.sh",
        )
        self.scheduler = ToolScheduler(
            registry=self.registry,
            rules=PermissionRules.from_settings(self.settings.permissions),
            frontend=GatedFrontend(frontend, gate),
            approval_mode=lambda: self.approval_mode,
            hooks=self.hooks,
            before_change=self._before_change,
            settings_changed=lambda what, approval, sink: self.live_settings.changed(
                self.scheduler, what, approval, sink
            ),
        )
        self.extensions = self._make_extensions()
        startup = self.workspace.startup_context()
        self.system_prompt = self.build_system_prompt()
        self.client = AgentClient(
            provider=runtime.provider,
            settings=self.settings,
            session_id=session_id,
            system_prompt=self.system_prompt.text,
            tools=self._tool_declarations,
            history=[*startup, *(loaded.history if loaded else [])],
            recall=self.memory.recall_handle(),
            recall_enabled=lambda: self.memory.on,
            on_assistant=self.recorder.record_answer if self.recorder else None,
            startup_length=len(startup),
        )
        if self.recorder is not None:  # a resume starts from the history a compression left
            self.client.on_compacted(self.recorder.record_compression)
        self.client.last_prompt_tokens = loaded.context_tokens() if loaded else 0
        self.task_state.attach(self.client, loaded)  # compression, and where a crash left it
        self.carry.remember_prompt(newest_prompt(self.client))
        self.hook_events = self._make_hook_events("resume" if loaded else "startup")

    # ----- construction -----

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
            tell=self.emit,  # a server the first request went without is ready
        )
        state.start()
        return state

    def _make_extensions(self) -> SessionExtensions:
        """Commands, skills and agents from files (cairn.session.extensions)."""
        from cairn.session.extensions import SessionExtensions

        extensions = SessionExtensions(self)
        extensions.load()
        self.add_turn_hook(extensions)
        return extensions

    def _make_hook_events(self, source: str) -> SessionHookEvents:
        """SessionStart, SessionEnd, PreCompact and idle hooks (cairn.session.hook_events)."""
        from cairn.session.hook_events import SessionHookEvents

        events = SessionHookEvents(self)
        self.client.on_compress(events.pre_compact, events.compacted)
        self.add_turn_hook(events)
        events.start(source)
        return events

    def _tool_declarations(self) -> list[ToolDeclaration]:
        """What the model is offered on each request: the built-ins and the MCP servers' tools."""
        if self.mcp is not None:
            self.mcp.sync_tools(self.registry)
        return self.registry.declarations()

    def add_turn_hook(self, hook: TurnHook) -> None:
        """Let ``hook`` follow every turn of this session (see :class:`TurnHook`)."""
        self.turn_hooks.append(hook)

    # ----- the system prompt and memory (cairn.session.memory) -----

    def build_system_prompt(self) -> SystemPrompt:
        files = self.workspace.context_files(self.settings.context.file_name, self.carry)
        return build_system_prompt(
            context_files=render_context_files(files),
            memory_section=self.memory.prompt_section(),
            skills=self.extensions.skills_section(),
        )

    def refresh_system_prompt(self) -> None:
        self.client.attach_recall(self.memory.recall_handle)  # memory may have been turned on
        self.system_prompt = self.build_system_prompt()
        self.client.system_prompt = self.system_prompt.text

    def _remembering(self) -> bool:
        return self._turn is not None and self._turn.remember

    def _turn_number(self) -> int:
        return self.turn_count

    def _run_later(self) -> list[RunLater]:
        servers = (*self.runtime.mcp_servers, *self._client_servers)
        return run_outside(self.cwd, self.hooks.commands(), servers)

    # ----- state a front end reads -----

    @property
    def hooks(self) -> HookRunner:
        return self.live_settings.hooks  # a settings change the user approved replaces it

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def history(self) -> list[Content]:
        return self.client.history.shallow()

    @property
    def todos(self) -> list[TodoItem]:
        return self.carry.todos

    @property
    def pending_question(self) -> FunctionCall | None:
        return self.carry.question

    # ----- outside a turn: listeners, commands, resume -----

    def listen(self, sink: EventSink) -> Callable[[], None]:
        """Receive the events that happen outside a turn (cairn.session.listeners); returns
        the function that stops listening."""
        return self._listeners.add(sink, removed=self._listener_removed)

    def _listener_removed(self) -> None:
        if self._closed and not self._listeners:
            self.memory.stop_listening()

    async def emit(self, event: SessionEvent) -> None:
        """Send an event that is not part of a turn to every listener. Never raises."""
        await self._listeners.emit(event)

    def commands(self) -> tuple[SlashCommand, ...]:
        """The slash commands of this session: the built-ins, then what others added."""
        return self._commands.all()

    async def set_commands(self, source: str, commands: Sequence[SlashCommand]) -> None:
        """Offer ``commands`` (an MCP server's prompts, command files ...) in place of what
        ``source`` offered before; a name that is already taken is skipped with a warning.
        Every listener learns the new list (ACP ``available_commands_update``)."""
        self.offer_commands(source, commands)
        await self.emit(CommandsChanged(self.command_infos()))

    def offer_commands(self, source: str, commands: Sequence[SlashCommand]) -> None:
        """:meth:`set_commands` without telling anyone (a session being built)."""
        self._commands.offer(source, commands)

    def command_infos(self) -> tuple[CommandInfo, ...]:
        return self._commands.infos()

    def resume_request(self) -> PromptRequest | None:
        """After a load, the turn a front end runs first: a question the session was asking
        when it stopped (``ask_user_question``) is asked again, and its answer continues the
        interrupted turn. ``None`` when there is none, when nobody can answer (the next prompt
        then answers it), or once it was given."""
        if not self.carry.ask_again(self.frontend.interactive):
            return None
        return PromptRequest(text="", restore_question=True)

    def steering_refusal(self, text: str) -> str | None:
        """Why ``text`` cannot steer the running turn (a command line is never steering)."""
        from cairn.session.commands import steering_refusal

        return steering_refusal(text, self.commands())

    # ----- prompts, modes, models -----

    async def attach(self, blocks: Sequence[Any]) -> Attachments:
        """Build a prompt from content blocks (text blocks' ``@path`` mentions included), with
        files read inside this session's workspace through its file system."""
        return await build_attachments(
            blocks, workspace=self.cwd, fs=self.workspace.fs, denied=self._read_denied
        )

    async def attach_text(self, text: str) -> Attachments:
        """:meth:`attach` for a prompt typed as text (the terminal UI, ``cairn -p``)."""
        return await self.attach([{"type": "text", "text": text}])

    def _read_denied(self, path: Path) -> bool:
        rules = self.scheduler.rules
        match = rules.match(ToolName.READ_FILE, {"file_path": str(path)}, self.cwd)
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

    @property
    def model(self) -> str:
        """The model this session's requests go to."""
        return self.client.session_model

    def model_options(self) -> list[ModelOption]:
        """The models this session may switch to (``model.available``; the current one too)."""
        return self.runtime.models.options(self.model)

    async def set_model(self, model: str, sink: EventSink | None = None) -> ModelOption:
        """Send this session's next requests to ``model`` (other sessions keep theirs); a
        ``model.available`` entry is served by its own endpoint, any other name by the main one.
        :class:`~cairn.session.models.ModelSwitchError` for a blank name or an entry whose
        endpoint is not set up; the session then keeps its model."""
        option, provider = self.runtime.models.choose(model)
        self.client.use_model(provider, model.strip())
        await (sink or self.emit)(ModelChanged(model.strip()))  # in a turn its sink; else listeners
        return option

    # ----- the turn (cairn.session.turn) -----

    async def prompt(self, request: PromptRequest, sink: EventSink) -> TurnResult:
        """Run one logical turn and return how it ended. Never raises for model errors."""
        if request.fresh and self.busy:
            refusal = busy_refusal(request.text, self.commands())
            if refusal is not None:  # e.g. /recap while a turn runs: refused, not queued
                await sink(Notice("error", refusal, "command"))
                return TurnResult("end_turn", text=refusal, fresh=True, handled_locally=True)
        if request.fresh and request.origin == "user":
            self.memory.user_said(request.text)  # when: it may restate a forgotten fact
        async with self._lock:
            self.turn_count += 1
            self._turn = Turn(self, request, sink, self.turn_count)
            try:
                with bind_session(self.id):
                    return await self._turn.play()
            finally:
                self._turn = None

    def steer(self, text: str) -> bool:
        """Queue text typed while a turn runs; it reaches the model with the next tool results.
        False for blank text and command lines (see :meth:`steering_refusal`)."""
        if not text.strip() or self.steering_refusal(text) is not None:
            return False
        self.carry.steer(text)
        self.memory.user_said(text)
        return True

    def cancel(self, reason: str = "user_cancel") -> bool:
        """Cancel the running turn. Returns False when nothing was running."""
        return self._turn is not None and self._turn.cancel(reason)

    def tool_context(self, abort: AbortSignal | None = None) -> ToolContext:
        """What this session's tool calls run with; ``abort``: the running turn's signal."""
        if abort is None:
            abort = self._turn.abort.signal if self._turn is not None else AbortController().signal
        return self.workspace.tool_context(
            abort,
            interaction=self.frontend,
            session_id=self.id,
            readable=self.extensions.readable_roots,  # the folders of skills loaded here
        )

    async def _before_change(self, emit: EventSink) -> None:
        """A call that may change the workspace is about to run: the checkpoint, then hooks."""
        if self.checkpoints is not None:
            await self.checkpoints.before_change(emit)
        turn = self._turn
        if turn is not None and self.turn_hooks:
            await turn.run_hooks(lambda hook: hook.before_change(self))

    # ----- a fresh conversation, the end -----

    async def clear(self) -> None:
        """``/clear``: a fresh conversation in the same session."""
        self.client.reset(self.workspace.startup_context())
        self.carry.clear()
        self.task_state.clear()
        self.refresh_system_prompt()
        await self.hook_events.cleared()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._listeners:  # a front end still listening hears its last Extract first
            self.memory.stop_listening()
        turn = self._turn
        if turn is not None:
            turn.cancel("session_dispose")
            await turn.wait()
        await self.task_state.close()
        await self.hook_events.end("other")
        await self.hook_events.close()
        self.client.close()  # Recall and a compression in the background are stopped
        if self.mcp is not None:
            await self.mcp.aclose()  # the servers its client passed in
        if self.checkpoints is not None:
            await self.checkpoints.close()  # a preparation still running is stopped
        if self.recorder is not None:
            # An fsync (~3 ms): off the event loop other sessions (daemon, ACP) share.
            await asyncio.to_thread(self.recorder.close)

    # ----- rewind: code and conversation back to before a turn (cairn.session.rewind) -----

    def _rewinds(self) -> SessionRewind:
        from cairn.session.rewind import SessionRewind

        return SessionRewind(self)

    async def rewind_listing(self) -> RewindListing:
        """The turns ``/rewind`` offers, newest first, with the files changed since each."""
        return await self._rewinds().listing()

    async def rewind(
        self,
        turn: int,
        mode: RewindMode = "both",
        *,
        check_busy: bool = True,
        announce: bool = True,
    ) -> RewindOutcome:
        """Go back to before user turn ``turn`` (1 = the first); ``announce``: tell the
        listeners what was done (see :meth:`SessionRewind.rewind`)."""
        return await self._rewinds().rewind(turn, mode, check_busy=check_busy, announce=announce)

    async def undo_rewind(self, *, check_busy: bool = True, announce: bool = True) -> RewindOutcome:
        """Reverse the newest rewind (code and conversation as they were before it)."""
        return await self._rewinds().undo(check_busy=check_busy, announce=announce)

    def restore_conversation(self, loaded: LoadedSession) -> None:
        """The conversation is ``loaded`` now (a rewind went back): the history after the
        startup context, no plan, the prompt to retry; memories shown in the dropped turns
        may surface again."""
        startup = self.client.history.shallow()[: self.client.startup_length]
        self.client.reset(startup)
        self.client.history.replace([*startup, *loaded.history])
        self.client.last_prompt_tokens = loaded.context_tokens()  # the status line's
        self.loaded = loaded
        self.carry.clear()
        self.task_state.reload(loaded)
        self.carry.remember_prompt(newest_prompt(self.client))

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
                self.recorder.record_recap(text)
            except Exception as exc:  # recording a recap is best-effort
                _log.warning(f"recording the recap failed: {exc!r}")
        await sink(RecapShown(text, away=away))
