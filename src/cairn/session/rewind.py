"""Rewinding code and conversation to before a turn.

:class:`Rewinder` works on a session's chat recording and its project's shadow repository
(:mod:`cairn.recording.checkpoints`), so it serves a live session (``/rewind``, ACP
``_cairn/rewind``, the daemon's ``POST /session/{id}/rewind``) and a recorded one
(``cairn rewind``) alike. The checkpoints it goes back to are taken by the live session's
:class:`~cairn.session.checkpoints.TurnCheckpoints`, right before a turn's first change.

A rewind to turn N: ``code`` puts the workspace back as it was before turn N (the first
checkpoint at or after turn N; the current state is checkpointed first, so the rewind can be
undone); ``conversation`` truncates the conversation to before turn N (a dead branch in the
recording, so ``--resume`` continues from there) and clamps the memory extract cursor; ``both``
does both. :meth:`Rewinder.undo` reverses the newest rewind while no turn followed it.

Once the current state is snapshotted, and before the first file is changed, a code ``rewind``
record naming that snapshot as its ``undo`` is written (``"partial": true``). A restore that
finishes writes its own record, which leaves that one on a dead branch; one cut short (its git
killed or timed out, cairn stopped) leaves it as the newest rewind, so undoing it (``/rewind
undo``, the picker's first entry, ``cairn rewind --undo``, also after a crash) puts back every
file as it was before, and the error says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cairn.config.settings import Settings
from cairn.debug_log import get_logger
from cairn.recording.checkpoints import (
    Checkpoint,
    CheckpointError,
    FileChange,
    RestoreCutShort,
    RestoreReport,
    ShadowRepository,
    shadow_repository,
)
from cairn.recording.rewind import (
    REWIND,
    RewindMode,
    RewindRecord,
    UserTurn,
    last_undoable_rewind,
    rewind_modes,
    state_markers,
    user_turns,
)
from cairn.session.checkpoints import name_paths

if TYPE_CHECKING:
    from cairn.agent.client import AgentClient
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder
    from cairn.recording.store import SessionStore
    from cairn.session.gate import PermissionGate
    from cairn.session.runtime import Runtime
    from cairn.tools.base import FileSystem
    from cairn.vocabulary.events import SessionEvent

    class RewindingSession(Protocol):
        """What a live session's rewinds use of it."""

        id: str
        runtime: Runtime
        settings: Settings
        recorder: ChatRecorder | None
        gate: PermissionGate
        client: AgentClient  # its history starts with the start-up context, not recorded

        @property
        def busy(self) -> bool: ...

        async def emit(self, event: SessionEvent) -> None: ...

        def restore_conversation(self, loaded: LoadedSession) -> None: ...

        @property
        def workspace(self) -> EditorFiles:
            """Where the session's file tools read and write (an editor's buffers, or the disk)."""
            ...

    class EditorFiles(Protocol):
        fs: FileSystem


__all__ = [
    "RewindError",
    "RewindListing",
    "RewindOutcome",
    "RewindPoint",
    "Rewinder",
    "SessionRewind",
    "clamp_cursor_file",
    "clamp_extract_cursor",
    "describe_listing",
    "parse_rewind_args",
    "recorded_rewinder",
]


_log = get_logger("CHECKPOINTS")


class RewindError(Exception):
    """A rewind that cannot be done; the message says why and what to do instead."""


@dataclass(frozen=True)
class RewindPoint:
    """A user turn a rewind can go back to."""

    number: int
    text: str
    timestamp: str | None
    files: tuple[FileChange, ...]  # what changed from before this turn to the next known state
    code: bool  # a checkpoint exists at or after this turn: its code can be restored


@dataclass(frozen=True)
class RewindListing:
    points: list[RewindPoint]  # newest first
    undoable: RewindRecord | None  # the rewind :meth:`Rewinder.undo` would reverse
    checkpoints_off: str | None  # why code cannot be restored at all, or None


@dataclass
class RewindOutcome:
    mode: RewindMode
    message: str  # what was done, for the person
    turn: int | None = None  # the turn rewound to (None for an undo)
    prompt: str = ""  # that turn's text: a front end may offer it for editing
    restore: RestoreReport | None = None
    loaded: LoadedSession | None = None  # the conversation after a conversation rewind
    history_offset: int = 0  # entries the model history holds before ``loaded.history``

    @property
    def history_length(self) -> int | None:
        """The model history's length after a conversation rewind (the extract cursor's unit)."""
        return None if self.loaded is None else self.history_offset + len(self.loaded.history)


