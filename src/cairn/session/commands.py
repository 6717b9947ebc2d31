"""Slash commands every front end shares (``/recap``, ``/forget``, ``/compress`` ...), and the
one policy for them.

A command either answers locally (no model turn, no Recall) or turns into a model-bound prompt
(``/remember``), which then runs as a fresh user turn. Front ends list a session's
:meth:`~cairn.session.session.Session.commands` (built-ins plus what other parts add) for
completion (the terminal UI), ``available_commands_update`` (ACP) or the daemon.

The policy, the same in every front end:

- a prompt whose first word is ``/name`` (letters, digits, ``-``, ``_``) is a command line; a
  path such as ``/usr/bin/env is broken`` is not, and goes to the model;
- a command line naming no command is answered "unknown command" and never reaches the model;
- a command that must not wait behind a running turn (``/recap``) is refused while one runs;
- a command is never steering text for a running turn.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cairn.config.settings import APPROVAL_MODES
from cairn.content import Part
from cairn.debug_log import get_logger
from cairn.session.context_usage import context_report, render_usage, usage_report
from cairn.session.gate import WideningRefused
from cairn.values import Value
from cairn.vocabulary.events import CommandInfo, EventSink, Notice

if TYPE_CHECKING:
    from cairn.session.models import ModelOption
    from cairn.session.session import Session

__all__ = [
    "COMMANDS",
    "CommandLine",
    "CommandList",
    "CommandOutcome",
    "SlashCommand",
    "busy_refusal",
    "find_command",
    "hint_text",
    "parse_command_line",
    "run_slash_command",
    "steering_refusal",
]

REMEMBER_PROMPT = """\
The user asks you to remember this for future sessions:

{text}

Save it now as one memory file with write_file (no approval is needed for it), in the memory \
folder its type belongs to (see the auto memory section):
{folders}

