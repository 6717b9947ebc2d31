"""Checkpoints and rewind on a real session over a real git repository.

A scripted session edits, creates and deletes files across three turns; rewinding the code to
each turn restores the tree byte for byte, a rewind is undone, the user's repository state never
moves, and a conversation rewind truncates the model history (here and after a reload).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.content import Text
from cairn.memory.background.cursor import ExtractCursor, read_cursor, write_cursor
from cairn.memory.paths import memory_roots
from cairn.recording.checkpoints import ShadowRepository, checkpoints_dir, shadow_repository
from cairn.recording.reader import load_session
from cairn.session.rewind import RewindError
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import ScriptedProvider, reply, tool_call
from cairn.vocabulary import Notice, SessionEvent

from ..git_helpers import git_under_strace, make_repository, repository_state, tree_state
from ..polling import eventually_async

FILES = {
    "README.md": "# project\n",
    "src/app.py": "print('v1')\n",
    "notes/crlf.txt": "a\r\nb\r\n",
}


@dataclass
class Rig:
    repo: Path
    runtime: Runtime
    provider: ScriptedProvider
    session: Session
    events: list[SessionEvent] = field(default_factory=list)

    async def prompt(self, text: str) -> None:
        async def sink(event: SessionEvent) -> None:
            self.events.append(event)

        result = await self.session.prompt(PromptRequest(text), sink)
        assert result.stop_reason == "end_turn", result

    def notices(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, Notice)]


def _runtime(repo: Path, provider: ScriptedProvider, **settings: Any) -> Runtime:
    settings.setdefault("memory", {"enableManagedAutoMemory": False})
    return Runtime(cwd=repo, settings=Settings.model_validate(settings), provider=provider)


@pytest.fixture
async def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Rig]:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    repo = make_repository(tmp_path / "repo", FILES)
    provider = ScriptedProvider(reply("Done."))
    runtime = _runtime(repo, provider)
    session = runtime.new_session(approval_mode="yolo")
    yield Rig(repo, runtime, provider, session)
    await session.close()
    await runtime.aclose()


async def _three_turns(rig: Rig) -> list[dict[str, object]]:
    """Edit, create, delete: the tree before each turn and after the last."""
    states = [tree_state(rig.repo)]
    rig.provider.enqueue(
        tool_call(
            "edit",
            {"file_path": "README.md", "old_string": "# project", "new_string": "# edited"},
        ),
        reply("Edited."),
    )
    await rig.prompt("edit the readme")
    states.append(tree_state(rig.repo))
    rig.provider.enqueue(
        tool_call("write_file", {"file_path": "pkg/new.py", "content": "x = 1\n"}),
        reply("Created."),
    )
    await rig.prompt("create a module")
    states.append(tree_state(rig.repo))
    rig.provider.enqueue(
        tool_call("run_shell_command", {"command": "rm src/app.py notes/crlf.txt"}),
        reply("Deleted."),
    )
    await rig.prompt("delete the app")
    states.append(tree_state(rig.repo))
    return states


async def test_rewinding_the_code_to_each_turn_restores_the_tree_and_can_be_undone(
    rig: Rig,
) -> None:
    user_repo = repository_state(rig.repo)
    states = await _three_turns(rig)

    for turn in (3, 2, 1):
        outcome = await rig.session.rewind(turn, "code")
        assert tree_state(rig.repo) == states[turn - 1], f"turn {turn}"
        assert outcome.restore is not None and outcome.restore.changed
        undone = await rig.session.undo_rewind()
        assert tree_state(rig.repo) == states[3], f"undo of turn {turn}"
        assert "Undid the last rewind" in undone.message

    assert repository_state(rig.repo) == user_repo


async def test_each_turn_records_one_checkpoint_before_its_first_change(rig: Rig) -> None:
    await _three_turns(rig)
    rig.provider.enqueue(tool_call("read_file", {"file_path": "README.md"}), reply("Read."))
    await rig.prompt("just read")

    loaded = load_session(rig.session.recorder.path)  # type: ignore[union-attr]
    checkpoints = [r for r in loaded.records if r.get("subtype") == "checkpoint"]
    turns = [r for r in loaded.records if r.get("type") == "user" and "displayText" not in r]
    assert len(checkpoints) == 3  # the read-only fourth turn took none
    by_uuid = {r["uuid"]: r for r in loaded.records}
    for checkpoint in checkpoints:
        assert by_uuid[checkpoint["systemPayload"]["turn"]]["type"] == "user"
    assert len(turns) >= 4


async def test_a_read_only_shell_command_takes_no_checkpoint(rig: Rig) -> None:
    rig.provider.enqueue(tool_call("run_shell_command", {"command": "ls"}), reply("Listed."))
    await rig.prompt("list files")

    listing = await rig.session.rewind_listing()
    assert [p.code for p in listing.points] == [False]


async def test_the_listing_names_the_files_each_turn_changed(rig: Rig) -> None:
    await _three_turns(rig)

    listing = await rig.session.rewind_listing()

    assert [p.number for p in listing.points] == [3, 2, 1]
    files = {p.number: sorted((f.path, f.status) for f in p.files) for p in listing.points}
    assert files == {
        3: [("notes/crlf.txt", "deleted"), ("src/app.py", "deleted")],
        2: [("pkg/new.py", "added")],
        1: [("README.md", "modified")],
    }
    assert listing.points[0].text == "delete the app"
    assert listing.checkpoints_off is None


async def test_a_conversation_rewind_truncates_the_history_and_a_resume_continues_there(
    rig: Rig,
) -> None:
    await _three_turns(rig)

    outcome = await rig.session.rewind(2, "conversation")

    assert outcome.prompt == "create a module"
    assert (rig.repo / "pkg" / "new.py").exists()  # the code stays as it is
    history_text = json.dumps([c.to_dict() for c in rig.session.history])
    assert "edit the readme" in history_text
    assert "create a module" not in history_text and "delete the app" not in history_text

    rig.provider.enqueue(reply("Fresh start."))
    await rig.prompt("do something else")
    sent = json.dumps([c.to_dict() for c in rig.provider.requests_for("main")[-1].contents])
    assert "edit the readme" in sent and "create a module" not in sent

    resumed = rig.runtime.load_session(rig.session.id)
    try:
        texts = [p.text for c in resumed.history for p in c.parts if isinstance(p, Text) and p.text]
        assert "edit the readme" in texts and "do something else" in texts
        assert "create a module" not in texts and "delete the app" not in texts
    finally:
        await resumed.close()


async def test_rewinding_both_restores_code_and_conversation_and_undo_reverses_both(
    rig: Rig,
) -> None:
    states = await _three_turns(rig)
    before = [c.to_dict() for c in rig.session.history]

    await rig.session.rewind(1, "both")

    assert tree_state(rig.repo) == states[0]
    assert not any("edit the readme" in json.dumps(c.to_dict()) for c in rig.session.history)
    await rig.session.undo_rewind()
    assert tree_state(rig.repo) == states[3]
    assert [c.to_dict() for c in rig.session.history] == before


async def test_a_rewind_cannot_be_undone_after_a_new_prompt(rig: Rig) -> None:
    await _three_turns(rig)
    await rig.session.rewind(3, "code")
    await rig.prompt("carry on")

    with pytest.raises(RewindError, match="no rewind to undo"):
        await rig.session.undo_rewind()


async def test_bad_turn_numbers_are_clear_errors(rig: Rig) -> None:
    with pytest.raises(RewindError, match="no turns"):
        await rig.session.rewind(1)
    await rig.prompt("hello")
    with pytest.raises(RewindError, match="turns 1 to 1"):
        await rig.session.rewind(5)


async def test_the_rewind_command_lists_rewinds_and_undoes(rig: Rig) -> None:
    await _three_turns(rig)

    await rig.prompt("/rewind")
    listing = rig.notices()[-1]
    assert "3. delete the app" in listing and "src/app.py" in listing

    await rig.prompt("/rewind 2 code")
    assert not (rig.repo / "pkg" / "new.py").exists()
    assert "Rewound to turn 2" in rig.notices()[-1]

    await rig.prompt("/rewind undo")
    assert (rig.repo / "pkg" / "new.py").exists()

    await rig.prompt("/rewind sideways")
    assert rig.notices()[-1].startswith("Usage: /rewind")


async def test_a_conversation_rewind_moves_the_extract_cursor_back(rig: Rig) -> None:
    """The cursor must not stay past the rewind point, or the next turns would be skipped."""
    await _three_turns(rig)
    state_dir = memory_roots(rig.repo).state_dir
    write_cursor(state_dir, ExtractCursor(rig.session.id, len(rig.session.history)), now=0)

    await rig.session.rewind(2, "conversation")

    cursor = read_cursor(state_dir, now=0)
    assert cursor.session_id == rig.session.id
    assert cursor.processed_offset == len(rig.session.history)


async def test_without_git_the_session_says_why_and_rewind_restores_no_code(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    rig.provider.enqueue(
        tool_call("write_file", {"file_path": "a.txt", "content": "a\n"}), reply("Wrote.")
    )
    await rig.prompt("write a file")

    assert any("git is not installed" in n for n in rig.notices())
    listing = await rig.session.rewind_listing()
    assert listing.checkpoints_off is not None and "git is not installed" in listing.checkpoints_off
    with pytest.raises(RewindError, match="git is not installed"):
        await rig.session.rewind(1, "code")


async def test_turned_off_checkpoints_take_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    repo = make_repository(tmp_path / "repo", FILES)
    provider = ScriptedProvider(reply("Done."))
    runtime = _runtime(repo, provider, general={"checkpointing": {"enabled": False}})
    session = runtime.new_session(approval_mode="yolo")
    provider.enqueue(tool_call("write_file", {"file_path": "a.txt", "content": "a\n"}))
    try:
        await session.prompt(PromptRequest("write"), _ignore)
        listing = await session.rewind_listing()
    finally:
        await session.close()
        await runtime.aclose()

    assert list((tmp_path / "cairn-home").glob("projects/*/checkpoints/git")) == []
    assert listing.checkpoints_off is not None and "turned off" in listing.checkpoints_off


async def _ignore(event: SessionEvent) -> None:
    return None


async def test_the_first_turn_prepares_the_shadow_index_in_the_background(rig: Rig) -> None:
    """The first snapshot of a project hashes every file (seconds in a big one): the session's
    first turn builds the shadow index meanwhile, without taking a checkpoint, and the first
    change's checkpoint still holds the tree as it was."""
    before = tree_state(rig.repo)
    await rig.prompt("just answer")
    assert rig.session.checkpoints is not None
    await rig.session.checkpoints.prepared()

    shadow, reason = shadow_repository(rig.repo, rig.session.settings.general.checkpointing)
    assert shadow is not None, reason
    assert shadow.is_prepared()
    assert [p.code for p in (await rig.session.rewind_listing()).points] == [False]

    rig.provider.enqueue(
        tool_call("write_file", {"file_path": "README.md", "content": "new\n"}), reply("Done.")
    )
    await rig.prompt("rewrite the readme")
    await rig.session.rewind(2, "code")
    assert tree_state(rig.repo) == before


