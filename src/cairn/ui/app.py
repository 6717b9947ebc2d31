"""The interactive terminal UI: a Textual app over one session of the shared runtime.

Every turn runs through :meth:`Session.prompt`; this module only turns input into prompt
requests and the session's events into widgets, plus what only a terminal has: dialogs, the
prompt box, ``!cmd``, terminal focus (for the away recap) and the UI-only commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import OptionList, Static

from cairn._version import __version__
from cairn.config.settings import APPROVAL_MODES
from cairn.content import Image
from cairn.debug_log import get_logger, set_process_session
from cairn.exit_codes import ExitCode
from cairn.recap.away import AwayRecapTracker, RecapTicket
from cairn.recording.records import MID_TURN_USER_MESSAGE
from cairn.recording.replay import ReplayItem
from cairn.session.commands import busy_refusal, parse_command_line
from cairn.session.runtime import Runtime, SessionNotFound
from cairn.session.session import PromptRequest, Session
from cairn.session.updates import describe_call
from cairn.ui.commands import UiCommands
from cairn.ui.completion import BUILTIN_COMMANDS, UI_COMMANDS
from cairn.ui.frontend import TuiFrontend
from cairn.ui.input_history import InputHistory
from cairn.ui.prompt import CompletionMenu, PromptInput
from cairn.ui.rewind import RewindCommand
from cairn.ui.shell import start_shell
from cairn.ui.status import StatusLine
from cairn.ui.styles import CSS, NARROW_COLUMNS, share_parsed_css
from cairn.ui.terminal_filter import ControlCharacterFilter
from cairn.ui.transcript import (
    NoticeView,
    RecapView,
    SteerView,
    ToolOutput,
    Transcript,
    TurnRenderer,
    UserView,
    replay_widgets,
)
from cairn.vocabulary.events import (
    CommandInfo,
    ModeChanged,
    ModelChanged,
    RecapShown,
    SessionEvent,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageUpdate,
)
from cairn.vocabulary.tool_calls import ToolKind

__all__ = ["QUIT_WINDOW_SECONDS", "CairnApp"]

QUIT_WINDOW_SECONDS = 2.0  # a second Ctrl+C within this time quits
QUIT_MEMORY_WAIT_SECONDS = 10.0  # on quit, how long a running Extract may still finish
KEYS_HELP = (
    "Terminal UI: /resume [id] picks a recorded session · /settings changes settings · /quit "
    "leaves.\nKeys: Enter sends · Ctrl+J or Shift+Enter (or a trailing \\) adds a line · "
    "Up/Down walk the prompt history · Tab completes · Shift+Tab cycles the approval mode · "
    "Esc interrupts the turn · Ctrl+O expands tool output · Ctrl+C clears the prompt or "
    "cancels the turn, twice quits.\nType while the agent works to steer it; "
    "@path attaches a file; !cmd runs a shell command here."
)
_UI_COMMAND_NAMES = frozenset(c.name for c in UI_COMMANDS)
_log = get_logger("UI")


# Signals that end cairn as /quit does (the terminal closed; a service manager stops it).
TERMINATION_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


class WelcomeView(Static):
    def __init__(self, text: Text) -> None:
        super().__init__(text, classes="welcome")


class CairnApp(App[int]):
    """``cairn`` with no prompt: the conversation, the prompt box and the status line."""

    CSS = CSS
    ENABLE_COMMAND_PALETTE = False
    TITLE = "cairn"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Cancel / quit", priority=True, show=False),
        Binding("shift+tab", "cycle_approval_mode", "Approval mode", priority=True, show=False),
        Binding("escape", "interrupt_turn", "Interrupt the turn", show=False),
        Binding("ctrl+o", "toggle_outputs", "Expand tool output", show=False),
    ]

    _control_filter = ControlCharacterFilter()

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the one that keeps control characters off the terminal."""
        return [*super().get_line_filters(), self._control_filter]

    def __init__(
        self,
        runtime: Runtime,
        *,
        approval_mode: str | None = None,
        resume: str | None = None,
        session_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        warnings: Sequence[str] = (),
        initial_prompt: str | None = None,
    ) -> None:
        """``clock`` times the away recap and the working indicator (tests move it);
        ``initial_prompt`` is submitted once the session is on screen.

        The app closes ``runtime`` on exit.
        """
        super().__init__()
        share_parsed_css(self)
        self.runtime = runtime
        self.frontend = TuiFrontend(self, runtime.cwd)
        self.history = InputHistory()
        self.tracker = AwayRecapTracker(
            clock=clock,
            enabled=lambda: runtime.settings.general.show_session_recap,
            threshold_minutes=lambda: runtime.settings.general.session_recap_away_threshold_minutes,
        )
        self.turn_task: asyncio.Task[TurnResult | None] | None = None
        self.recap_task: asyncio.Task[None] | None = None
        self.shell_tasks: set[asyncio.Task[None]] = set()
        self._session: Session | None = None
        self._unlisten: Callable[[], None] = _nothing
        self._approval_mode = approval_mode
        self._resume = resume
        self._session_id = session_id
        self._warnings = list(warnings)
        self._initial_prompt = initial_prompt
        self._last_interrupt: float | None = None
        self._quitting = False
        self._queued: deque[str] = deque()  # commands typed while a turn ran, run after it
        self._pending_quit: asyncio.Future[None] | None = None  # a signal's /quit
        self.resume_hint: str | None = None  # printed once the UI is gone (launch.py)
        self.menu = CompletionMenu()
        self.prompt_input = PromptInput(
            history=self.history, cwd=runtime.cwd, menu=self.menu, commands=self._commands
        )
        self.transcript = Transcript(id="transcript")
        self.status = StatusLine(clock)
        self.renderer = TurnRenderer(self.transcript, runtime.cwd)

    # ----- layout and life cycle -----

    def compose(self) -> Any:
        yield self.transcript
        yield self.menu
        yield self.prompt_input
        yield self.status

    @property
    def session(self) -> Session:
        """The session on screen (there is one from mount until the app exits)."""
        if self._session is None:
            raise RuntimeError("the session is not open yet")
        return self._session

    @property
    def busy(self) -> bool:
        """A turn is running (or about to): new text steers it instead of starting another."""
        running = self.turn_task is not None and not self.turn_task.done()
        return running or (self._session is not None and self._session.busy)

    def on_resize(self) -> None:
        self.set_class(self.size.width < NARROW_COLUMNS, "-narrow")

    async def on_mount(self) -> None:
        self.on_resize()
        self._handle_termination()
        self.transcript.anchor()
        session = self._open_first_session()
        if session is None:
            return
        await self.show_session(session)
        for warning in self._warnings:
            await self.transcript.add(NoticeView("warning", warning))
        self.watch(self, "app_focus", self._focus_changed, init=False)
        self.prompt_input.focus()
        if self._initial_prompt:
            self.history.add(self._initial_prompt)
            await self.submit(self._initial_prompt)

    def _handle_termination(self) -> None:
        """SIGHUP (the terminal went away) and SIGTERM end cairn as ``/quit`` does: the session
        closes (SessionEnd hooks, checkpoint work stopped) instead of the process just dying."""
        loop = asyncio.get_running_loop()
        for signum in TERMINATION_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._terminated)

    def _terminated(self) -> None:
        if self._quitting:  # asked twice: leave now (on_unmount still closes the session)
            self.exit(0)
            return
        self._pending_quit = asyncio.ensure_future(self.quit_app())

    async def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in TERMINATION_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        tasks = [t for t in (self.turn_task, self.recap_task, *self.shell_tasks) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            self.resume_hint = _resume_hint(self._session)
            await self._session.close()
        await self.runtime.aclose()

    def _open_first_session(self) -> Session | None:
        if self._resume:
            try:
                return self.runtime.load_session(
                    self._resume, frontend=self.frontend, approval_mode=self._approval_mode
                )
            except SessionNotFound as exc:
                self.exit(ExitCode.BAD_INPUT, return_code=ExitCode.BAD_INPUT, message=str(exc))
                return None
        return self.runtime.new_session(
            frontend=self.frontend, session_id=self._session_id, approval_mode=self._approval_mode
        )

    def _commands(self) -> Sequence[CommandInfo]:
        return self._session.command_infos() if self._session is not None else BUILTIN_COMMANDS

    async def show_session(self, session: Session, *, resumed: bool = True) -> None:
        """Make ``session`` the current one: replay its history, seed the recap gates, and ask
        again a question it was asking when it stopped."""
        self._unlisten()
        self._session = session
        self._unlisten = session.listen(self._sink)
        set_process_session(session.id)
        await self.transcript.remove_children()
        await self.transcript.add(WelcomeView(self._welcome_text()))
        loaded = session.loaded
        if loaded is not None:
            steering = {
                r["uuid"] for r in loaded.records if r.get("subtype") == MID_TURN_USER_MESSAGE
            }
            widgets = replay_widgets(
                loaded.items,
                steering,
                title_of=_title_of(session),
                kind_of=_kind_of(session),
                base=session.cwd,
                command_notes={"help": KEYS_HELP},  # as _after_command adds it live
            )
            await self.transcript.add(*widgets)
            self._seed_from_replay(loaded.items, steering)
            used = session.client.context_used()  # how full the context is, as it was live
            self.status.set(context_tokens=used.context_tokens, context_window=used.context_window)
            if resumed:
                await self.transcript.add(NoticeView("info", f"Resumed session {session.id}."))
        else:
            self.tracker.reset()
        self._refresh_status()
        resume = session.resume_request()
        if resume is not None:
            self.turn_task = asyncio.create_task(self._run_prompt(resume, None))

    def _seed_from_replay(self, items: Sequence[ReplayItem], steering: set[str]) -> None:
        """Prompts of a resumed session feed the input history and the away-recap gates."""
        turns = 0
        since: int | None = None
        for item in items:
            if item.kind == "user_text" and item.uuid not in steering:
                turns += 1
                self.history.add(item.text)
                if since is not None:
                    since += 1
            elif item.kind == "recap":
                since = 0
        self.tracker.reset(user_turns=turns, turns_since_recap=since)

    def _welcome_text(self) -> Text:
        cwd = _home_relative(self.runtime.cwd)
        text = Text()
        text.append(f"cairn {__version__}", style="bold")
        text.append(f"  ·  {self.runtime.provider.model}  ·  {cwd}", style="dim")
        text.append(
            "\nEnter sends · Ctrl+J new line · /help · @file · !cmd · Esc interrupts · "
            "Ctrl+C twice quits",
            style="dim",
        )
        return text

    # ----- input -----

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        await self.submit(message.text, message.images)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A click on a completion takes it."""
        if event.option_list is self.menu:
            current = self.menu.current
            if current is not None:
                self.prompt_input.apply_completion(current)
            self.prompt_input.focus()

    async def submit(self, text: str, images: Sequence[Image] = ()) -> None:
        """Handle one submitted prompt: a shell command, a UI command, steering or a turn.

        ``images`` were pasted into the prompt box as image files; they go with a turn.
        """
        stripped = text.strip()
        if not stripped:
            return
        if stripped.startswith("!"):
            await start_shell(self, stripped[1:].strip())
            return
        name, args = _command_name(stripped)
        if name in _UI_COMMAND_NAMES:
            await UiCommands(self).run(name, args)
            return
        if name == "rewind":  # a picker here; the shared command answers in text elsewhere
            await RewindCommand(self).run(args)
            return
        if name == "model" and not args.strip() and not self.busy:
            from cairn.ui.model_picker import pick_model

            if pick_model(self):
                return
        line = parse_command_line(stripped, self.session.commands())
        if self.busy:
            commands = self.session.commands()
            waits = line is not None and line.command is not None
            await self._while_busy(text, queue=waits and busy_refusal(text, commands) is None)
            return
        command = line.name if line else None
        await self.transcript.add(UserView(text))  # now: what is typed next shows below it
        self.turn_task = asyncio.create_task(self._run_turn(text, command, images))
        self.turn_task.add_done_callback(self._turn_done)

    async def _while_busy(self, text: str, *, queue: bool) -> None:
        """Text steers the running turn; a command waits for it to end, in the order typed."""
        if queue:
            self._queued.append(text)
            return
        refusal = self.session.steering_refusal(text)  # the session's command policy
        if refusal is not None:
            await self.transcript.add(NoticeView("error", refusal))
        elif self.session.steer(text):
            await self.transcript.add(SteerView(text))

    def _turn_done(self, task: asyncio.Task[TurnResult | None]) -> None:
        if self._queued and not self._quitting:
            self.call_later(self._next_queued)

    async def _next_queued(self) -> None:
        if self._queued and not self.busy:
            await self.submit(self._queued.popleft())

    async def _run_turn(
        self, text: str, command: str | None, images: Sequence[Image] = ()
    ) -> TurnResult | None:
        session = self.session
        if command is not None:
            request = PromptRequest(text=text, display_text=text)
        else:
            blocks = [{"type": "text", "text": text}, *(_image_block(i) for i in images)]
            attachments = await session.attach(blocks)  # its warnings come with the turn
            if attachments.attached:
                await self.transcript.add(
                    NoticeView("info", "Attached " + ", ".join(attachments.attached) + ".")
                )
            request = PromptRequest.attaching(attachments)
        return await self._run_prompt(request, command)

    async def _run_prompt(self, request: PromptRequest, command: str | None) -> TurnResult | None:
        session = self.session
        result: TurnResult | None = None
        try:
            result = await session.prompt(request, self._sink)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a turn failure is shown, never a crash
            _log.error(f"turn failed: {exc!r}")
            await self.transcript.add(NoticeView("error", f"The turn failed: {exc}"))
        finally:
            self.status.set(busy=False)
        await self._after_command(command)
        self._refresh_status()
        self._maybe_fire(self.tracker.turn_ended())
        return result

    async def _after_command(self, command: str | None) -> None:
        if command == "clear":
            await self.transcript.remove_children()
            await self.transcript.add(WelcomeView(self._welcome_text()))
            await self.transcript.add(NoticeView("info", "Started a fresh conversation."))
            self.tracker.reset()
        elif command == "help":
            await self.transcript.add(NoticeView("info", KEYS_HELP))

    async def _sink(self, event: SessionEvent) -> None:
        if isinstance(event, TurnStarted):
            self.tracker.turn_started()
            self.status.set(busy=True)
        elif isinstance(event, UsageUpdate):
            self.status.set(
                context_tokens=event.context_tokens,
                context_window=event.context_window,
                cached_tokens=event.usage.cached_tokens,
            )
        elif isinstance(event, ModeChanged):
            self.status.set(approval_mode=event.approval_mode)
        elif isinstance(event, ModelChanged):
            self.status.set(model=event.model)
        elif isinstance(event, TurnEnded):
            if event.result.fresh and not event.result.handled_locally:
                self.tracker.user_turn()
        elif isinstance(event, RecapShown):
            await self.transcript.add(RecapView(event.text))
            self.tracker.recap_shown()
            return
        await self.renderer.handle(event)

    # ----- the away recap -----

    def _focus_changed(self, focused: bool) -> None:
        if not focused:
            self.tracker.blur()
            return
        self._maybe_fire(self.tracker.focus())

    def _maybe_fire(self, ticket: RecapTicket | None) -> None:
        if ticket is None or self._session is None:
            return
        self.recap_task = asyncio.create_task(self._away_recap(ticket, self._session))

    async def _away_recap(self, ticket: RecapTicket, session: Session) -> None:
        text = await session.recap()
        if not self.tracker.finish(ticket, text) or session is not self._session or not text:
            return
        await session.show_recap(text, self._sink, away=True)

    # ----- keys -----

    def on_key(self, event: events.Key) -> None:
        """Typing while a history item has the focus goes to the prompt box."""
        if (
            event.is_printable
            and event.character
            and not isinstance(self.screen, ModalScreen)
            and self.focused is not self.prompt_input
        ):
            event.stop()
            self.prompt_input.focus()
            self.prompt_input.insert(event.character)

    def action_interrupt(self) -> None:
        """Ctrl+C: clear the draft, else cancel the turn or ``!`` command; twice quits."""
        if self._quitting:
            self.exit(0)  # Ctrl+C while memory is being saved: leave now
            return
        if isinstance(self.screen, ModalScreen) or not self.prompt_input.is_mounted:
            self._interrupt(draft=False)
        else:
            # Behind the keys the prompt box has not handled yet, so it sees the draft they make.
            self.prompt_input.call_later(self._interrupt, draft=True)

    def _interrupt(self, *, draft: bool) -> None:
        if draft and self.prompt_input.text:
            self.prompt_input.clear_draft()  # never arms quit: the next Ctrl+C keeps a new draft
            self._last_interrupt = None
            self.status.set(hint="")
            return
        now = time.monotonic()
        last, self._last_interrupt = self._last_interrupt, now
        if last is not None and now - last <= QUIT_WINDOW_SECONDS:
            self.run_worker(self.quit_app(), exclusive=True, group="quit")
            return
        self._cancel_running()
        self.status.set(hint="Press Ctrl+C again to quit")
        self.set_timer(QUIT_WINDOW_SECONDS, self._clear_hint)

    def action_toggle_outputs(self) -> None:
        """Ctrl+O: expand every clipped tool output, or collapse them all again."""
        outputs = [o for o in self.query(ToolOutput) if o.expandable]
        expand = not all(o.expanded for o in outputs)
        for output in outputs:
            output.set_expanded(expand)

    def action_interrupt_turn(self) -> None:
        """Esc: interrupt the running turn (or ``!`` command); the draft stays."""
        self._cancel_running()

    def _cancel_running(self) -> bool:
        """Cancel the running turn, else the running ``!`` commands; False if nothing ran."""
        if self.busy:
            if not (self._session and self._session.cancel()) and self.turn_task:
                self.turn_task.cancel()
            return True
        if self.shell_tasks:
            for task in self.shell_tasks:
                task.cancel()
            return True
        return False

    def _clear_hint(self) -> None:
        if self._last_interrupt is None or time.monotonic() - self._last_interrupt >= (
            QUIT_WINDOW_SECONDS - 0.05
        ):
            self.status.set(hint="")

    async def action_cycle_approval_mode(self) -> None:
        if isinstance(self.screen, ModalScreen):
            self.screen.focus_previous()
            return
        if self._session is None:
            return
        modes = list(APPROVAL_MODES)
        current = self.session.approval_mode
        following = modes[(modes.index(current) + 1) % len(modes)] if current in modes else modes[0]
        await self.session.set_approval_mode(following)
        self.status.set(approval_mode=following)

    # ----- UI-only commands -----

    async def quit_app(self) -> None:
        """Leave, after letting a running memory extraction finish (bounded)."""
        if self._quitting:
            return
        self._quitting = True
        if self.busy and self._session is not None:
            self._session.cancel("user_quit")
        await self._drain_memory()
        self.exit(0)

    async def _drain_memory(self) -> None:
        """The shutdown's memory wait, while the UI can still say so (on_unmount then closes
        the runtime without waiting again)."""
        if not self.runtime.memory_enabled:
            return
        self.status.set(hint="Saving memories… (Ctrl+C leaves now)")
        await self.runtime.drain_memory(QUIT_MEMORY_WAIT_SECONDS)

    async def setting_saved(self, key: str, value: Any) -> None:
        """A setting saved from ``/settings``: the session on screen and the status line follow."""
        if key == "tools.approvalMode" and self._session is not None:
            await self._session.set_approval_mode(str(value))
        if key == "memory.enableManagedAutoMemory" and self._session is not None:
            self._session.refresh_system_prompt()
        self._refresh_status()

    # ----- helpers for tests and the status line -----

    def _refresh_status(self) -> None:
        if self._session is None:
            return
        self.status.set(
            model=self._session.model,
            approval_mode=self._session.approval_mode,
            memory=self.runtime.settings.memory.enable_managed_auto_memory,
        )

    async def wait_until_idle(self) -> None:
        """Wait for the running turn and away recap (tests and scripted use)."""
        for task in (self.turn_task, self.recap_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def history_widgets(self) -> list[Widget]:
        return list(self.transcript.children)


def _title_of(session: Session) -> Callable[[str, Mapping[str, Any]], str]:
    def title(name: str, args: Mapping[str, Any]) -> str:
        return describe_call(session.registry, name, args)[0]

    return title


def _resume_hint(session: Session) -> str | None:
    """How to come back to ``session``, when it recorded anything."""
    recorder = session.recorder
    try:
        if recorder is None or recorder.path is None or recorder.path.stat().st_size == 0:
            return None
    except OSError:
        return None
    return (
        f"Resume this session with: cairn --resume {session.id}\n"
        "(or cairn --continue, the latest session of this folder)"
    )


def _nothing() -> None:
    return None


def _kind_of(session: Session) -> Callable[[str], ToolKind | None]:
    def kind(name: str) -> ToolKind | None:
        tool = session.registry.get(name)
        return tool.kind if tool is not None else None

    return kind


def _image_block(image: Image) -> dict[str, str]:
    """A pasted image as the content block the attachment builder takes."""
    return {"type": "image", "mimeType": image.mime_type, "data": image.data, "uri": image.source}


def _command_name(text: str) -> tuple[str | None, str]:
    if not text.startswith("/"):
        return None, ""
    head, _, args = text[1:].partition(" ")
    return head.strip().lower() or None, args.strip()


def _home_relative(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except (ValueError, RuntimeError):
        return str(path)