@dataclass(kw_only=True, eq=False)
class Rewinder:
    """Rewinds of one recorded session (blocking: run it in a worker thread)."""

    store: SessionStore  # where the session is recorded
    session_id: str
    project_root: Path
    settings: Settings
    recorder: ChatRecorder | None = None  # the live session's (else one is opened per rewind)
    # Entries the session puts before the recorded history (its start-up context), so an
    # outcome's ``history_length`` is the model history's length.
    history_offset: int = 0
    undo_command: str = "/rewind undo"  # how the person undoes a rewind where they are
    _shadow: tuple[ShadowRepository | None, str | None] | None = field(
        default=None, init=False, repr=False
    )

    @property
    def shadow(self) -> ShadowRepository | None:
        """The project's shadow repository (found on first use: it runs ``git --version``)."""
        return self._resolve()[0]

    @property
    def off_reason(self) -> str | None:
        """Why checkpoints are off, or ``None`` when they work."""
        return self._resolve()[1]

    def _resolve(self) -> tuple[ShadowRepository | None, str | None]:
        if self._shadow is None:
            self._shadow = shadow_repository(self.project_root, self.settings.general.checkpointing)
        return self._shadow

    # ----- reading -----

    def listing(self) -> RewindListing:
        chain = self._chain().records
        turns = user_turns(chain)
        points = [self._point(turn, chain, turns) for turn in reversed(turns)]
        return RewindListing(points, last_undoable_rewind(chain), self.off_reason)

    def _point(self, turn: UserTurn, chain: Sequence[Any], turns: list[UserTurn]) -> RewindPoint:
        start = self._restore_commit(turn, turns)
        files: tuple[FileChange, ...] = ()
        if turn.checkpoint is not None and self.shadow is not None:
            after = self._state_after(turn, chain)
            with contextlib.suppress(CheckpointError):
                files = tuple(self.shadow.changes(turn.checkpoint, after))
        return RewindPoint(turn.number, turn.text, turn.timestamp, files, start is not None)

    def _state_after(self, turn: UserTurn, chain: Sequence[Any]) -> str | None:
        """The commit of the next known state after ``turn``'s checkpoint (None: now)."""
        markers = state_markers(chain)
        seen = False
        for marker in markers:
            if seen:
                return marker.commit
            seen = marker.commit == turn.checkpoint and marker.after_turn == turn.number
        return None

    @staticmethod
    def _restore_commit(turn: UserTurn, turns: list[UserTurn]) -> str | None:
        """The state before ``turn``: the first checkpoint at or after it (none when a turn on
        the way took none: the state before that turn's change was never captured)."""
        for later in turns[turn.number - 1 :]:
            if later.checkpoint is not None:
                return later.checkpoint
            if later.not_taken is not None:
                return None
        return None

    @staticmethod
    def _no_checkpoint(turn: UserTurn, turns: list[UserTurn]) -> str | None:
        """Why the code cannot go back to before ``turn``: a turn at or after it changed files
        without a checkpoint (``None`` when none did)."""
        for later in turns[turn.number - 1 :]:
            if later.checkpoint is not None:
                return None
            if later.not_taken is not None:
                return f"turn {later.number} took no checkpoint ({later.not_taken})"
        return None

    # ----- rewinding -----

    def rewind(self, number: int, mode: RewindMode) -> RewindOutcome:
        if mode not in rewind_modes():
            raise RewindError(f"unknown rewind mode {mode!r}; use both, conversation or code")
        loaded = self._chain()
        turns = user_turns(loaded.records)
        if not turns:
            raise RewindError("this session has no turns to rewind to yet")
        if not 1 <= number <= len(turns):
            raise RewindError(
                f"there is no turn {number}; this session has turns 1 to {len(turns)}"
            )
        turn = turns[number - 1]
        outcome = RewindOutcome(
            mode, "", turn=number, prompt=turn.text, history_offset=self.history_offset
        )
        notes: list[str] = []
        restored: str | None = None
        if mode in ("both", "code"):
            target = self._restore_commit(turn, turns)
            missing = self._no_checkpoint(turn, turns) or self.off_reason
            if target is None and missing is not None:
                if mode == "code":
                    raise RewindError(f"code cannot be restored: {missing}")
                notes.append(f"no code was restored: {missing}")
            elif target is None:
                notes.append("no files changed since that turn, so no code was restored")
            else:
                outcome.restore = self._restore(
                    target,
                    f"before rewinding to turn {number}",
                    _Partial(
                        loaded.last_uuid, f"before turn {number}", "rewind", turn.uuid, number
                    ),
                )
                restored = target
                notes.append(_restore_summary(outcome.restore))
        payload = {
            "target": turn.uuid,
            "turn": number,
            "mode": mode,
            "restored": restored,
            "undo": outcome.restore.undo.commit if outcome.restore else None,
            "previousTip": loaded.last_uuid,
        }
        if mode in ("both", "conversation"):
            outcome.loaded = self._write_rewind(payload, branch_from=turn.parent_uuid)
            notes.insert(0, f"the conversation is back to before turn {number}")
        else:
            self._write_rewind(payload, branch_from=loaded.last_uuid)
        outcome.message = _sentence(f"Rewound to turn {number}", notes)
        return outcome

    def undo(self) -> RewindOutcome:
        loaded = self._chain()
        last = last_undoable_rewind(loaded.records)
        if last is None:
            raise RewindError(
                "there is no rewind to undo (only the newest one can be, before a new prompt)"
            )
        outcome = RewindOutcome(last.mode, "", history_offset=self.history_offset)
        notes: list[str] = []
        restored: str | None = None
        if last.undo is not None:
            outcome.restore = self._restore(
                last.undo,
                "before undoing a rewind",
                _Partial(loaded.last_uuid, "before the rewind", "undo"),
            )
            restored = last.undo
            notes.append(_restore_summary(outcome.restore))
        payload = {
            "target": None,
            "turn": None,
            "mode": last.mode,
            "restored": restored,
            "undo": outcome.restore.undo.commit if outcome.restore else None,
            "previousTip": loaded.last_uuid,
            "undoes": last.uuid,
        }
        if last.rewinds_conversation:
            outcome.loaded = self._write_rewind(payload, branch_from=last.previous_tip)
            notes.insert(0, "the conversation is back as it was")
        else:
            self._write_rewind(payload, branch_from=loaded.last_uuid)
        outcome.message = _sentence("Undid the last rewind", notes)
        return outcome

    def _restore(self, commit: str, message: str, partial: _Partial) -> RestoreReport:
        if self.shadow is None:
            raise RewindError(f"code cannot be restored: {self.off_reason}")
        ran_in = _recorded_folder(self._chain())
        root = self.shadow.work_tree
        if ran_in is not None and ran_in != root and root not in ran_in.parents:
            raise RewindError(
                f"this session ran in {ran_in}, not in {root}; its code is not restored here"
            )

        def record_undo(undo: Checkpoint) -> None:
            """Before the first file is written: a restore cut short leaves this record, the
            newest rewind, whose undo puts every file back (a finished one leaves it behind)."""
            payload = {
                "target": partial.target,
                "turn": partial.turn,
                "mode": "code",
                "restored": None,
                "undo": undo.commit,
                "previousTip": partial.tip,
                "partial": True,
            }
            self._write_rewind(payload, branch_from=partial.tip, reload=False)

        try:
            return self.shadow.restore(commit, message=message, before_writing=record_undo)
        except RestoreCutShort as exc:
            raise RewindError(self._cut_short(exc, partial)) from None
        except CheckpointError as exc:
            raise RewindError(f"code was not restored: {exc}; no file was changed") from None

    def _cut_short(self, exc: RestoreCutShort, partial: _Partial) -> str:
        """What a restore cut short left, and how to go back."""
        report = exc.report
        done = []
        if report.removed:
            done.append(f"{len(report.removed)} created file(s) removed")
        if report.restored:
            done.append(
                f"of the {len(report.restored)} file(s) it was putting back some are as they "
                f"were {partial.then} and the others as they were before this {partial.what}, "
                "and one may be cut off"
            )
        state = "; ".join(done) or "no file was changed yet"
        return (
            f"the code restore stopped part way: {exc}. {state[:1].upper()}{state[1:]}; the "
            f"conversation was not changed. Every file as it was before this {partial.what} is "
            f"in checkpoint {exc.undo.commit[:12]}: {self.undo_command} puts them all back"
        )

    def _write_rewind(
        self, payload: dict[str, Any], *, branch_from: str | None, reload: bool = True
    ) -> LoadedSession | None:
        recorder = self.recorder
        owned = recorder is None
        if recorder is None:
            from cairn._version import __version__

            recorder = self.store.recorder(
                self.session_id, cwd=self.project_root, version=__version__, parent_uuid=None
            )
        try:
            recorder.branch_from(branch_from)
            recorder.record_system(REWIND, payload)
        finally:
            if owned:
                recorder.close()
        return self._chain() if reload else None

    def _chain(self) -> LoadedSession:
        from cairn.recording.reader import SessionLoadError

        try:
            return self.store.load(self.session_id)
        except SessionLoadError as exc:
            raise RewindError(str(exc)) from None


