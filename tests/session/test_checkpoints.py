"""Checkpoints of many sessions in one workspace: one shadow index, a bounded number of git runs.

Every git the checkpoints run goes through a wrapper on ``PATH`` that logs when it starts and
ends, so the tests read how many ran, for what, and how many at once.
"""

from __future__ import annotations

import asyncio
import gc
import io
import os
import subprocess
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.config.settings import Settings
from cairn.debug_log import mirror_warnings
from cairn.llm.types import ModelRequest
from cairn.recording.checkpoints import ShadowRepository, shadow_repository
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import Reply, ScriptedProvider, reply, tool_call
from cairn.vocabulary import SessionEvent
from cairn.vocabulary.events import Notice

from ..git_helpers import make_repository

SESSIONS = 12
GIT_BOUND = 2  # git processes the checkpoints of one process may run at once


@dataclass
class GitLog:
    """What the logging ``git`` on ``PATH`` saw: one ``start``/``end`` line per run."""

    path: Path

    def lines(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        return [line.split(" ", 2) for line in self.path.read_text().splitlines()]

    def runs(self, word: str) -> int:
        """How many runs had ``word`` among their arguments."""
        return sum(1 for line in self.lines() if line[0] == "start" and word in line[2].split())

    def most_at_once(self) -> int:
        running = most = 0
        for line in self.lines():
            running += 1 if line[0] == "start" else -1
            most = max(most, running)
        return most


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitLog]:
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    folder = tmp_path / "logging-bin"
    folder.mkdir()
    log = tmp_path / "git.log"
    wrapper = folder / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "start $$ $*" >> {log}\n'
        f'{real.stdout.strip()} "$@"\n'
        "status=$?\n"
        f'echo "end $$ -" >> {log}\n'
        "exit $status\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    yield GitLog(log)


@pytest.fixture
async def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    files = {f"src/module{i}.py": f"x = {i}\n" for i in range(200)}
    repo = make_repository(tmp_path / "repo", files)
    settings = Settings.model_validate({"memory": {"enableManagedAutoMemory": False}})
    runtime = Runtime(cwd=repo, settings=settings, provider=ScriptedProvider(reply("Done.")))
    yield runtime
    await runtime.aclose()


async def _first_turns(runtime: Runtime, sessions: list[Session]) -> list[list[str]]:
    """Each session's first turn, all at once; the notices each turn showed (a checkpoint not
    taken says why in one)."""
    notices: list[list[str]] = [[] for _ in sessions]

    def sink(shown: list[str]) -> Callable[[SessionEvent], Awaitable[None]]:
        async def keep(event: SessionEvent) -> None:
            if isinstance(event, Notice):
                shown.append(event.text)

        return keep

    pairs = zip(sessions, notices, strict=True)
    results = await asyncio.gather(*(s.prompt(PromptRequest("hi"), sink(n)) for s, n in pairs))
    assert all(r.stop_reason == "end_turn" for r in results), results
    return notices


def _shadow(runtime: Runtime) -> ShadowRepository:
    shadow, reason = shadow_repository(runtime.project_root, runtime.settings.general.checkpointing)
    assert shadow is not None, reason
    return shadow


async def test_the_sessions_of_one_workspace_share_one_preparation(
    runtime: Runtime, git_log: GitLog
) -> None:
    """Regression (issue 32): every new session of the daemon or the ACP agent started its own
    preparation of the shadow index (a Python process running git, and `git --version` first),
    so 50 sessions in one workspace ran some 50 processes at once and 1.3 GB of memory."""
    sessions = [runtime.new_session(approval_mode="yolo") for _ in range(SESSIONS)]

    await _first_turns(runtime, sessions)
    for session in sessions:
        assert session.checkpoints is not None
        await session.checkpoints.prepared()

    assert _shadow(runtime).is_prepared()
    assert git_log.runs("write-tree") == 1  # one preparation staged the index
    assert git_log.runs("--version") <= 1  # checked once for the process, not per session
    assert git_log.most_at_once() <= GIT_BOUND


