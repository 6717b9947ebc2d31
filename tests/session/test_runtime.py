"""The Runtime: sessions and their recordings, memory managers, and background work."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cairn.content import Content
from cairn.session.runtime import SessionNotFound, SessionUnreadable
from cairn.testing import Reply, ToolCallSpec, reply

from ..memory.memory_helpers import fill_memories, scan_workers
from ..polling import eventually_async
from .helpers import ANSWER, MakeWorld, World, write_memory

pytestmark = pytest.mark.timeout(60)


def _conversation(history: list[Content], startup_length: int) -> list[tuple[str, str]]:
    return [(c.role, c.text) for c in history[startup_length:]]


async def _recorded_session(world: World, prompt: str, *, mtime: float | None = None) -> str:
    """A session with one exchange, closed; its recording's mtime set when given."""
    session = world.session()
    await world.prompt(session, prompt)
    await session.close()
    if mtime is not None:
        os.utime(world.runtime.chats_dir / f"{session.id}.jsonl", (mtime, mtime))
    return session.id


# ----- sessions -----


async def test_a_new_session_gets_a_fresh_id_and_records_into_the_chats_folder(
    make_world: MakeWorld,
) -> None:
    world = make_world()

    first, second = world.session(), world.session()

    assert first.id != second.id
    assert str(uuid.UUID(first.id)) == first.id
    assert (world.runtime.chats_dir / f"{first.id}.jsonl").is_file()
    assert world.runtime.session_exists(first.id)


async def test_an_unknown_session_option_is_refused_not_ignored(make_world: MakeWorld) -> None:
    """A misspelt option (``aproval_mode``) must fail loudly: ignored, the session would run
    with the default approval mode."""
    world = make_world()
    recorded = await _recorded_session(world, "hello")

    with pytest.raises(TypeError, match="unknown session options: aproval_mode"):
        world.runtime.new_session(aproval_mode="yolo")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unknown session options: aproval_mode"):
        world.runtime.load_session(recorded, aproval_mode="yolo")  # type: ignore[call-arg]