def _git_processes_in(folder: Path) -> list[int]:
    """The git processes running with ``folder`` as their working folder."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "comm").read_text().strip() == "git" and (
                Path(os.readlink(entry / "cwd")) == folder
            ):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow  # git indexes a 3,000-file repository: seconds of git processes
async def test_closing_the_session_stops_a_preparation_with_its_git_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    many = {f"pkg{i % 20}/file{i}.txt": f"{i}\n" * 200 for i in range(3000)}
    repo = make_repository(tmp_path / "big", many)
    runtime = _runtime(repo, ScriptedProvider(reply("Hi.")))
    session = runtime.new_session(approval_mode="yolo")
    checkpoints = session.checkpoints
    assert checkpoints is not None
    try:
        checkpoints.start_turn("turn-1")  # as the first prompt does
        checkpoints.answering()  # and its model's first words
        assert await eventually_async(lambda: bool(_git_processes_in(repo.resolve())))
    finally:
        await session.close()
        await runtime.aclose()

    assert _git_processes_in(repo.resolve()) == []
    after = ShadowRepository(repo, checkpoints_dir(repo)).snapshot("after")  # lock and index fine
    assert after.files == len(many)


async def test_a_turn_nobody_can_approve_a_change_in_prepares_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: every `cairn -p` turn (no one to ask, default mode) started the shadow-index
    process and killed it at exit, though a change there needs an approval nobody can give.
    A change an allow rule lets through still gets its checkpoint."""
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    repo = make_repository(tmp_path / "repo", FILES)
    before = tree_state(repo)
    provider = ScriptedProvider(reply("Just an answer."))
    runtime = _runtime(repo, provider, permissions={"allow": ["Write"]})
    session = runtime.new_session(approval_mode="default")  # NonInteractive: nobody to ask
    checkpoints = session.checkpoints
    assert checkpoints is not None
    shadow, reason = shadow_repository(repo, session.settings.general.checkpointing)
    assert shadow is not None, reason
    try:
        await session.prompt(PromptRequest("answer"), _ignore)
        await checkpoints.prepared()
        prepared_by_the_answer = shadow.is_prepared()
        provider.enqueue(
            tool_call("write_file", {"file_path": "README.md", "content": "new\n"}),
            reply("Done."),
        )
        await session.prompt(PromptRequest("rewrite the readme"), _ignore)
        await session.rewind(2, "code")
    finally:
        await session.close()
        await runtime.aclose()

    assert not prepared_by_the_answer
    assert tree_state(repo) == before