async def test_sessions_changing_files_at_once_each_get_a_checkpoint_within_the_git_bound(
    runtime: Runtime, git_log: GitLog
) -> None:
    """Each turn's first change is checkpointed, and the sessions' snapshots queue for the
    workspace instead of running git side by side (and filling the thread pool, waiting for
    the lock)."""
    provider = runtime.provider
    assert isinstance(provider, ScriptedProvider)
    sessions = [runtime.new_session(approval_mode="yolo") for _ in range(SESSIONS)]
    for index, session in enumerate(sessions):
        provider.enqueue(
            tool_call("write_file", {"file_path": f"new{index}.py", "content": "y = 1\n"}),
            reply("Written."),
            session_id=session.id,
        )

    warnings = io.StringIO()  # a failure other than CheckpointError is only logged
    mirror_warnings(warnings)
    try:
        notices = await _first_turns(runtime, sessions)
    finally:
        mirror_warnings(None)

    for index, session in enumerate(sessions):
        assert (runtime.project_root / f"new{index}.py").exists()
        listing = await session.rewind_listing()
        why = (index, notices[index], warnings.getvalue())
        assert [p.code for p in listing.points] == [True], why
    assert git_log.most_at_once() <= GIT_BOUND


async def test_closing_one_session_leaves_the_shared_preparation_to_the_others(
    runtime: Runtime, git_log: GitLog
) -> None:
    first, second = (runtime.new_session(approval_mode="yolo") for _ in range(2))
    assert first.checkpoints is not None and second.checkpoints is not None
    for checkpoints in (first.checkpoints, second.checkpoints):
        checkpoints.start_turn("turn-1")  # as each session's first prompt does
        checkpoints.answering()  # and its model's first words

    await first.close()
    await second.checkpoints.prepared()

    assert _shadow(runtime).is_prepared()
    await second.close()


async def test_a_preparation_waits_until_the_session_can_change_something(
    runtime: Runtime, git_log: GitLog
) -> None:
    """A session whose turns cannot change the workspace (plan mode) starts no git at all."""
    session = runtime.new_session(approval_mode="plan")

    await _first_turns(runtime, [session])
    assert session.checkpoints is not None
    await session.checkpoints.prepared()

    assert git_log.lines() == []


async def test_the_preparation_starts_once_the_request_is_out(
    runtime: Runtime, git_log: GitLog
) -> None:
    """Nothing can change before the model answers: the shadow index is built while it
    thinks, never in the way of the turn's first request."""
    git_runs_at_request: list[int] = []
    session = runtime.new_session(approval_mode="yolo")
    checkpoints = session.checkpoints
    assert checkpoints is not None

    async def answer(request: ModelRequest) -> Reply:
        await checkpoints.prepared()  # a preparation started with the turn would end first
        git_runs_at_request.append(len(git_log.lines()))
        return reply("Done.")

    provider = runtime.provider
    assert isinstance(provider, ScriptedProvider)
    provider.handler = answer

    await _first_turns(runtime, [session])
    await checkpoints.prepared()

    assert git_runs_at_request == [0]
    assert _shadow(runtime).is_prepared()


def test_an_ended_event_loop_and_the_sessions_that_ran_on_it_are_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the registry of each loop's workspaces kept every ended loop alive (their
    locks and tasks refer to it) and with it every session that had taken a checkpoint on it;
    a test process leaked every test's app and session."""
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    repo = make_repository(tmp_path / "repo", {"a.txt": "a\n"})
    settings = Settings.model_validate({"memory": {"enableManagedAutoMemory": False}})
    alive: list[weakref.ref[object]] = []

    async def one_turn() -> None:
        runtime = Runtime(cwd=repo, settings=settings, provider=ScriptedProvider(reply("Done.")))
        session = runtime.new_session(approval_mode="yolo")
        await _first_turns(runtime, [session])
        assert session.checkpoints is not None
        await session.checkpoints.prepared()
        assert _shadow(runtime).is_prepared()
        alive.extend([weakref.ref(asyncio.get_running_loop()), weakref.ref(session)])
        await session.close()
        await runtime.aclose()

    asyncio.run(one_turn())
    gc.collect()

    assert [ref() for ref in alive] == [None, None]