@dataclass(frozen=True)
class _Partial:
    """What the record written before a restore's first file says, and its error."""

    tip: str | None  # the chain's tip before the rewind: the record's parent
    then: str  # the state restored ("before turn 3")
    what: Literal["rewind", "undo"]
    target: str | None = None  # the rewound-to turn's record
    turn: int | None = None


def _recorded_folder(loaded: LoadedSession) -> Path | None:
    """The folder a recorded session ran in (its first record's ``cwd``), if it says: a rewind's
    own record is skipped (``cairn rewind`` writes it from the project's root)."""
    first = next((r for r in loaded.records if r.get("subtype") != REWIND), None)
    cwd = first.get("cwd") if first is not None else None
    return Path(cwd).resolve() if isinstance(cwd, str) and cwd.startswith("/") else None


def _restore_summary(report: RestoreReport) -> str:
    if not report.changed:
        summary = "the files were already as they were then"
    else:
        bits = []
        if report.restored:
            bits.append(f"{len(report.restored)} file(s) restored")
        if report.removed:
            bits.append(f"{len(report.removed)} created file(s) removed")
        summary = " and ".join(bits)
    if report.kept:
        summary += f"; {len(report.kept)} not captured and left as they are: " + name_paths(
            [k.path for k in report.kept]
        )
    return summary