Write `<folder>/<type>/<short-name>.md`, type one of user, feedback, project, reference, starting \
with front matter (`name`: a short title; `description`: one specific line; `type`), then the \
memory (for feedback and project: the rule or fact, a `Why:` line and a `How to apply:` line). \
If a memory on the same subject exists, read it and update it instead of writing a second one. \
Never edit MEMORY.md. Then say in one line what you saved and where."""
NO_RECAP_MESSAGE = "Not enough conversation context for a recap yet."
BUSY_MESSAGE = "Cannot run /{name} while another operation is in progress."
UNKNOWN_MESSAGE = "Unknown command /{name}. /help lists the commands."
STEERING_MESSAGE = "Cannot run /{name} while a turn is running; wait for it or cancel it."
# Commands that must not wait behind a running turn.
_REFUSED_WHILE_BUSY = frozenset({"recap", "rewind"})
# Commands a replay does not show: they replace what is shown (/clear, /rewind) or record
# what they showed themselves (/recap).
_NOT_REPLAYED = frozenset({"clear", "recap", "rewind"})
# "/name args"; a name may be namespaced ("/git:commit", from commands/git/commit.md)
_COMMAND_LINE = re.compile(r"/([A-Za-z][\w-]*(?::[A-Za-z0-9][\w-]*)*)(?:\s+(.*))?", re.DOTALL)
_log = get_logger("SESSION")


class CommandOutcome(Value, frozen=False):
    message: str | None = None  # the answer (the turn's text)
    prompt: str | None = None  # model-bound: run this as the turn's prompt instead
    shown: bool = False  # the command already showed its answer (no notice needed)
    unknown: bool = False  # the line named no command
    remember: bool = False  # the prompt asks to save memory: its memory writes need no approval
    refused: bool = False  # the command could not run (``message`` says why): an error
    parts: list[Part] | None = None  # model-bound: the prompt with what it attaches
    model: str | None = None  # model-bound: the model for this turn (a command file's `model`)
    # model-bound: permission rules allowing tools during this turn (`allowed-tools`)
    allowed_tools: tuple[str, ...] = ()


Handler = Callable[["Session", str, EventSink], Awaitable[CommandOutcome]]


class SlashCommand(Value):
    name: str
    description: str
    handler: Handler
    hint: str | None = None  # what the argument is, for completion


class CommandLine(Value):
    """A prompt that is a command line: ``/name args``."""

    name: str  # lower case, without the slash
    args: str
    command: SlashCommand | None  # None: no command has this name


def hint_text(hint: str) -> str:
    """A command's argument hint as shown: ``<session id>``; one that brackets itself already
    (Claude Code's ``argument-hint: [pr-number] [priority]``) as written."""
    return hint if hint.startswith(("<", "[", "(", "{")) else f"<{hint}>"


async def _help(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    lines = [
        f"/{c.name}{' ' + hint_text(c.hint) if c.hint else ''} — {c.description}"
        for c in session.commands()
    ]
    return CommandOutcome("\n".join(lines))


async def _mcp(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    from cairn.session.mcp import describe_servers

    statuses = session.mcp.servers.statuses() if session.mcp is not None else []
    return CommandOutcome(describe_servers(statuses))


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
    await sink(session.client.context_used())


async def _context(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    report = context_report(session).render()
    return CommandOutcome(f"{report}\n\n{render_usage(usage_report(session))}")


async def _usage(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    return CommandOutcome(render_usage(usage_report(session)))


async def _recap(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    recap = await session.recap_outcome()
    if recap.text is None:  # the real reason: too little said, the model too slow, ...
        return CommandOutcome(recap.reason or NO_RECAP_MESSAGE)
    await session.show_recap(recap.text, sink)
    return CommandOutcome(recap.text, shown=True)


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
    count = "1 memory" if len(docs) == 1 else f"{len(docs)} memories"
    lines = [f"Managed memory is on: {count}."]
    lines += [f"- [{d.type}] {d.title} ({d.scope}: {d.relative_path})" for d in docs[:30]]
    if len(docs) > 30:
        lines.append(f"... and {len(docs) - 30} more (`cairn memory list`).")
    lines.append("Kept as Markdown files you can read and edit:")
    lines += _memory_folders(manager.root_map().items())
    return CommandOutcome("\n".join(lines))


def _memory_folders(roots: Iterable[tuple[str, Path]]) -> list[str]:
    return [f"- {scope} memory: {root}" for scope, root in roots]


async def _remember(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    text = args.strip()
    if not text:
        return CommandOutcome("Usage: /remember <what to remember>")
    if not session.settings.memory.enable_managed_auto_memory:
        return CommandOutcome("Managed memory is off, so nothing can be saved. `/memory on`.")
    folders = "\n".join(_memory_folders(session.runtime.memory_manager().root_map().items()))
    return CommandOutcome(prompt=REMEMBER_PROMPT.format(text=text, folders=folders), remember=True)


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
    report = await manager.forget(plan, session_id=session.id)  # never blocks the loop
    session.refresh_system_prompt()
    if report.change is None or not report.change.memories:
        return CommandOutcome(report.message)
    await sink(report.change)  # each removed memory, and how to bring it back (said once)
    noun = "entry" if report.entries == 1 else "entries"
    files = ", ".join(report.files)
    return CommandOutcome(f"Forgot {report.entries} memory {noun} from: {files}.")


async def _dream(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    manager = session.runtime.memory_manager()

    async def progress(text: str) -> None:
        await sink(Notice("info", text, "memory"))

    report = await manager.run_dream_now(
        session_id=session.id, runtime=session.runtime, progress=progress
    )
    session.refresh_system_prompt()
    if report.change is not None and report.change.memories:
        await sink(report.change)
    return CommandOutcome(str(report))


async def _model(session: Session, args: str, sink: EventSink) -> CommandOutcome:
    from cairn.session.models import ModelSwitchError

    name = args.strip()
    await session.runtime.models.load()  # ``model.available: "auto"``: the list, read once
    options = session.model_options()
    if not name:
        return CommandOutcome(_describe_models(session.model, options))
    if name.isdigit() and 1 <= int(name) <= len(options):
        name = options[int(name) - 1].id  # "/model 2": the second model listed
    try:
        option = await session.set_model(name, sink)
    except ModelSwitchError as exc:
        return CommandOutcome(f"Cannot switch to {name}: {exc}")
    if not option.listed and any(o.listed for o in options):
        return CommandOutcome(
            f"Model set to {name} (not in model.available: the endpoint must know it)."
        )
    return CommandOutcome(f"Model set to {option.name}.")


def _describe_models(current: str, options: Sequence[ModelOption]) -> str:
    if len(options) <= 1:
        return f"Current model: {current}. Switch with /model <name>."
    lines = [f"Current model: {current}. Switch with /model <name or number>:"]
    for number, option in enumerate(options, 1):
        label = option.id if option.name == option.id else f"{option.name} ({option.id})"
        mark = "*" if option.id == current else " "
        about = f" — {option.shown_description}" if option.shown_description else ""
        lines.append(f"{mark} {number}. {label}{about}")
    return "\n".join(lines)


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
    try:
        await session.set_approval_mode(mode, sink)
    except WideningRefused as refused:
        return CommandOutcome(str(refused))
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
            outcome = await session.undo_rewind(check_busy=False, announce=False)
            return CommandOutcome(outcome.message)
        parsed = parse_rewind_args(args)
        if parsed is None:
            return CommandOutcome(f"Usage: {REWIND_USAGE}")
        number, mode = parsed
        if number is None:
            return CommandOutcome(describe_listing(await session.rewind_listing()))
        outcome = await session.rewind(number, mode, check_busy=False, announce=False)
        return CommandOutcome(outcome.message)
    except RewindError as exc:
        return CommandOutcome(f"Cannot rewind: {exc}.")
    except WideningRefused as refused:  # a closed gate: the daemon without a token
        return CommandOutcome(str(refused))


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "List the slash commands", _help),
    SlashCommand("clear", "Start a fresh conversation in this session", _clear),
    SlashCommand("compress", "Summarise the conversation to free context", _compress),
    SlashCommand("recap", "A one- or two-sentence summary of where you left off", _recap),
    SlashCommand("context", "What fills the context window, and tokens used by purpose", _context),
    SlashCommand("usage", "Tokens used by purpose: this session and today", _usage),
    SlashCommand("memory", "Show managed memory, or turn it on or off", _memory, "on|off"),
    SlashCommand("remember", "Save something to managed memory", _remember, "text"),
    SlashCommand("forget", "Remove memories matching a description", _forget, "text"),
    SlashCommand("dream", "Consolidate project memory now", _dream),
    SlashCommand("model", "List the models, or switch to one", _model, "name or number"),
    SlashCommand("approval-mode", "Show or set the approval mode", _approval_mode, "mode"),
    SlashCommand(
        "rewind", "Go back to before a turn (code, conversation or both)", _rewind, "N [mode]"
    ),
    SlashCommand("mcp", "Show the MCP servers: status, tools, errors", _mcp),
)


class CommandList:
    """One session's slash commands: the built-ins, then what others offered (an MCP server's
    prompts, command and skill files), by who offered them. A name already taken is skipped
    with a warning; a built-in name is never taken."""

    def __init__(self) -> None:
        self._offered: dict[str, tuple[SlashCommand, ...]] = {}

    def all(self) -> tuple[SlashCommand, ...]:
        return (*COMMANDS, *(c for added in self._offered.values() for c in added))

    def infos(self) -> tuple[CommandInfo, ...]:
        return tuple(CommandInfo(c.name, c.description, c.hint) for c in self.all())

    def offer(self, source: str, commands: Sequence[SlashCommand]) -> None:
        """``commands`` in place of what ``source`` offered before."""
        taken = {c.name.lower() for c in COMMANDS}
        for other, added in self._offered.items():
            if other != source:
                taken.update(c.name.lower() for c in added)
        kept: list[SlashCommand] = []
        for command in commands:
            if command.name.lower() in taken:
                _log.warning(f"/{command.name} from {source} is skipped: the name is taken")
                continue
            taken.add(command.name.lower())
            kept.append(command)
        self._offered[source] = tuple(kept)


def parse_command_line(
    text: str, commands: Sequence[SlashCommand] = COMMANDS
) -> CommandLine | None:
    """The command line ``text`` is, or ``None`` for a prompt (a path like ``/usr/bin`` too)."""
    match = _COMMAND_LINE.fullmatch(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    # MCP prompts keep their server's spelling (/mcp__GitHub__review): match without case
    command = next((c for c in commands if c.name.lower() == name), None)
    return CommandLine(name, (match.group(2) or "").strip(), command)


def find_command(
    text: str, commands: Sequence[SlashCommand] = COMMANDS
) -> tuple[SlashCommand, str] | None:
    """The command a ``/name args`` line names, with its argument text."""
    line = parse_command_line(text, commands)
    if line is None or line.command is None:
        return None
    return line.command, line.args


def busy_refusal(text: str, commands: Sequence[SlashCommand] = COMMANDS) -> str | None:
    """The refusal for a command that may not wait while a turn is in progress, else ``None``."""
    found = find_command(text, commands)
    if found is None or found[0].name not in _REFUSED_WHILE_BUSY:
        return None
    return BUSY_MESSAGE.format(name=found[0].name)


def steering_refusal(text: str, commands: Sequence[SlashCommand] = COMMANDS) -> str | None:
    """Why ``text`` cannot steer a running turn (it is a command line), else ``None``."""
    line = parse_command_line(text, commands)
    if line is None:
        return None
    if line.command is None:
        return UNKNOWN_MESSAGE.format(name=line.name)
    return busy_refusal(text, commands) or STEERING_MESSAGE.format(name=line.name)


async def run_slash_command(session: Session, text: str, sink: EventSink) -> CommandOutcome | None:
    """Run ``text`` if it is a command line; ``None`` if it is not (it is a normal prompt)."""
    line = parse_command_line(text, session.commands())
    if line is None:
        return None
    if line.command is None:
        message = UNKNOWN_MESSAGE.format(name=line.name)
        await sink(Notice("error", message, "command"))
        return CommandOutcome(message, shown=True, unknown=True)
    command = line.command
    try:
        outcome = await command.handler(session, line.args, sink)
    except Exception as exc:
        outcome = CommandOutcome(f"/{command.name} failed: {exc}")
    shown: list[dict[str, str]] = []
    if outcome.message and outcome.prompt is None and not outcome.shown:
        level: Literal["info", "error"] = "error" if outcome.refused else "info"
        await sink(Notice(level, outcome.message, f"command:{command.name}"))
        shown.append({"type": level, "text": outcome.message})
    recorder = session.recorder
    # A replay shows the command and its answer as they were shown, once the conversation has
    # begun: a command alone (/help, then quit) leaves no session to resume or to --continue.
    replayed = outcome.prompt is None and command.name not in _NOT_REPLAYED
    if replayed and recorder is not None and recorder.last_uuid is not None:
        recorder.record_slash_command(phase="result", raw_command=text.strip(), output_items=shown)
    return outcome
