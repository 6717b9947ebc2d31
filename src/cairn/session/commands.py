"""Slash commands every front end shares (``/recap``, ``/forget``, ``/compress`` ...).

A command either answers locally (no model turn, no Recall) or turns into a model-bound prompt
(``/remember``), which then runs as a fresh user turn. Front ends list :data:`COMMANDS` for
completion (the terminal UI) or ``available_commands_update`` (ACP).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cairn.config.settings import APPROVAL_MODES
from cairn.vocabulary.events import EventSink, Notice, UsageUpdate
from cairn.vocabulary.usage import Usage

if TYPE_CHECKING:
    from cairn.session.session import Session

__all__ = [
    "COMMANDS",
    "CommandOutcome",
    "SlashCommand",
    "busy_refusal",
    "find_command",
    "run_slash_command",
]

NO_RECAP_MESSAGE = "Not enough conversation context for a recap yet."
BUSY_MESSAGE = "Cannot run /{name} while another operation is in progress."
# Commands that must not wait behind a running turn.
_REFUSED_WHILE_BUSY = frozenset({"recap", "rewind"})


@dataclass
class CommandOutcome:
    message: str | None = None  # the answer (the turn's text)
    prompt: str | None = None  # model-bound: run this as the turn's prompt instead
    shown: bool = False  # the command already showed its answer (no notice needed)


Handler = Callable[["Session", str, EventSink], Awaitable[CommandOutcome]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    description: str
    handler: Handler
    hint: str | None = None  # what the argument is, for completion


async def _help(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    lines = [
        f"/{c.name}{' <' + c.hint + '>' if c.hint else ''} — {c.description}" for c in COMMANDS
    ]
    return CommandOutcome("\n".join(lines))


async def _clear(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    await session.clear()
    await _context_changed(session, sink)
    return CommandOutcome("Started a fresh conversation.")


async def _compress(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    result = await session.client.compress(force=True)
    await _context_changed(session, sink)
    return CommandOutcome(result.describe())


async def _context_changed(session: Session, sink: EventSink) -> None:
    """Front ends showing how full the context is learn its new size (no request was made)."""
    client = session.client
    await sink(UsageUpdate(Usage(), client.last_prompt_tokens, client.context_window))


async def _recap(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    recap = await session.recap()
    if recap is None:
        return CommandOutcome(NO_RECAP_MESSAGE)
    await session.show_recap(recap, sink)
    return CommandOutcome(recap, shown=True)


async def _memory(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    settings = session.settings.memory
    choice = args.strip().lower()
    if choice in ("on", "off"):
        settings.enable_managed_auto_memory = choice == "on"
        session.refresh_system_prompt()
        return CommandOutcome(f"Managed memory is now {choice} for this process.")
    if not settings.enable_managed_auto_memory:
        return CommandOutcome("Managed memory is off. `/memory on` turns it on.")
    manager = session.runtime.memory_manager()
    manager.store.refresh()
    docs = manager.store.docs()
    lines = [f"Managed memory is on: {len(docs)} memories."]
    lines += [f"- [{d.type}] {d.title} ({d.scope}: {d.relative_path})" for d in docs[:30]]
    if len(docs) > 30:
        lines.append(f"... and {len(docs) - 30} more (`cairn memory list`).")
    return CommandOutcome("\n".join(lines))


async def _remember(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    text = args.strip()
    if not text:
        return CommandOutcome("Usage: /remember <what to remember>")
    return CommandOutcome(
        prompt=(
            "Save this to managed memory so it is available in future sessions, following the "
            f"auto memory instructions (one file per memory, with front matter):\n\n{text}"
        )
    )


async def _forget(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    from cairn.tools.base import Question

    query = args.strip()
    if not query:
        return CommandOutcome("Usage: /forget <memory text to remove>")
    manager = session.runtime.memory_manager()
    plan = await manager.select_forget(query, provider=session.runtime.provider)
    if not plan.matches:
        return CommandOutcome(f"No managed memory matched: {query}")
    listing = "\n".join(f"- {m.title} ({m.label})" for m in plan.matches)
    if session.frontend.interactive:
        answer = await session.frontend.ask_user(
            [Question(f"Forget these memories?\n{listing}", ["Forget them", "Keep them"])]
        )
        if not answer or answer[0] != "Forget them":
            return CommandOutcome("Nothing was forgotten.")
    report = manager.apply_forget(plan, session_id=session.id)
    session.refresh_system_prompt()
    return CommandOutcome(
        f"{report.message}\n{listing}\n(`cairn memory restore` brings them back.)"
    )


async def _dream(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    manager = session.runtime.memory_manager()

    async def progress(text: str) -> None:
        await sink(Notice("info", text, "memory"))

    report = await manager.run_dream_now(
        session_id=session.id, runtime=session.runtime, progress=progress
    )
    session.refresh_system_prompt()
    return CommandOutcome(str(report))


async def _model(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    name = args.strip()
    if not name:
        return CommandOutcome(f"Current model: {session.runtime.provider.model}")
    session.set_model(name)
    return CommandOutcome(f"Model set to {name}.")


async def _approval_mode(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    mode = args.strip()
    if not mode:
        return CommandOutcome(
            f"Approval mode: {session.approval_mode} (one of {', '.join(APPROVAL_MODES)})."
        )
    if mode not in APPROVAL_MODES:
        return CommandOutcome(
            f"Unknown approval mode {mode!r}; use one of {', '.join(APPROVAL_MODES)}."
        )
    await session.set_approval_mode(mode, sink)
    return CommandOutcome(f"Approval mode set to {mode}.")


async def _rewind(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    from cairn.session.rewind import (
        REWIND_USAGE,
        RewindError,
        describe_listing,
        parse_rewind_args,
    )

    try:
        if args.strip().lower() == "undo":
            return CommandOutcome((await session.undo_rewind(check_busy=False)).message)
        parsed = parse_rewind_args(args)
        if parsed is None:
            return CommandOutcome(f"Usage: {REWIND_USAGE}")
        number, mode = parsed
        if number is None:
            return CommandOutcome(describe_listing(await session.rewind_listing()))
        return CommandOutcome((await session.rewind(number, mode, check_busy=False)).message)
    except RewindError as exc:
        return CommandOutcome(f"Cannot rewind: {exc}.")


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "List the slash commands", _help),
    SlashCommand("clear", "Start a fresh conversation in this session", _clear),
    SlashCommand("compress", "Summarise the conversation to free context", _compress),
    SlashCommand("recap", "A one- or two-sentence summary of where you left off", _recap),
    SlashCommand("memory", "Show managed memory, or turn it on or off", _memory, "on|off"),
    SlashCommand("remember", "Save something to managed memory", _remember, "text"),
    SlashCommand("forget", "Remove memories matching a description", _forget, "text"),
    SlashCommand("dream", "Consolidate project memory now", _dream),
    SlashCommand("model", "Show or switch the model", _model, "model name"),
    SlashCommand("approval-mode", "Show or set the approval mode", _approval_mode, "mode"),
    SlashCommand(
        "rewind", "Go back to before a turn (code, conversation or both)", _rewind, "N [mode]"
    ),
)


def find_command(text: str) -> tuple[SlashCommand, str] | None:
    """The command a ``/name args`` line names, with its argument text."""
    if not text.startswith("/"):
        return None
    name, _, args = text[1:].partition(" ")
    for command in COMMANDS:
        if command.name == name.strip().lower():
            return command, args.strip()
    return None


def busy_refusal(text: str) -> str | None:
    """The refusal for a command that may not run while a turn is in progress, else ``None``."""
    found = find_command(text.strip())
    if found is None or found[0].name not in _REFUSED_WHILE_BUSY:
        return None
    return BUSY_MESSAGE.format(name=found[0].name)


async def run_slash_command(session: Session, text: str, sink: EventSink) -> CommandOutcome | None:
    """Run ``text`` if it names a command; ``None`` if it does not (it is a normal prompt)."""
    found = find_command(text)
    if found is None:
        return None
    command, args = found
    try:
        outcome = await command.handler(session, args, sink)
    except Exception as exc:
        outcome = CommandOutcome(f"/{command.name} failed: {exc}")
    if outcome.message and outcome.prompt is None and not outcome.shown:
        await sink(Notice("info", outcome.message, f"command:{command.name}"))
    return outcome