async def test_a_plan_mode_turn_prepares_nothing(rig: Rig) -> None:
    """Nothing can change in plan mode: no shadow index is built for it."""
    await rig.session.set_approval_mode("plan")
    await rig.prompt("just plan")
    assert rig.session.checkpoints is not None
    await rig.session.checkpoints.prepared()

    shadow, reason = shadow_repository(rig.repo, rig.session.settings.general.checkpointing)
    assert shadow is not None, reason
    assert not shadow.is_prepared()


async def test_a_recording_from_another_folder_never_restores_code_here(
    rig: Rig, tmp_path: Path
) -> None:
    """Regression (issue 24, data loss): with one folder shared by two projects, `cairn rewind`
    in one took the other's newest session and restored its checkpoint here. A store of an
    earlier cairn does not say which work tree a checkpoint is of; the recording does."""
    from cairn.session.rewind import recorded_rewinder

    await _three_turns(rig)
    await rig.session.close()
    recording = rig.runtime.chats_dir / f"{rig.session.id}.jsonl"
    lines = recording.read_text().splitlines()
    first = json.loads(lines[0])
    first["cwd"] = str(tmp_path / "a.b")  # the twin's folder
    recording.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    for meta in (checkpoints_dir(rig.repo) / "meta").glob("*.json"):  # an earlier store
        data = json.loads(meta.read_text())
        data.pop("workTree")
        meta.write_text(json.dumps(data))
    before = tree_state(rig.repo)
    rewinder = recorded_rewinder(rig.repo, rig.session.id, rig.runtime.settings)
    with pytest.raises(RewindError, match=r"ran in .*a\.b, not in .*repo"):
        rewinder.rewind(1, "code")
    assert tree_state(rig.repo) == before


