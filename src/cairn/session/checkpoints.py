"""A live session's checkpoints: one per turn, taken right before the turn's first change.

:class:`TurnCheckpoints` takes the checkpoint when the scheduler awaits
:meth:`TurnCheckpoints.before_change` and records it next to the turn, so ``/rewind``
(:mod:`cairn.session.rewind`) can go back to it. What the sessions of one process share for a
workspace is :class:`WorkspaceCheckpoints`: the shadow repository (found once: it runs
``git --version``), the one background preparation of its shadow index, started once the model
answers the first turn of any session that may change the workspace, and a queue for git: the
sessions' snapshots run one at a time per workspace and at most :data:`GIT_JOBS` at a time per
process. Across processes, the shadow repository's lock decides (a preparer finding it held leaves
the work to its holder). The preparation runs git from a worker thread, not a process of its own: a
Python process per preparation cost 20-30 MB and 0.1-0.3 s of CPU (benchmarks/README.md). The shadow
repository's code (:mod:`cairn.recording.checkpoints`) is imported only when a turn uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.debug_log import get_logger
from cairn.vocabulary import EventSink, Notice

if TYPE_CHECKING:
    from cairn.config.settings import CheckpointingSettings, Settings
    from cairn.recording.checkpoints import Checkpoint, ShadowRepository
    from cairn.recording.recorder import ChatRecorder

__all__ = ["GIT_JOBS", "NOTICE_SOURCE", "TurnCheckpoints", "WorkspaceCheckpoints", "name_paths"]

NOTICE_SOURCE = "checkpoint"
SHOWN_PATHS = 5  # paths named in a one-line message before "and N more"
GIT_JOBS = 2  # checkpoint git jobs (a preparation, a snapshot) one process runs at once

_log = get_logger("CHECKPOINTS")
_T = TypeVar("_T")


class WorkspaceCheckpoints:
    """The checkpoints of one workspace, shared by every session of this process (the daemon's
    and the ACP agent's many sessions cost one shadow index)."""

    def __init__(
        self, project_root: Path, settings: CheckpointingSettings, jobs: asyncio.Semaphore
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self._jobs = jobs  # shared by every workspace of the process
        self._turn = asyncio.Lock()  # one git job at a time in this workspace
        self._shadow: tuple[ShadowRepository | None, str | None] | None = None
        self._finding: asyncio.Task[tuple[ShadowRepository | None, str | None]] | None = None
        self._preparing: asyncio.Task[None] | None = None
        self._users: set[object] = set()  # sessions that asked for the preparation, still open

    async def shadow(self) -> tuple[ShadowRepository | None, str | None]:
        """The shadow repository, or ``None`` and why checkpoints are off (found once)."""
        if self._shadow is not None:
            return self._shadow
        if self._finding is None:
            from cairn.recording.checkpoints import shadow_repository

            self._finding = asyncio.ensure_future(
                asyncio.to_thread(shadow_repository, self.project_root, self.settings)
            )
        self._shadow = await asyncio.shield(self._finding)
        return self._shadow

    def prepare(self, user: object) -> None:
        """``user``'s turn may change the workspace: build the shadow index in the background
        unless it exists or is being built. It runs until built or every user has left."""
        self._users.add(user)
        if self._preparing is None:
            self._preparing = asyncio.get_running_loop().create_task(self._prepare())

    async def prepared(self) -> None:
        """Until the preparation (if any) has ended."""
        if self._preparing is not None:
            await asyncio.wait({self._preparing})

    async def leave(self, user: object) -> None:
        """``user`` closes; the last one to leave stops a preparation still running (its git is
        killed; the next snapshot does the work)."""
        self._users.discard(user)
        if not self._users and self._preparing is not None and not self._preparing.done():
            self._preparing.cancel()
            await self.prepared()
            self._preparing = None  # a later session prepares again

    async def run(self, work: Callable[[ShadowRepository], _T]) -> _T:
        """``work`` on the shadow repository in a worker thread, in the workspace's git queue;
        :class:`~cairn.recording.checkpoints.CheckpointsUnavailable` when checkpoints are off."""
        from cairn.recording.checkpoints import CheckpointsUnavailable

        shadow, reason = await self.shadow()
        if shadow is None:
            raise CheckpointsUnavailable(reason or "checkpoints are off")
        async with self._queued():
            job = asyncio.ensure_future(asyncio.to_thread(work, shadow))
            try:
                return await asyncio.shield(job)
            except asyncio.CancelledError:
                await asyncio.wait({job})  # its git runs on: the queue waits for it to end
                _retrieve(job)
                raise

    @contextlib.asynccontextmanager
    async def _queued(self) -> AsyncIterator[None]:
        async with self._turn, self._jobs:
            yield

    async def _prepare(self) -> None:
        """The first snapshot of a project hashes every file (seconds in a big one): build the
        index while the model thinks, so a turn's first change waits for an incremental
        snapshot only (benchmarks/README.md). With git runs of its own, which the last session
        to leave stops (the git running is killed). Best effort."""
        from cairn.recording.checkpoints import CheckpointError

        try:
            shadow = (await self.shadow())[0]
            if shadow is None or shadow.is_prepared():
                return
            async with self._queued():
                if shadow.is_prepared():  # a snapshot queued before us built it
                    return
                preparer = shadow.twin()
                job = asyncio.ensure_future(asyncio.to_thread(preparer.prepare))
                try:
                    await asyncio.shield(job)
                except asyncio.CancelledError:
                    preparer.stop()
                    await asyncio.wait({job})
                    _retrieve(job)  # a stopped preparation ends in an error nobody needs
                    raise
        except (OSError, CheckpointError) as exc:
            _log.debug(f"checkpoint preparation skipped: {exc}")


def _retrieve(job: asyncio.Future[Any]) -> None:
    if not job.cancelled() and job.exception() is not None:
        _log.debug(f"checkpoint work ended after its waiter left: {job.exception()!r}")


class _Workspaces:
    """The workspaces' checkpoints of one event loop (a process runs one), and its git bound."""

    def __init__(self) -> None:
        self.jobs = asyncio.Semaphore(GIT_JOBS)
        self.by_key: dict[tuple[object, ...], WorkspaceCheckpoints] = {}


# Each loop's workspaces live on the loop itself, so they go with it. A registry keyed by loop
# (even weakly) kept every ended loop alive: the workspaces' locks and tasks refer to their loop,
# and they held every session that had taken a checkpoint on it. A loop that takes no attribute
# of its own (a C-implemented one) falls back to the registry.
_LOOP_ATTRIBUTE = "_cairn_checkpoint_workspaces"
_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Workspaces] = (
    weakref.WeakKeyDictionary()
)


def _loop_workspaces() -> _Workspaces:
    loop = asyncio.get_running_loop()
    workspaces = getattr(loop, _LOOP_ATTRIBUTE, None) or _LOOPS.get(loop)
    if workspaces is None:
        workspaces = _Workspaces()
        try:
            setattr(loop, _LOOP_ATTRIBUTE, workspaces)
        except AttributeError:
            _LOOPS[loop] = workspaces
    return workspaces


def workspace_checkpoints(
    project_root: Path, settings: CheckpointingSettings
) -> WorkspaceCheckpoints:
    """The process's one :class:`WorkspaceCheckpoints` for ``project_root`` and these limits."""
    workspaces = _loop_workspaces()
    key = (
        project_root,
        os.environ.get("CAIRN_HOME"),
        settings.enabled,
        settings.max_file_size_mb,
        settings.max_files,
        settings.max_snapshot_size_mb,
    )
    found = workspaces.by_key.get(key)
    if found is None:
        found = workspaces.by_key[key] = WorkspaceCheckpoints(
            project_root, settings, workspaces.jobs
        )
    return found


class TurnCheckpoints:
    """The live session's checkpoints: one per turn, before the turn's first change."""

    def __init__(
        self, project_root: Path, settings: CheckpointingSettings, recorder: ChatRecorder
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.recorder = recorder
        self._workspace: WorkspaceCheckpoints | None = None
        self._turn: str | None = None  # uuid of the current turn's user record
        self._taken: str | None = None  # the turn whose checkpoint is taken (or given up)
        self._told: set[str] = set()  # messages already shown in this session
        self._wanted = False  # the turn may change the workspace: prepare once it is answered

    @classmethod
    def of(
        cls, project_root: Path, settings: Settings, recorder: ChatRecorder | None
    ) -> TurnCheckpoints | None:
        """A session's checkpoints (``None`` without a recording: a checkpoint is tied to its
        turn in the recording)."""
        if recorder is None:
            return None
        return cls(project_root, settings.general.checkpointing, recorder)

    @property
    def workspace(self) -> WorkspaceCheckpoints:
        if self._workspace is None:
            self._workspace = workspace_checkpoints(self.project_root, self.settings)
        return self._workspace

    def start_turn(self, user_uuid: str, *, prepare: bool = True) -> None:
        """A user turn starts; ``prepare=False`` when it cannot change the workspace (plan)."""
        self._turn = user_uuid
        self._wanted = prepare

    def answering(self) -> None:
        """The model answers the turn (its request is out): a change can come now, so the
        workspace's shadow index is prepared meanwhile if the turn may change it. Started no
        sooner, it never delays the request."""
        if self._wanted:
            self._wanted = False
            self.workspace.prepare(self)

    async def prepared(self) -> None:
        """Until the workspace's preparation of the shadow index (if any) has ended."""
        if self._workspace is not None:
            await self._workspace.prepared()

    async def close(self) -> None:
        """The session closes: a preparation nobody else waits for is stopped."""
        if self._workspace is not None:
            await self._workspace.leave(self)

    async def before_change(self, emit: EventSink) -> None:
        """Checkpoint the workspace unless this turn has its checkpoint already."""
        turn = self._turn
        if turn is None or self._taken == turn:
            return
        self._taken = turn
        from cairn.recording.checkpoints import CheckpointError

        try:  # queued behind a preparation: the snapshot builds on its work
            checkpoint = await self.workspace.run(
                lambda shadow: shadow.snapshot(f"before turn {turn}")
            )
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