def _sentence(head: str, notes: Sequence[str]) -> str:
    return head + (": " + "; ".join(notes) if notes else "") + "."


async def clamp_extract_cursor(runtime: Runtime, session_id: str, history_length: int) -> None:
    """After a conversation rewind: Extract neither skips nor repeats history (the cursor)."""
    if runtime.memory_enabled:
        await runtime.memory_manager().conversation_rewound(session_id, history_length)
    else:  # no manager, so nothing in flight: the cursor file alone
        await asyncio.to_thread(clamp_cursor_file, runtime.project_root, session_id, history_length)


def clamp_cursor_file(project_root: Path, session_id: str, history_length: int) -> None:
    """The extract cursor of ``session_id`` moved back to ``history_length`` (roots locked)."""
    from cairn.memory.background.cursor import clamp_cursor
    from cairn.memory.paths import memory_roots
    from cairn.memory.store.locks import hold_roots

    roots = memory_roots(project_root)
    try:
        with hold_roots([root for root in (roots.project, roots.user) if root is not None]):
            clamp_cursor(roots.state_dir, session_id, history_length, now=time.time())
    except Exception as exc:  # best effort: at worst Extract looks at a turn again
        _log.warning(f"moving the extract cursor back after a rewind failed: {exc!r}")


# ----- the /rewind command's text form (ACP, the daemon and headless; the TUI has a picker) -----

REWIND_USAGE = (
    "/rewind lists the turns; /rewind N [both|code|conversation] goes back to before turn N "
    "(default both: code and conversation); /rewind undo reverses the last rewind."
)


def describe_listing(listing: RewindListing, usage: str = REWIND_USAGE) -> str:
    """The turns as lines a person can pick from, newest first."""
    if not listing.points:
        lines = ["No turns to rewind to: the conversation is empty."]
        if listing.undoable is not None:
            lines.append(_undo_note(listing.undoable))
        return "\n".join(lines)
    lines = ["Turns you can rewind to (newest first):"]
    for point in listing.points:
        text = " ".join(point.text.split())
        text = text if len(text) <= 70 else text[:67] + "..."
        lines.append(f"{point.number:>3}. {text}{_files_note(point)}")
    if listing.checkpoints_off:
        lines.append(f"Code cannot be restored: {listing.checkpoints_off}.")
    if listing.undoable is not None:
        lines.append(_undo_note(listing.undoable))
    lines.append(usage)
    return "\n".join(lines)


def _undo_note(last: RewindRecord) -> str:
    if last.partial:
        return (
            "The last rewind stopped part way; undoing it puts every file back as it was before it."
        )
    return "The last rewind can be undone."


def _files_note(point: RewindPoint) -> str:
    if point.files:
        return f" — {len(point.files)} file(s) changed: {name_paths([f.path for f in point.files])}"
    return "" if point.code else " — no file changes"


def parse_rewind_args(args: str) -> tuple[int | None, RewindMode] | None:
    """``"3 code"`` -> ``(3, "code")``; ``""`` -> ``(None, "both")`` (list); bad input: None."""
    words = args.split()
    if not words:
        return None, "both"
    if len(words) > 2 or not words[0].isdigit():
        return None
    mode = words[1].lower() if len(words) == 2 else "both"
    for candidate in rewind_modes():
        if mode == candidate:
            return int(words[0]), candidate
    return None


