"""A live session's checkpoints: one per turn, taken right before the turn's first change.

:class:`TurnCheckpoints` prepares the project's shadow index in the background during the
session's first turn that may change the workspace, takes the checkpoint when the scheduler
awaits :meth:`TurnCheckpoints.before_change`, and records it next to the turn, so ``/rewind``
(:mod:`cairn.session.rewind`) can go back to it. Every session builds one, so the shadow
repository's code (:mod:`cairn.recording.checkpoints`) is imported only when a turn uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.vocabulary import EventSink, Notice

if TYPE_CHECKING:
    from cairn.config.settings import CheckpointingSettings
    from cairn.recording.checkpoints import Checkpoint, ShadowRepository
    from cairn.recording.recorder import ChatRecorder

__all__ = ["NOTICE_SOURCE", "TurnCheckpoints", "name_paths"]

NOTICE_SOURCE = "checkpoint"
SHOWN_PATHS = 5  # paths named in a one-line message before "and N more"

_log = get_logger("CHECKPOINTS")


class TurnCheckpoints:
    """The live session's checkpoints: one per turn, before the turn's first change."""

    def __init__(
        self, project_root: Path, settings: CheckpointingSettings, recorder: ChatRecorder
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.recorder = recorder
        self._shadow: tuple[ShadowRepository | None, str | None] | None = None
        self._turn: str | None = None  # uuid of the current turn's user record
        self._taken: str | None = None  # the turn whose checkpoint is taken (or given up)
        self._told: set[str] = set()  # messages already shown in this session
        self._preparing: asyncio.Task[None] | None = None
        self._preparer: asyncio.subprocess.Process | None = None

    def start_turn(self, user_uuid: str, *, prepare: bool = True) -> None:
        """A user turn starts; ``prepare=False`` when it cannot change the workspace (plan)."""
        self._turn = user_uuid
        if prepare and self._preparing is None:  # the session's first turn that may change it
            self._preparing = asyncio.get_running_loop().create_task(self._prepare())

    async def _prepare(self) -> None:
        """A project without a shadow index yet: build it in the background while the model
        thinks, so the turn's first change waits for an incremental snapshot only (the first
        one of a big project takes seconds: benchmarks/README.md). Best effort."""
        from cairn.recording.checkpoints import CheckpointError, shadow_repository

        try:
            if self._shadow is None:
                self._shadow = await asyncio.to_thread(
                    shadow_repository, self.project_root, self.settings
                )
            shadow = self._shadow[0]
            if shadow is None or shadow.is_prepared():
                return
            limits = shadow.limits
            self._preparer = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cairn.recording.checkpoints",
                str(shadow.work_tree), str(shadow.store), str(limits.max_file_bytes),
                str(limits.max_files), str(limits.max_total_bytes),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            try:
                await self._preparer.wait()
            finally:
                if self._preparer.returncode is None:  # cancelled: the session closes
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self._preparer.pid, signal.SIGKILL)
                    await self._preparer.wait()
        except (OSError, CheckpointError) as exc:
            _log.debug(f"checkpoint preparation skipped: {exc}")

    async def prepared(self) -> None:
        """Until the session's preparation of the shadow index (if any) has ended."""
        if self._preparing is not None:
            await asyncio.gather(self._preparing, return_exceptions=True)

    async def close(self) -> None:
        """Stop a preparation still running, with its git processes (the next session's
        snapshot does the work); the lock it held goes with it."""
        if self._preparing is not None:
            self._preparing.cancel()
        await self.prepared()

    async def before_change(self, emit: EventSink) -> None:
        """Checkpoint the workspace unless this turn has its checkpoint already."""
        turn = self._turn
        if turn is None or self._taken == turn:
            return
        self._taken = turn
        from cairn.recording.checkpoints import CheckpointError

        await self.prepared()  # the snapshot needs its lock, and builds on its work
        try:
            checkpoint = await asyncio.to_thread(self._snapshot, turn)
        except CheckpointError as exc:
            _log.warning(f"checkpoint skipped: {exc}")
            self._record_not_taken(turn, str(exc))  # a rewind says why it cannot restore
            await self._tell(emit, f"No checkpoint before this change: {exc}.")
            return
        self._record(turn, checkpoint)
        if checkpoint.skipped:
            paths = [s.path for s in checkpoint.skipped]
            await self._tell(
                emit,
                f"Checkpoint taken; {len(paths)} file(s) not captured, which /rewind cannot "
                f"restore: {name_paths(paths)} ({checkpoint.skipped[0].reason}).",
            )

    def _snapshot(self, turn: str) -> Checkpoint:
        from cairn.recording.checkpoints import CheckpointsUnavailable, shadow_repository

        if self._shadow is None:  # found in the worker thread: it runs `git --version`
            self._shadow = shadow_repository(self.project_root, self.settings)
        shadow, reason = self._shadow
        if shadow is None:
            raise CheckpointsUnavailable(reason or "checkpoints are off")
        return shadow.snapshot(f"before turn {turn}")

    def _record(self, turn: str, checkpoint: Checkpoint) -> None:
        from cairn.recording.rewind import CHECKPOINT, RECORDED_SKIPPED_PATHS

        skipped = [s.path for s in checkpoint.skipped]
        self.recorder.record_system(
            CHECKPOINT,
            {
                "commit": checkpoint.commit,
                "turn": turn,
                "files": checkpoint.files,
                "bytes": checkpoint.bytes,
                "skipped": skipped[:RECORDED_SKIPPED_PATHS],
                "skippedCount": len(skipped),
            },
        )

    def _record_not_taken(self, turn: str, reason: str) -> None:
        from cairn.recording.rewind import CHECKPOINT

        self.recorder.record_system(CHECKPOINT, {"commit": None, "turn": turn, "notTaken": reason})

    async def _tell(self, emit: EventSink, text: str) -> None:
        if text in self._told:
            return
        self._told.add(text)
        await emit(Notice("warning", text, NOTICE_SOURCE))


def name_paths(paths: Sequence[str]) -> str:
    """The first few of ``paths``, then how many more."""
    shown = ", ".join(paths[:SHOWN_PATHS])
    more = len(paths) - SHOWN_PATHS
    return shown + (f" and {more} more" if more > 0 else "")
