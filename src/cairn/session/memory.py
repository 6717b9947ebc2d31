"""One session's side of managed memory: the same in every front end.

- Recall: the handle the agent client owns (made when memory is on, or once ``/memory on``
  turns it on);
- the memory writes of its tool calls (``MemoryWrites``: a write into a memory folder is indexed
  and reported as :class:`~cairn.vocabulary.events.MemoryChanged`);
- the memory section of the system prompt, and whether it is stale (the warm-up was still
  running when it was built, or Extract, Dream or Forget changed the files since);
- memory saved outside a turn (Extract or Dream after the answer), told to the session's
  listeners;
- Extract and Dream, scheduled once a fresh turn ended normally (never awaited; ``cairn -p``
  hands Extract to a worker process, :mod:`cairn.session.extract_worker`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.memory.remember import MemoryWrites

if TYPE_CHECKING:
    from cairn.agent.client import RecallHandle
    from cairn.content import Content
    from cairn.memory.manager import MemoryManager
    from cairn.session.runtime import Runtime
    from cairn.session.turn import PromptRequest
    from cairn.vocabulary.events import EventSink, MemoryChanged, Notice

__all__ = ["SessionMemory"]

_log = get_logger("SESSION")


class SessionMemory:
    """See the module docstring. ``emit`` tells the session's listeners; ``asked``: whether the
    running turn asked to save memory (``/remember``), so its writes need no approval;
    ``turn``: the session's turn number now."""

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        *,
        emit: EventSink,
        asked: Callable[[], bool],
        turn: Callable[[], int],
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self._emit = emit
        self.writes = MemoryWrites(
            self.manager_if_on, session_id=session_id, asked=asked, turn=turn
        )
        self._generation = -1  # the memory files the system prompt shows; -1: not shown yet
        self._unlisten: Callable[[], None] | None = None

    @property
    def on(self) -> bool:
        return self.runtime.settings.memory.enable_managed_auto_memory

    def manager_if_on(self) -> MemoryManager | None:
        return self.runtime.memory_manager() if self.on else None

    def recall_handle(self) -> RecallHandle | None:
        """A new Recall handle (``None`` while memory is off); memory saved after a turn is
        told to the session's listeners from then on."""
        if not self.runtime.memory_enabled:
            return None
        from cairn.memory import RecallLifecycle, initial_recall_wait_ms

        manager = self.runtime.memory_manager()
        if self._unlisten is None:
            self._unlisten = manager.add_change_listener(self._changed)
        return RecallLifecycle(
            manager,
            self.runtime.provider,
            session_id=self.session_id,
            initial_wait_ms=initial_recall_wait_ms(),
        )

    async def _changed(self, session_id: str, change: MemoryChanged | Notice) -> None:
        """What Extract saved (or that it failed) for this session, after its turn."""
        if session_id == self.session_id:  # after close too: `cairn -p` shows what Extract saved
            await self._emit(change)

    def stop_listening(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None

    # ----- the system prompt's memory section -----

    def prompt_section(self) -> str:
        """The memory section of the system prompt now ("" while off or warming up)."""
        if not self.on:
            return ""
        if self.runtime.memory_warming:
            self._generation = -1  # built again once the warm-up is over
            return ""
        try:
            manager = self.runtime.memory_manager()
            self._generation = manager.generation
            return manager.system_prompt_section()
        except Exception as exc:
            _log.warning(f"memory prompt section unavailable: {exc!r}")
            return ""

    async def settled(self, request: PromptRequest | None = None) -> bool:
        """Wait for the runtime's memory warm-up; whether the prompt needs its memory section
        now (it was built while the warm-up ran). A user's prompt (not a command) does not
        wait when the backend serves Recall meanwhile (a fresh machine's PostgreSQL memory),
        but for that search to be ready, at most 100 ms: its section joins on a later turn."""
        if not self.on:
            return False
        typed = request is not None and request.fresh and request.text.lstrip()[:1] != "/"
        warm_up = self.runtime.memory_manager().warm_up
        if typed and warm_up.search is not None:
            from cairn.memory import initial_recall_wait_ms

            await warm_up.search_ready(initial_recall_wait_ms() / 1000)
            return False
        await self.runtime.memory_ready()
        return self._generation == -1

    def stale(self) -> bool:
        """Extract, Dream or Forget changed the memory files since the prompt was built."""
        return self.on and self.runtime.memory_manager().generation != self._generation

    def user_said(self, text: str) -> None:
        """The user wrote ``text`` now: a message restating a fact they asked to forget, after
        the forget, lets the session's agent save it again (:class:`MemoryWrites`)."""
        self.writes.user_said(text)

    # ----- after a fresh turn that ended normally -----

    def schedule_tasks(self, history: Sequence[Content]) -> None:
        """Schedule Extract and Dream once, with the final history; never awaited."""
        if not self.on:
            return
        runtime = self.runtime
        manager = runtime.memory_manager()
        try:
            manager.schedule_extract(
                project_root=runtime.project_root,
                session_id=self.session_id,
                history=list(history),
                runtime=runtime,
                hand_off=runtime.extract_in_worker,
                said=list(self.writes.said),
                asked=self.writes.asked(),
            )
            if not runtime.extract_in_worker:  # cairn -p: its worker checks Dream's gates
                manager.schedule_dream(
                    project_root=runtime.project_root, session_id=self.session_id, runtime=runtime
                )
        except Exception as exc:
            _log.warning(f"scheduling memory tasks failed: {exc!r}")