def recorded_rewinder(cwd: Path, session_id: str | None, settings: Settings) -> Rewinder:
    """A rewinder for a recorded session of the project at ``cwd`` (default: its latest)."""
    from cairn.agent.prompt import startup_context
    from cairn.config.paths import project_root
    from cairn.recording.store.files import file_stores

    root = project_root(cwd)
    store = file_stores(root, None)
    if session_id is None:
        latest = store.list(limit=1)
        if not latest:
            raise RewindError(f"no recorded session in {root} to rewind")
        session_id = latest[0].session_id
    if not store.exists(session_id):
        raise RewindError(f'no session found with ID "{session_id}" in {root}')
    offset = 0 if settings.model.skip_startup_context else len(startup_context(root))
    return Rewinder(
        store=store,
        session_id=session_id,
        project_root=root,
        settings=settings,
        history_offset=offset,
        undo_command="cairn rewind --undo",
    )


class SessionRewind:
    """Rewinds of a live session (``/rewind``, ACP ``_cairn/rewind``, the daemon's route): the
    :class:`Rewinder` in a worker thread, then the session's conversation as it is now."""

    def __init__(self, session: RewindingSession) -> None:
        self.session = session

    def rewinder(self) -> Rewinder:
        session = self.session
        if session.recorder is None:
            raise RewindError("rewind needs the chat recording, which is off for this session")
        return Rewinder(
            store=session.runtime.sessions,
            session_id=session.id,
            project_root=session.runtime.project_root,
            settings=session.settings,
            recorder=session.recorder,
            history_offset=session.client.startup_length,
        )

    async def listing(self) -> RewindListing:
        return await asyncio.to_thread(self.rewinder().listing)

    async def rewind(
        self, turn: int, mode: RewindMode, *, check_busy: bool, announce: bool
    ) -> RewindOutcome:
        """Go back to before user turn ``turn`` (1 = the first); :class:`RewindError` if not,
        :class:`~cairn.session.gate.WideningRefused` past a closed gate. ``announce``: tell the
        session's listeners (an editor, the daemon's clients) what was done; a caller that shows
        the outcome itself turns it off."""
        self._refuse_while_busy(check_busy)
        self.session.gate.check_unasked("Rewinding")
        outcome = await asyncio.to_thread(self.rewinder().rewind, turn, mode)
        await self._after(outcome, announce)
        return outcome

    async def undo(self, *, check_busy: bool, announce: bool) -> RewindOutcome:
        self._refuse_while_busy(check_busy)
        self.session.gate.check_unasked("Undoing a rewind")
        outcome = await asyncio.to_thread(self.rewinder().undo)
        await self._after(outcome, announce)
        return outcome

    def _refuse_while_busy(self, check_busy: bool) -> None:
        if check_busy and self.session.busy:
            raise RewindError("cannot rewind while a turn is running; cancel it first")

    async def _after(self, outcome: RewindOutcome, announce: bool) -> None:
        session = self.session
        if outcome.restore is not None:
            await self._to_the_editor(outcome.restore)
        if announce:
            from cairn.vocabulary.events import Notice

            await session.emit(Notice("info", outcome.message, "rewind"))
        if outcome.loaded is None:
            return
        session.restore_conversation(outcome.loaded)
        if outcome.history_length is not None:
            await clamp_extract_cursor(session.runtime, session.id, outcome.history_length)
        await self._context_changed()

    async def _context_changed(self) -> None:
        """Front ends showing how full the context is learn its size after the rewind."""
        await self.session.emit(self.session.client.context_used())

    async def _to_the_editor(self, report: RestoreReport) -> None:
        """An editor keeping its own buffers (ACP ``fs/write_text_file``) gets every restored
        text file written through it, so it shows what is on disk now; its refusal is said."""
        from cairn.tools.base import LocalFileSystem

        fs = self.session.workspace.fs
        if isinstance(fs, LocalFileSystem) or not report.restored:
            return
        root = self.session.runtime.project_root
        local = LocalFileSystem()
        refused: list[str] = []
        for relative in report.restored:
            path = root / relative
            try:
                text = await local.read_text(path)
            except (OSError, UnicodeDecodeError):
                continue  # binary or gone: nothing an editor buffer holds
            try:
                await fs.write_text(path, text)
            except OSError as exc:
                _log.warning(f"rewind: {exc}")
                refused.append(relative)
        if refused:
            from cairn.vocabulary.events import Notice

            names = ", ".join(refused)
            text = f"The editor did not take the restored {names}: reload it from disk."
            await self.session.emit(Notice("warning", text, "rewind"))