async def test_a_loaded_session_continues_the_recorded_conversation(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    original = world.session()
    await world.prompt(original, "my name is Ada")
    await original.close()

    loaded = world.load(original.id)
    await world.prompt(loaded, "what is my name?")

    assert loaded.id == original.id
    startup = loaded.client.startup_length
    assert _conversation(loaded.history, startup) == [
        ("user", "my name is Ada"),
        ("model", ANSWER),
        ("user", "what is my name?"),
        ("model", ANSWER),
    ]
    request = world.last_main()
    assert [c.text for c in request.contents[startup:]] == [
        "my name is Ada",
        ANSWER,
        "what is my name?",
    ]


async def test_a_loaded_session_keeps_recording_into_the_same_file(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    original = world.session()
    await world.prompt(original, "first")
    await original.close()

    loaded = world.load(original.id)
    await world.prompt(loaded, "second")
    await loaded.close()
    again = world.load(original.id)

    assert _conversation(again.history, again.client.startup_length) == [
        ("user", "first"),
        ("model", ANSWER),
        ("user", "second"),
        ("model", ANSWER),
    ]
    assert sorted(p.name for p in world.runtime.chats_dir.iterdir()) == [f"{original.id}.jsonl"]


async def test_loading_an_unknown_session_raises_session_not_found(make_world: MakeWorld) -> None:
    world = make_world()
    missing = str(uuid.uuid4())

    with pytest.raises(SessionNotFound) as caught:
        world.runtime.load_session(missing)

    assert str(caught.value) == f'No session found with ID "{missing}".'
    assert not world.runtime.session_exists(missing)


@pytest.mark.parametrize("bad_id", ["../../etc/passwd", "not-a-session", "", "x" * 36])
async def test_loading_a_malformed_id_raises_session_not_found(
    make_world: MakeWorld, bad_id: str
) -> None:
    world = make_world()

    with pytest.raises(SessionNotFound, match="No session found with ID"):
        world.runtime.load_session(bad_id)


async def test_a_malformed_id_is_refused_even_when_such_a_file_exists(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.runtime.chats_dir.mkdir(parents=True, exist_ok=True)
    (world.runtime.chats_dir / "notes.jsonl").write_text("{}\n")

    with pytest.raises(SessionNotFound):
        world.runtime.load_session("notes")


async def test_sessions_are_listed_newest_first(make_world: MakeWorld) -> None:
    world = make_world()
    old = await _recorded_session(world, "the old one", mtime=1_700_000_000)
    new = await _recorded_session(world, "the new one", mtime=1_700_000_200)
    middle = await _recorded_session(world, "the middle one", mtime=1_700_000_100)

    listed = world.runtime.list_sessions()

    assert [info.session_id for info in listed] == [new, middle, old]
    assert [info.first_prompt for info in listed] == [
        "the new one",
        "the middle one",
        "the old one",
    ]
    assert [i.session_id for i in world.runtime.list_sessions(limit=2)] == [new, middle]
    assert world.runtime.latest_session_id() == new


async def test_a_project_without_sessions_lists_none(make_world: MakeWorld) -> None:
    world = make_world()

    assert world.runtime.list_sessions() == []
    assert world.runtime.latest_session_id() is None


async def test_sessions_are_not_recorded_when_recording_is_off(make_world: MakeWorld) -> None:
    world = make_world()
    world.runtime.record_chats = False
    session = world.session()

    await world.prompt(session, "hello")

    assert session.recorder is None
    assert world.runtime.list_sessions() == []


# ----- memory managers -----


async def test_there_is_one_memory_manager_per_project_root(
    make_world: MakeWorld, project: Path, tmp_path: Path
) -> None:
    world = make_world(memory=True)
    other = tmp_path / "other-project"
    other.mkdir()

    default = world.runtime.memory_manager()

    assert world.runtime.memory_manager() is default
    assert world.runtime.memory_manager(project) is default
    assert world.runtime.memory_manager(project / "src" / "..") is default
    assert world.runtime.memory_manager(other) is not default
    assert world.runtime.memory_manager(other) is world.runtime.memory_manager(other)
    assert default.project_root == project.resolve()


# ----- background work and closing -----


async def test_spawn_runs_background_work_under_its_name(make_world: MakeWorld) -> None:
    world = make_world()

    async def work() -> str:
        return "done"

    task = world.runtime.spawn(work(), name="memory-extract")

    assert task.get_name() == "memory-extract"
    assert await task == "done"


async def test_a_failing_background_task_never_raises_into_the_runtime(
    make_world: MakeWorld,
) -> None:
    world = make_world()

    async def broken() -> None:
        raise RuntimeError("boom")

    task = world.runtime.spawn(broken(), name="broken")
    await asyncio.gather(task, return_exceptions=True)

    await world.runtime.aclose()  # does not raise
    assert isinstance(task.exception(), RuntimeError)


async def test_aclose_cancels_unfinished_background_tasks(make_world: MakeWorld) -> None:
    world = make_world()
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    task = world.runtime.spawn(forever(), name="forever")
    await started.wait()

    await world.runtime.aclose()

    assert task.cancelled()
    assert world.provider.closed


async def test_aclose_persists_the_memory_index(make_world: MakeWorld, project: Path) -> None:
    write_memory(project, "deploy", "how we deploy", "make release")
    world = make_world(memory=True)
    manager = world.runtime.memory_manager()
    assert [doc.title for doc in manager.docs()] == ["deploy"]
    index_folder = manager.roots.state_dir / "recall-index"
    assert not index_folder.exists()

    await world.runtime.aclose()

    # the saved index: its snapshot, the snapshot's texts, and the journal writes append to
    saved = {p.name for p in index_folder.iterdir() if not p.name.endswith(".lock")}
    texts = {name for name in saved if re.fullmatch(r"project\.[0-9a-f]+\.txt", name)}
    assert len(texts) == 1 and saved - texts == {"project.bin", "project.jnl"}, saved


async def test_aclose_after_a_warm_up_that_finished_saves_its_index(
    make_world: MakeWorld, project: Path
) -> None:
    """The usual path: the session's warm-up indexed the memory before the runtime closed, so
    its index is saved and the next process starts warm."""
    write_memory(project, "deploy", "how we deploy", "make release")
    world = make_world(memory=True)
    world.session()  # its warm-up starts
    await world.runtime.memory_ready()
    index = world.runtime.memory_manager().roots.state_dir / "recall-index" / "project.bin"

    await world.runtime.aclose()

    assert index.exists()


async def test_aclose_gives_up_the_first_scan_of_a_large_memory_and_saves_none(
    make_world: MakeWorld, project: Path
) -> None:
    """Regression: a runtime closed while its warm-up read a large memory for the first time
    (no saved index: a new project, a new machine) waited for the whole scan (seconds at
    10,000 memories) after the session was over. Here the scan's worker processes are paused,
    so it cannot end: the close now gives it up all the same, stops the workers and saves no
    index (a half-built one is never saved; the next process builds it)."""
    root = project / ".cairn" / "memory"
    fill_memories(root, 2_000)  # a first scan in worker processes
    (root / "MEMORY.md").write_text("- [Deploying service 0](project/service-0.md)\n")
    world = make_world(memory=True)
    world.session()  # its warm-up starts
    index_folder = world.runtime.memory_manager().roots.state_dir / "recall-index"
    paused: list[int] = []
    try:
        assert await eventually_async(lambda: bool(scan_workers(os.getpid())))
        for pid in scan_workers(os.getpid()):
            os.kill(pid, signal.SIGSTOP)  # the scan under way cannot end while they sleep
            paused.append(pid)
        await asyncio.wait_for(world.runtime.aclose(), 30)  # (a hang guard: forever before)
    finally:
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    assert not any(Path(f"/proc/{pid}").exists() for pid in paused)
    saved = [p.name for p in index_folder.iterdir()] if index_folder.exists() else []
    assert [name for name in saved if not name.endswith(".lock")] == []


# ----- shutdown: Runtime.aclose(memory_wait=...) -----

PREFERENCE = "By the way: I always use pytest for tests, never unittest."


def _memory_path(project: Path) -> Path:
    return project / ".cairn" / "memory" / "feedback" / "testing.md"


def _script_extraction(world: World, project: Path, *, delay: float) -> None:
    """The extraction agent saves one memory after ``delay`` seconds, then says it is done."""
    content = (
        "---\nname: Tests use pytest\ndescription: the user's test framework\n"
        "type: feedback\n---\n\nAlways pytest, never unittest.\n"
    )
    args = {"file_path": str(_memory_path(project)), "content": content}
    write = ToolCallSpec("write_file", args)
    world.provider.enqueue(
        Reply(tool_calls=[write], delay=delay), reply("Saved."), purpose="extract"
    )


def _extraction_status(world: World) -> str:
    [task] = [t for t in world.runtime.memory_manager().recent_tasks() if t.kind == "extract"]
    return task.status


async def _until(condition: Callable[[], object]) -> None:
    assert await eventually_async(lambda: bool(condition()))


async def test_aclose_with_a_memory_wait_lets_the_turns_extraction_finish(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world(memory=True)
    _script_extraction(world, project, delay=0.3)
    session = world.session()
    await world.prompt(session, PREFERENCE)

    await world.runtime.aclose(memory_wait=30)

    assert "Always pytest" in _memory_path(project).read_text()
    assert _extraction_status(world) == "completed"


@pytest.mark.parametrize("memory_wait", [0.0, 0.2], ids=["no wait", "a wait too short"])
async def test_an_extraction_that_outlasts_the_memory_wait_is_cancelled_and_moves_no_cursor(
    make_world: MakeWorld, project: Path, memory_wait: float
) -> None:
    world = make_world(memory=True)
    _script_extraction(world, project, delay=30)
    session = world.session()
    await world.prompt(session, PREFERENCE)
    await _until(lambda: world.provider.requests_for("extract"))
    manager = world.runtime.memory_manager()

    await world.runtime.aclose(memory_wait=memory_wait)

    assert not _memory_path(project).exists()
    assert not (manager.roots.state_dir / "extract-cursor.json").exists()
    assert _extraction_status(world) == "cancelled"
    assert world.provider.closed


async def test_aclose_cancels_a_running_turn_and_flushes_its_recording(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(reply("too late", delay=30), purpose="main")
    session = world.session()
    turn = asyncio.ensure_future(world.prompt(session, "a question the model never answers"))
    await _until(lambda: world.provider.requests_for("main"))

    await world.runtime.aclose()

    result = await turn
    assert result.stop_reason == "cancelled"
    recording = (world.runtime.chats_dir / f"{session.id}.jsonl").read_text()
    assert "a question the model never answers" in recording



async def test_an_unreadable_recording_raises_session_unreadable(make_world: MakeWorld) -> None:
    """Regression: a recording that exists but cannot be read (EIO, a permission error) reached
    the crash handler ("internal error ... This is a bug") instead of a message."""
    world = make_world()
    session_id = str(uuid.uuid4())
    world.runtime.chats_dir.mkdir(parents=True, exist_ok=True)
    # Reading /proc/self/mem from offset 0 fails with EIO, even as root (chmod 000 would not).
    (world.runtime.chats_dir / f"{session_id}.jsonl").symlink_to("/proc/self/mem")

    with pytest.raises(SessionUnreadable) as caught:
        world.runtime.load_session(session_id)

    assert str(caught.value).startswith(f'Session "{session_id}" cannot be resumed:')
    assert "Input/output error" in str(caught.value)


async def test_values_hidden_from_commands_are_left_out_of_a_tenants_commands_too(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#24 follow-up: a daemon's token and database address given by flag (``--token "$X"``,
    ``--database "$DSN"``) were removed from commands' environments only under the names
    ``CAIRN_SERVER_TOKEN`` and ``CAIRN_DATABASE_URL``, not from the variables holding them."""
    dsn = "postgresql://cairn:pw-81f2@db.internal/sessions"
    monkeypatch.setenv("DEPLOY_TOKEN", "daemon-token-4e1d")
    monkeypatch.setenv("SESSIONS_DSN", dsn)
    monkeypatch.setenv("HARMLESS", "kept")
    world = make_world()

    world.runtime.hide_from_commands("daemon-token-4e1d", dsn, None)

    for runtime in (world.runtime, world.runtime.for_tenant("acme")):
        environment = runtime.command_environment()
        assert "DEPLOY_TOKEN" not in environment and "SESSIONS_DSN" not in environment
        assert environment["HARMLESS"] == "kept"