async def test_a_turn_without_a_checkpoint_is_not_rewound_to_a_later_ones_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 24): a turn whose checkpoint could not be taken (over the file cap) was
    "rewound" to the next turn's checkpoint, which holds that turn's own changes."""
    from cairn.session.rewind import recorded_rewinder

    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    repo = make_repository(tmp_path / "repo", {**FILES, "extra1": "1", "extra2": "2"})
    provider = ScriptedProvider(reply("Done."))
    provider.enqueue(
        tool_call("run_shell_command", {"command": "rm extra1 extra2 && echo x > README.md"}),
        reply("Trimmed."),
        tool_call("write_file", {"file_path": "late.txt", "content": "late\n"}),
        reply("Written."),
    )
    runtime = _runtime(repo, provider, general={"checkpointing": {"maxFiles": 4}})
    session = runtime.new_session(approval_mode="yolo")
    try:
        await session.prompt(PromptRequest("trim the project"), _ignore)
        await session.prompt(PromptRequest("add a file"), _ignore)
    finally:
        await session.close()
        await runtime.aclose()
    after = tree_state(repo)
    rewinder = recorded_rewinder(repo, session.id, runtime.settings)

    with pytest.raises(RewindError, match=r"turn 1 took no checkpoint .*maxFiles"):
        rewinder.rewind(1, "code")
    assert tree_state(repo) == after
    points = rewinder.listing().points  # newest first
    assert [point.code for point in points] == [True, False]  # turn 1's code cannot come back


async def _ignore(event: SessionEvent) -> None:
    pass


async def test_a_rewind_cut_short_names_its_undo_and_the_undo_puts_the_files_back(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git checkout-index` killed while `/rewind 1` writes the files back (as its 60 s timeout
    kills it on a very large restore): some files are restored, one is cut off. The message
    says so, that the conversation did not change, and how to go back; `/rewind undo` (the
    picker's "Undo the last rewind") then puts back every file as it was before the rewind."""
    states = await _three_turns(rig)
    history = [c.to_dict() for c in rig.session.history]
    path = os.environ["PATH"]
    cut = rig.repo / "notes" / "crlf.txt"  # after README.md, before src/app.py
    git_under_strace(tmp_path / "bin", "checkout-index", "signal=KILL", syscall="write", path=cut)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{path}")

    await rig.prompt("/rewind 1")
    monkeypatch.setenv("PATH", path)

    message = rig.notices()[-1]
    assert (rig.repo / "README.md").read_text() == "# project\n"  # restored
    assert cut.read_bytes() == b"" and not (rig.repo / "src" / "app.py").exists()
    loaded = load_session(rig.runtime.chats_dir / f"{rig.session.id}.jsonl")
    rewinds = [r for r in loaded.records if r.get("subtype") == "rewind"]
    undo = rewinds[-1]["systemPayload"]["undo"]  # recorded before the first file was written
    assert "git checkout-index was killed" in message, message
    assert "the conversation was not changed" in message
    assert undo[:12] in message and "/rewind undo" in message
    assert [c.to_dict() for c in rig.session.history] == history

    await rig.prompt("/rewind")
    assert "The last rewind stopped part way; undoing it" in rig.notices()[-1]
    await rig.prompt("/rewind undo")
    assert "Undid the last rewind" in rig.notices()[-1]
    assert tree_state(rig.repo) == states[3]
    assert [c.to_dict() for c in rig.session.history] == history
