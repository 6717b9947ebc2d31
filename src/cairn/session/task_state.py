"""The session's task checkpoint, kept up to date, and what reads it: compression, recaps and a
resume after a crash (:mod:`cairn.agent.task_checkpoint` holds the checkpoint itself).

What the user says (prompts, and text typed while a turn runs) is kept word for word as it is
said, with its turn, here and in the recording. Once a turn that reached the model is over and
the session has been quiet for :data:`IDLE_SECONDS`, one side query on the fast model brings the
checkpoint up to date with what happened since (never while a turn runs, at most one per turn,
none when nothing changed, bounded by :data:`CHECKPOINT_TIMEOUT_SECONDS`); a failure, a timeout
or an answer that is no checkpoint leaves the previous one (said in the debug log). Each new
checkpoint is recorded (a ``task_checkpoint`` record), so ``--continue``, ACP ``session/load``
and the daemon's load get it; one that was edited by hand or damaged is ignored, with one
warning.

- **Compression** (:meth:`TaskState.compression_summary`): the older part of the history becomes
  the checkpoint, brought up to date first, with the user's instructions word for word, their
  later words, the plan and the evidence; without a checkpoint, the model's summary is followed
  by the user's words and the plan, derived from the conversation.
- **Recap** (:meth:`TaskState.recap`): a fresh checkpoint's recap line, without a model request.
- **Resume** (:meth:`TaskState.resumed`): a session whose last turn never finished says where the
  task stood (:attr:`TaskState.resume_note`) and its next request carries the checkpoint.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from cairn.agent import (
    CheckpointError,
    TaskCheckpoint,
    UserWords,
    ask_for_checkpoint,
    work_evidence,
)
from cairn.agent.compression import TaskSummary
from cairn.agent.reminders import steered_text, system_reminder
from cairn.content import Content, Part, Text, insert_after_function_responses
from cairn.debug_log import get_logger
from cairn.llm.estimate import CHARS_PER_TOKEN
from cairn.recording.records import (
    ASSISTANT,
    MID_TURN_USER_MESSAGE,
    SYSTEM,
    TASK_CHECKPOINT,
    TOOL_RESULT,
    USER,
    format_timestamp,
    is_typed_by_user,
    message_of,
    payload_of,
    user_display_text,
)
from cairn.recording.replay import ReplayItem
from cairn.session.turn_hooks import TurnHook
from cairn.vocabulary.events import Notice

if TYPE_CHECKING:
    from cairn.agent.chat import ChatHistory
    from cairn.agent.client import AgentClient
    from cairn.recording.reader import LoadedSession
    from cairn.session.session import PromptRequest, Session
    from cairn.vocabulary.events import TurnResult
    from cairn.vocabulary.tool_calls import TodoItem

__all__ = [
    "CHECKPOINT_TIMEOUT_SECONDS",
    "IDLE_SECONDS",
    "MAX_KEPT_WORDS_CHARS",
    "TaskState",
]

IDLE_SECONDS: Final = 3.0  # quiet time after a turn before the checkpoint is brought up to date
CHECKPOINT_TIMEOUT_SECONDS: Final = 60.0  # the longest one checkpoint side query may take
MAX_KEPT_WORDS_CHARS: Final = 16_000  # the user's words kept besides the instructions
KEPT_WORDS_WINDOW_SHARE: Final = 0.1  # ... and at most this share of the context window
ANCHOR_ENTRIES: Final = 3  # history entries that mark where the checkpoint's coverage ends
_log = get_logger("TASK_CHECKPOINT")


class TaskState(TurnHook):
    """One session's task checkpoint and the user's words (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.words: list[UserWords] = []
        self.checkpoint: TaskCheckpoint | None = None
        self.resume_note: str | None = None  # where the task stood, after an interrupted turn
        self._turns = 0  # user turns so far
        self._changes = 0  # turns that reached the model
        self._covered = 0  # of them, those the checkpoint covers
        self._anchor: tuple[Content, ...] = ()  # the last entries the checkpoint covers
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[object] | None = None
        self._reminder: Text | None = None  # for the first request after an interrupted turn
        self._closed = False

    @classmethod
    def of(cls, session: Session, loaded: LoadedSession | None) -> TaskState:
        """The task state of ``session`` (following its turns), read back from ``loaded``."""
        state = cls(session)
        session.add_turn_hook(state)
        if loaded is not None:
            state.load(loaded)
        return state

    def attach(self, client: AgentClient, loaded: LoadedSession | None) -> None:
        """Compress ``client``'s history from the checkpoint; a loaded session whose last turn
        never finished says where the task stood in every front end's replay (``cairn -p``
        shows :attr:`resume_note`)."""
        client.summarise_with(self.compression_summary)
        if loaded is None:
            return
        self.resumed(client.history)
        if self.resume_note is not None:
            loaded.items.append(ReplayItem("recap", self.resume_note))

    def reload(self, loaded: LoadedSession) -> None:
        """The conversation is ``loaded`` now (a rewind went back)."""
        self.clear()
        self.load(loaded)

    @property
    def enabled(self) -> bool:
        return self._session.settings.general.task_checkpoint

    @property
    def turns(self) -> int:
        """User turns so far (the turn the next words belong to is this one, or the next)."""
        return self._turns

    @property
    def pending(self) -> bool:
        """An update is due (the session went quiet after a turn) or being written."""
        return self._timer is not None or self._running is not None

    @property
    def fresh(self) -> bool:
        """The checkpoint covers every turn that reached the model."""
        return self.checkpoint is not None and self._covered == self._changes

    # ----- what the user says -----

    def user_said(self, text: str, *, steering: bool = False) -> None:
        """Keep what the user said, word for word: a prompt (a new user turn), or text typed
        while a turn runs (``steering``)."""
        if not text.strip():
            return
        if not steering:
            self._turns += 1
        self.words.append(UserWords(len(self.words) + 1, max(self._turns, 1), text, steering))

    # ----- a recorded session -----

    def load(self, loaded: LoadedSession) -> None:
        """The user's words and the newest usable checkpoint of a recorded session."""
        last_message, at, refused = -1, -1, None
        for index, record in enumerate(loaded.records):
            kind, subtype = record.get("type"), record.get("subtype")
            if kind in (USER, ASSISTANT, TOOL_RESULT) or subtype == MID_TURN_USER_MESSAGE:
                last_message = index
            if is_typed_by_user(record):
                self.user_said(user_display_text(record))
            elif kind == SYSTEM and subtype == MID_TURN_USER_MESSAGE:
                typed = payload_of(record).get("text")
                self.user_said(typed if isinstance(typed, str) else "", steering=True)
            elif kind == USER:  # a continuation may carry what was typed meanwhile
                message = message_of(record)
                for part in message.parts if message is not None else []:
                    steered = steered_text(part.text) if isinstance(part, Text) else None
                    if steered is not None:
                        self.user_said(steered, steering=True)
            elif kind == SYSTEM and subtype == TASK_CHECKPOINT:
                try:
                    self.checkpoint, at = TaskCheckpoint.from_record(payload_of(record)), index
                except CheckpointError as exc:
                    refused = f"record {record.get('uuid')}: {exc}"
        self._changes = 1 if last_message > at else 0
        self._covered = 0
        if refused is not None:
            _log.warning(f"a task checkpoint in the recording was ignored: {refused}")
            text = f"The task checkpoint recorded for this session was ignored: {refused}."
            self._session.carry.add_notice(Notice("warning", text, "task_checkpoint"))

    def resumed(self, history: ChatHistory) -> None:
        """A loaded session whose last turn never finished (a crash, a kill): say where the
        task stood, and carry the checkpoint in the next request."""
        dangling = history.dangling_calls()
        last = history.last()
        if not dangling and (last is None or last.role != "user" or not self.words):
            return
        names = ", ".join(dict.fromkeys(call.name for call in dangling))
        doing = f"while running {names}" if names else "while waiting for the model"
        view = self._view()
        stood = view.recap_text() if self.checkpoint is not None else _last_request(self.words)
        plan = _plan_status(self._session.carry.todos)
        self.resume_note = (
            f"The last turn did not finish: cairn stopped {doing}. "
            f"Where the task stood: {stood}{plan} Send “continue” to go on."
        )
        later = [w for w in self.words if w.id > view.words]
        self._reminder = system_reminder(
            "The previous cairn process stopped before the last turn finished (a crash or a "
            f"kill, {doing}); calls it was running did not complete. Where the task stood:\n"
            + view.render(plan=self._session.carry.todos, later_words=_within_budget(later))
        )

    def with_resume_reminder(self, parts: Sequence[Part]) -> list[Part]:
        """``parts`` with the checkpoint, for the first request after an interrupted turn."""
        reminder = self.take_resume_reminder()
        return (
            list(parts) if reminder is None else insert_after_function_responses(parts, [reminder])
        )

    def take_resume_reminder(self) -> Text | None:
        """The checkpoint for the first request after an interrupted turn (once)."""
        reminder, self._reminder = self._reminder, None
        return reminder

    # ----- keeping it up to date -----

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        self._cancel_timer()

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        if result.requests == 0:
            return  # a local command, a blocked prompt: nothing the checkpoint would add
        self._changes += 1
        if self.enabled and not self._closed:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(IDLE_SECONDS, self._when_quiet)

    def _when_quiet(self) -> None:
        self._timer = None
        if not self._session.busy:  # else the turn's end schedules it again
            self._start()

    def _start(self) -> asyncio.Task[object] | None:
        if self._running is None and not self.fresh and not self._closed:
            self._running = self._session.runtime.spawn(self._update(), name="task-checkpoint")
        return self._running

    async def update_now(
        self, timeout: float = CHECKPOINT_TIMEOUT_SECONDS
    ) -> TaskCheckpoint | None:
        """Bring the checkpoint up to date now (joining one being written), waiting at most
        ``timeout`` seconds; the checkpoint then (maybe not fresh: see :attr:`fresh`)."""
        if not self.enabled:
            return self.checkpoint
        self._cancel_timer()
        running = self._start()
        if running is not None:
            try:
                await asyncio.wait_for(asyncio.shield(running), timeout)
            except TimeoutError:
                _log.info(f"the task checkpoint was not ready within {timeout:g} s")
            except Exception as exc:  # reported by the task itself
                _log.debug(f"waiting for the task checkpoint: {exc!r}")
        return self.checkpoint

    async def _update(self) -> None:
        session = self._session
        entries = session.client.history.shallow()
        changes = self._changes
        previous = self.checkpoint
        new_words = [w for w in self.words if w.id > (previous.words if previous else 0)]
        new_entries = self._since_anchor(entries, session.client.startup_length)
        try:
            if not new_words and not new_entries:
                self._covered = changes  # nothing happened since: no question to ask
                return
            async with asyncio.timeout(CHECKPOINT_TIMEOUT_SECONDS):
                checkpoint = await ask_for_checkpoint(
                    session.runtime.provider,
                    previous=previous,
                    new_entries=new_entries,
                    new_words=new_words,
                    turn=self._turns,
                    words=len(self.words),
                    plan=session.carry.todos,
                    updated_at=_now(session),
                    session_id=session.id,
                )
        except Exception as exc:  # best-effort: the previous checkpoint stays
            _log.info(f"the task checkpoint was not updated ({exc!r}); the previous one stays")
            return
        finally:
            self._running = None
        if self._closed:
            return
        self.checkpoint = checkpoint
        self._covered = changes
        self._anchor = tuple(entries[-ANCHOR_ENTRIES:])
        if session.recorder is not None:
            session.recorder.record_system(TASK_CHECKPOINT, checkpoint.to_record())
        _log.debug(f"task checkpoint updated to turn {checkpoint.turn}")

    def _since_anchor(self, entries: Sequence[Content], start: int) -> list[Content]:
        """The entries after those the checkpoint covers (all of them when they cannot be
        found: the history was compressed or rewound since)."""
        anchor = self._anchor
        if anchor:
            size = len(anchor)
            for end in range(len(entries), max(start, size - 1), -1):
                if tuple(entries[end - size : end]) == anchor:
                    return list(entries[end:])
        return list(entries[start:])

    # ----- what reads it -----

    async def compression_summary(
        self, to_compress: Sequence[Content], to_keep: Sequence[Content]
    ) -> TaskSummary:
        """The account of ``to_compress`` (see :mod:`cairn.agent.compression`): the checkpoint
        brought up to date, else the user's words and the plan after a model summary."""
        checkpoint = await self.update_now() if self.enabled else None
        kept = "\n".join(e.text for e in to_keep if e.role == "user")
        plan = self._session.carry.todos
        window_chars = self._session.client.context_window * CHARS_PER_TOKEN
        budget = min(MAX_KEPT_WORDS_CHARS, int(window_chars * KEPT_WORDS_WINDOW_SHARE))

        def in_kept(words: UserWords) -> bool:
            return bool(words.text.strip()) and words.text.strip() in kept

        if checkpoint is not None:
            quoted = [i.text for i in checkpoint.instructions]
            later = [w for w in self.words if w.id > checkpoint.words and not in_kept(w)]
            others = [
                w
                for w in self.words
                if w.id <= checkpoint.words
                and not in_kept(w)
                and not any(text in w.text for text in quoted)
            ]
            later, others = _split(_within_budget([*others, *later], budget), checkpoint.words)
            text = checkpoint.render(plan=plan, later_words=later, other_words=others)
            return TaskSummary(checkpoint=text)
        derived = self._view(to_compress)
        words = _within_budget([w for w in self.words if not in_kept(w)], budget)
        return TaskSummary(verbatim=derived.render(plan=plan, later_words=words))

    async def recap(self, wait: float) -> str | None:
        """The recap line of a fresh checkpoint (waiting up to ``wait`` seconds for one being
        written), or ``None``: then the recap is asked of the model."""
        if not self.enabled:
            return None
        running = self._running
        if running is not None and not self.fresh:
            try:
                await asyncio.wait_for(asyncio.shield(running), wait)
            except Exception as exc:  # a slow or failed checkpoint: the model is asked instead
                _log.debug(f"no checkpoint for the recap: {exc!r}")
        if self.checkpoint is None or not self.fresh:
            return None
        return self.checkpoint.recap_text() or None

    def _view(self, entries: Sequence[Content] | None = None) -> TaskCheckpoint:
        """The checkpoint with what the conversation shows since it (the files changed and the
        commands run), or one made of that alone when there is none yet: no model needed."""
        session = self._session
        history = session.client.history.shallow()
        if entries is None:
            entries = self._since_anchor(history, session.client.startup_length)
        files, commands = work_evidence(entries)
        base = self.checkpoint or TaskCheckpoint(turn=0, words=0)
        return TaskCheckpoint(
            turn=base.turn,
            words=base.words,
            objective=base.objective,
            instructions=base.instructions,
            done=base.done,
            earlier_done=base.earlier_done,
            remaining=base.remaining,
            next_step=base.next_step,
            open_questions=base.open_questions,
            knowledge=base.knowledge,
            recap=base.recap,
            files_changed=tuple(dict.fromkeys([*base.files_changed, *files])),
            commands=(*base.commands, *commands)[-30:],
            plan=tuple(session.carry.todos),
            updated_at=base.updated_at,
        )

    # ----- a new conversation, the end -----

    def clear(self) -> None:
        """``/clear`` or a rewind: the checkpoint and the words belong to the old chat."""
        self._cancel_timer()
        self.words.clear()
        self.checkpoint = None
        self._turns = self._changes = self._covered = 0
        self._anchor = ()
        self._reminder = None

    async def close(self) -> None:
        """The session ends: a pending update is dropped, one being written is stopped."""
        self._closed = True
        self._cancel_timer()
        running, self._running = self._running, None
        if running is not None:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


def _now(session: Session) -> str:
    return format_timestamp(_dt.datetime.fromtimestamp(session.runtime.clock(), _dt.UTC))


def _within_budget(
    words: Sequence[UserWords], budget: int = MAX_KEPT_WORDS_CHARS
) -> list[UserWords]:
    """The newest of ``words`` that fit in ``budget`` characters, oldest first."""
    kept: list[UserWords] = []
    size = 0
    for said in reversed(words):
        size += len(said.text)
        if size > budget:
            break
        kept.append(said)
    return kept[::-1]


def _split(words: Sequence[UserWords], covered: int) -> tuple[list[UserWords], list[UserWords]]:
    """Words said after the checkpoint, and those before it."""
    return [w for w in words if w.id > covered], [w for w in words if w.id <= covered]


def _last_request(words: Sequence[UserWords]) -> str:
    prompts = [w for w in words if not w.steering]
    if not prompts:
        return "nothing was asked yet."
    text = " ".join(prompts[-1].text.split())
    shown = text if len(text) <= 200 else text[:199] + "…"
    return f"your last request was “{shown}”."


def _plan_status(todos: Sequence[TodoItem]) -> str:
    items = [t for t in todos if t.status != "cancelled"]
    if not items:
        return ""
    done = sum(1 for t in items if t.status == "completed")
    return f" ({done} of {len(items)} todo items done.)"
