"""Extract against the scripted model server: the agent, its guards, the cursor, the history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.agent.reminders import system_reminder
from cairn.content import Content, FunctionCall, FunctionResponse, Text
from cairn.llm.anthropic import AnthropicProvider
from cairn.memory.background.cursor import ExtractCursor, read_cursor, write_cursor
from cairn.memory.background.extract import (
    EXTRACT_HISTORY_ENTRIES,
    EXTRACT_WINDOW_STEP,
    MAX_TOOL_OUTPUT_CHARS,
    ExtractOutcome,
    ExtractRequest,
    extraction_history,
    has_new_user_messages,
    run_extract,
    strip_injected_context,
    turn_wrote_memory,
    window_start,
)
from cairn.memory.store.history import read_history
from cairn.testing import RecordedRequest, Reply, reply, tool_call
from cairn.testing.anthropic_wire import anthropic_blocks
from cairn.testing.cache import PromptCache
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL
from cairn.vocabulary.usage import Usage

from ..task_helpers import (
    Project,
    ProjectFactory,
    agent_script,
    conversation,
    memory_file,
    new_project,
    tool_messages,
    write_memory,
    writes,
    wrote_memory_turn,
)

__all__ = ["new_project"]  # the fixture, imported for pytest

pytestmark = pytest.mark.timeout(30)

PREFERENCE = "I always use pytest for tests, never unittest."
SESSION = "11111111-2222-3333-4444-555555555555"
OTHER_SESSION = "99999999-2222-3333-4444-555555555555"


def pytest_memory(project: Project) -> tuple[str, str]:
    return (str(project.memory / "feedback" / "pytest.md"), memory_file("Uses pytest", PREFERENCE))


async def extract(
    project: Project, history: list[Content], session: str = SESSION
) -> ExtractOutcome:
    request = ExtractRequest(project.workspace, session, history, project.runtime)
    return await run_extract(request, project.manager.space())


# --- the agent writes memory through tool calls ------------------------------------------


async def test_extraction_writes_a_memory_file_through_a_tool_call(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", writes(pytest_memory(project)), "Saved.")

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert outcome.status == "completed"
    saved = project.memory / "feedback" / "pytest.md"
    assert PREFERENCE in saved.read_text()
    assert outcome.touched_topics == ["feedback"]
    index = (project.memory / "MEMORY.md").read_text()
    assert "- [Uses pytest](feedback/pytest.md)" in index


async def test_the_extraction_request_uses_purpose_extract_and_the_memory_tools(
    new_project: ProjectFactory,
) -> None:
    project = new_project()

    await extract(project, conversation(PREFERENCE, "Noted."))

    [request] = project.requests("extract")
    assert request.session_id == SESSION
    assert set(request.tool_names) == {
        "read_file", "grep_search", "glob", "run_shell_command", "write_file", "edit",
    }  # fmt: skip
    assert f"project memory: {project.memory}/" in (request.system or "")
    assert f"user memory: {project.user_memory}/" in (request.system or "")


async def test_existing_memories_are_listed_with_a_280_character_preview(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_memory(project.memory, "project/deploy.md", "Deploys", "x" * 400)

    await extract(project, conversation(PREFERENCE, "Noted."))

    system = project.requests("extract")[0].system or ""
    assert "- [Deploys](project/deploy.md)" in system
    assert "current=" + "x" * 280 + "…" in system
    assert "x" * 281 not in system


async def test_an_extraction_records_its_files_in_the_audit_trail_and_meta(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", writes(pytest_memory(project)))

    await extract(project, conversation(PREFERENCE, "Noted."))

    entries, warnings = read_history([("project", project.memory)])
    assert not warnings
    [entry] = entries
    assert (entry.operation, entry.files, entry.session_id) == (
        "extract", ["feedback/pytest.md"], SESSION,
    )  # fmt: skip
    meta = json.loads((project.state / "meta.json").read_text())
    assert meta["lastExtractionSessionId"] == SESSION
    assert meta["lastExtractionTouchedTopics"] == ["feedback"]
    assert meta["lastExtractionStatus"] == "updated"
    assert meta["version"] == 1 and meta["updatedAt"] and meta["lastExtractionAt"]


# --- what the agent may not do ----------------------------------------------------------------


async def test_writes_outside_the_memory_roots_are_refused(new_project: ProjectFactory) -> None:
    project = new_project()
    outside = project.workspace / "notes.md"
    project.server.handler = agent_script(
        "extract", writes((str(outside), memory_file("Stray", "no")))
    )

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert not outside.exists()
    assert outcome.files == []
    [follow_up] = project.requests("extract")[1:]
    assert "outside the allowed directories" in tool_messages(follow_up)[0]


async def test_writes_into_pinned_are_refused_even_through_a_symlink(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    pinned = project.memory / "pinned"
    pinned.mkdir(parents=True)
    (project.memory / "alias").symlink_to(pinned)
    project.server.handler = agent_script(
        "extract",
        writes(
            (str(pinned / "rule.md"), memory_file("Rule", "changed")),
            (str(project.memory / "alias" / "rule2.md"), memory_file("Rule", "changed")),
        ),
    )

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert list(pinned.iterdir()) == []
    results = tool_messages(project.requests("extract")[1])
    assert all("protected" in result for result in results)


async def test_overwriting_a_memory_it_did_not_read_is_refused(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    existing = write_memory(project.memory, "feedback/tests.md", "Tests", "Use unittest.")
    project.server.handler = agent_script(
        "extract", writes((str(existing), memory_file("Tests", "Use pytest.")))
    )

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert "Use unittest." in existing.read_text()
    assert "has not been read by you" in tool_messages(project.requests("extract")[1])[0]


async def test_overwriting_a_memory_after_reading_it_is_allowed(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    existing = write_memory(project.memory, "feedback/tests.md", "Tests", "Use unittest.")
    replies = iter(
        [
            tool_call("read_file", {"file_path": str(existing)}),
            writes((str(existing), memory_file("Tests", "Use pytest."))),
            reply("Updated."),
        ]
    )
    project.server.handler = lambda request: next(replies) if request.purpose == "extract" else None

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert "Use pytest." in existing.read_text()


async def test_the_generated_index_and_non_markdown_files_are_refused(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script(
        "extract",
        writes(
            (str(project.memory / "MEMORY.md"), "- [x](y.md) — hacked\n"),
            (str(project.memory / "project" / "run.sh"), "rm -rf /\n"),
        ),
    )

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert not (project.memory / "project" / "run.sh").exists()
    index = project.memory / "MEMORY.md"
    assert not index.exists() or "hacked" not in index.read_text()
    results = tool_messages(project.requests("extract")[1])
    assert "generated" in results[0] and "only Markdown" in results[1]


async def test_a_shell_command_that_changes_files_is_refused(new_project: ProjectFactory) -> None:
    project = new_project()
    target = project.memory / "feedback" / "x.md"
    project.server.handler = agent_script(
        "extract", tool_call("run_shell_command", {"command": f"touch {target}"})
    )

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert not target.exists()
    assert "requires permission" in tool_messages(project.requests("extract")[1])[0]


# --- the history the agent sees ------------------------------------------------------------


RECALLED = "RECALLED-MEMORY-8812"
HOOKED = "HOOK-CONTEXT-4471"


def history_with_injected_context() -> list[Content]:
    recalled = system_reminder(f"## Relevant memory\n\n### Old fact\n{RECALLED}")
    hook = Text(f"<cairn:user-prompt-submit-context>{HOOKED}</cairn:user-prompt-submit-context>")
    refined = system_reminder(f"## Relevant memory\n\n{RECALLED}-refined")
    return [
        Content("user", [recalled, Text(PREFERENCE), hook]),
        Content("model", [FunctionCall("c1", "glob", {"pattern": "*"})]),
        Content("user", [FunctionResponse("c1", "glob", {"output": "a.py"}), refined]),
        Content("model", [Text("Noted.")]),
    ]


async def test_recalled_memory_and_hook_context_never_reach_the_extractor(
    new_project: ProjectFactory,
) -> None:
    """The reference replays recalled memory to its extractor, which then saves it again."""
    project = new_project()

    await extract(project, history_with_injected_context())

    [request] = project.requests("extract")
    conversation_messages = json.dumps([m for m in request.messages if m["role"] != "system"])
    assert RECALLED not in conversation_messages
    assert HOOKED not in conversation_messages
    assert "system-reminder" not in conversation_messages
    assert PREFERENCE in conversation_messages


def test_strip_injected_context_removes_reminders_and_hook_blocks() -> None:
    text = (
        "a<system-reminder>\nmemory\n</system-reminder>b"
        "<cairn:user-prompt-submit-context>ctx</cairn:user-prompt-submit-context>c"
    )
    assert strip_injected_context(text) == "abc"


def test_the_history_keeps_40_to_59_entries_and_ends_with_the_model() -> None:
    history = [*conversation(*[f"message {i}" for i in range(60)]), Content.user("trailing")]

    shown = extraction_history(history)

    assert len(shown) == EXTRACT_HISTORY_ENTRIES
    assert shown[-1].role == "model" and shown[-1].text == "message 59"
    assert shown[0].text == "message 20"  # entries 20-60 of 61, the trailing one dropped


def test_the_window_starts_at_a_multiple_of_20_leaving_40_to_59_entries() -> None:
    for length in range(200):
        start = window_start(length)

        assert start % EXTRACT_WINDOW_STEP == 0
        assert min(length, EXTRACT_HISTORY_ENTRIES) <= length - start < 60
        assert window_start(length + 1) in (start, start + EXTRACT_WINDOW_STEP)


def test_open_tool_calls_at_the_end_get_placeholder_results() -> None:
    history = [Content.user("hi"), Content("model", [FunctionCall("c1", "glob", {})])]

    shown = extraction_history(history)

    assert isinstance(shown[-2].parts[0], FunctionResponse)
    assert shown[-2].parts[0].id == "c1"
    assert shown[-1].role == "model" and shown[-1].text == "Acknowledged."


def test_a_long_tool_result_is_cut_with_a_note_saying_how_much() -> None:
    long = "x" * (MAX_TOOL_OUTPUT_CHARS + 25)
    history = [
        Content.user("read it"),
        Content("model", [FunctionCall("c1", "read_file", {})]),
        Content("user", [FunctionResponse("c1", "read_file", {"output": long})]),
        Content.model("Read."),
    ]

    shown = extraction_history(history)

    [result] = [p for c in shown for p in c.parts if isinstance(p, FunctionResponse)]
    assert result.response == {"output": "x" * MAX_TOOL_OUTPUT_CHARS + "\n[... 25 characters cut]"}


def test_orphaned_tool_results_at_the_start_are_dropped_and_the_last_prompt_leads() -> None:
    calls = []
    for i in range(30):
        calls.append(Content("model", [FunctionCall(f"c{i}", "glob", {})]))
        calls.append(Content("user", [FunctionResponse(f"c{i}", "glob", {"output": "x"})]))
    history = [Content.user("find every test"), *calls, Content.model("Found them.")]

    shown = extraction_history(history)

    assert shown[0].role == "user" and shown[0].text == "find every test"
    assert not any(isinstance(p, FunctionResponse) for p in shown[1].parts)


async def test_the_next_extraction_repeats_this_ones_prefix_and_the_cache_serves_it(
    new_project: ProjectFactory,
) -> None:
    """Past 40 entries the window no longer slides by each turn: on the Anthropic wire, the
    next extraction's request starts with this one's (all but its task), and the scripted
    server reports it read from its prompt cache."""
    project = new_project()
    await project.runtime.provider.aclose()
    provider = AnthropicProvider(
        base_url=project.server.base_url, api_key=TEST_API_KEY, model=TEST_MODEL
    )
    project.runtime.provider = provider
    reported: list[Usage] = []
    provider.on_usage(lambda request, usage: reported.append(usage))
    project.server.prompt_cache = PromptCache("marked")
    said = [f"Turn {i}: the report's section {i} keeps its layout. " * 8 for i in range(60)]

    await extract(project, conversation(*said[:50]))  # 50 entries, then a turn later 52
    await extract(project, conversation(*said[:52]))

    first, second = (anthropic_blocks(r.body) for r in project.requests("extract"))
    shared = first[:-1]  # all but the task
    assert [b.key for b in second[: len(shared)]] == [b.key for b in shared]
    assert reported[1].cached_tokens > 0.9 * reported[1].input_tokens, reported


# --- the cursor --------------------------------------------------------------------------------


def cursor_of(project: Project) -> ExtractCursor:
    return read_cursor(project.state, now=0)


async def test_the_cursor_moves_to_the_end_after_a_run_with_tool_activity(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", writes(pytest_memory(project)))
    history = conversation(PREFERENCE, "Noted.")

    outcome = await extract(project, history)

    assert outcome.cursor_advanced
    assert cursor_of(project) == ExtractCursor(SESSION, 2)


async def test_the_cursor_stays_when_the_agent_answers_without_tools(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_cursor(project.state, ExtractCursor(SESSION, 2), now=0)
    history = conversation("hello", "hi", PREFERENCE, "Noted.")

    outcome = await extract(project, history)

    assert outcome.status == "completed" and not outcome.cursor_advanced
    assert cursor_of(project) == ExtractCursor(SESSION, 2)


async def test_the_cursor_advances_after_a_read_only_tool_call(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.server.handler = agent_script("extract", tool_call("glob", {"pattern": "**/*.md"}))

    await extract(project, conversation(PREFERENCE, "Noted."))

    assert cursor_of(project) == ExtractCursor(SESSION, 2)


async def test_no_new_user_message_moves_the_cursor_to_the_end_without_a_run(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_cursor(project.state, ExtractCursor(SESSION, 2), now=0)
    history = [*conversation(PREFERENCE, "Noted."), Content("user", [system_reminder("x")]),
               Content.model("Still here.")]  # fmt: skip

    outcome = await extract(project, history)

    assert (outcome.status, outcome.skipped_reason) == ("skipped", "no_new_messages")
    assert project.requests("extract") == []
    assert cursor_of(project) == ExtractCursor(SESSION, 4)


async def test_the_same_session_reuses_its_cursor(new_project: ProjectFactory) -> None:
    project = new_project()
    write_cursor(project.state, ExtractCursor(SESSION, 2), now=0)

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert outcome.skipped_reason == "no_new_messages"


async def test_a_new_session_starts_the_cursor_over(new_project: ProjectFactory) -> None:
    project = new_project()
    write_cursor(project.state, ExtractCursor(OTHER_SESSION, 2), now=0)

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert outcome.status == "completed"
    assert len(project.requests("extract")) == 1


async def test_a_shorter_history_starts_the_cursor_over(new_project: ProjectFactory) -> None:
    project = new_project()
    write_cursor(project.state, ExtractCursor(SESSION, 10), now=0)

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert outcome.status == "completed"


async def test_a_corrupt_cursor_is_set_aside_and_extraction_runs(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    project.state.mkdir(parents=True, exist_ok=True)
    (project.state / "extract-cursor.json").write_text("{not json")

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert outcome.status == "completed"
    [aside] = project.state.glob("extract-cursor.json.corrupt-*")
    assert aside.read_text() == "{not json"


async def test_memory_pressure_skips_without_moving_the_cursor(
    new_project: ProjectFactory,
) -> None:
    project = new_project(memory={"minAvailableMemoryMb": 10**9})

    outcome = await extract(project, conversation(PREFERENCE, "Noted."))

    assert (outcome.status, outcome.skipped_reason) == ("skipped", "memory_pressure")
    assert project.requests("extract") == []
    assert not (project.state / "extract-cursor.json").exists()


def test_new_user_messages_ignore_tool_results_and_reminder_only_entries() -> None:
    history = [
        Content("user", [FunctionResponse("c", "glob", {"output": "x"})]),
        Content("user", [system_reminder("recalled")]),
        Content("user", [Text("   ")]),
    ]
    assert not has_new_user_messages(history, 0)
    assert has_new_user_messages([*history, Content.user("real")], 0)


# --- the memory_tool check ----------------------------------------------------------------------


def test_a_successful_write_into_a_memory_root_counts(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    target = root / "feedback" / "tabs.md"

    assert turn_wrote_memory(wrote_memory_turn(target), [root], base=tmp_path) == [target]


def test_a_failed_write_or_one_outside_memory_does_not_count(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    failed = wrote_memory_turn(root / "feedback" / "tabs.md", error=True)
    elsewhere = wrote_memory_turn(tmp_path / "src" / "app.md")

    assert turn_wrote_memory(failed, [root], base=tmp_path) == []
    assert turn_wrote_memory(elsewhere, [root], base=tmp_path) == []


def test_only_the_latest_turn_counts(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    history = [*wrote_memory_turn(root / "feedback" / "tabs.md"), *conversation("next", "ok")]

    assert turn_wrote_memory(history, [root], base=tmp_path) == []


def test_a_relative_path_is_taken_from_the_project(tmp_path: Path) -> None:
    root = tmp_path / ".cairn" / "memory"
    turn = wrote_memory_turn(Path(".cairn/memory/user/me.md"))

    assert turn_wrote_memory(turn, [root], base=tmp_path) == [root / "user" / "me.md"]


# --- provenance ------------------------------------------------------------------------------


async def test_an_extracted_memory_records_who_when_and_its_evidence(
    new_project: ProjectFactory,
) -> None:
    import hashlib

    from cairn.memory.trust.provenance import provenance_of_text

    project = new_project()
    (project.workspace / "Makefile").write_text("check:\n\tpytest\n")
    target = str(project.memory / "project" / "tests.md")
    text = memory_file("Tests run with make check", "Run `make check`.", type="project").replace(
        "type: project\n", "type: project\nevidence: [Makefile, nowhere.py]\n"
    )
    project.server.handler = agent_script("extract", writes((target, text)), "Saved.")

    await extract(project, conversation("Run the tests with make check.", "OK.", "Thanks", "Yes."))

    provenance = provenance_of_text(Path(target).read_text())
    assert provenance is not None
    assert (provenance.by, provenance.session, provenance.turn) == ("extract", SESSION, 2)
    [makefile] = provenance.evidence
    assert makefile.path == "Makefile" and makefile.kind == "sha256"  # not a git repository
    assert makefile.digest == hashlib.sha256(b"check:\n\tpytest\n").hexdigest()
    [_, follow_up] = project.requests("extract")
    [said] = tool_messages(follow_up)
    assert "nowhere.py was not recorded as evidence: no such file in the workspace" in said


async def test_task_status_is_not_saved_as_a_durable_memory(new_project: ProjectFactory) -> None:
    project = new_project()
    target = project.memory / "project" / "status.md"
    status = memory_file("Migration status", "The migration is done.", type="project")
    project.server.handler = agent_script("extract", writes((str(target), status)), "Saved.")

    await extract(project, conversation("Great, the migration is done.", "Good."))

    assert not target.exists()
    [_, follow_up] = project.requests("extract")
    assert "is task status" in tool_messages(follow_up)[0]


async def test_a_contradicted_fact_is_superseded_and_its_earlier_version_kept(
    new_project: ProjectFactory,
) -> None:
    from cairn.memory.trust.provenance import without_provenance
    from cairn.memory.trust.versions import read_versions

    project = new_project()
    target = project.memory / "project" / "tests.md"
    old = memory_file("Test command", "Run the tests with pytest.", type="project")
    new = memory_file("Test command", "Run the tests with make check.", type="project")
    project.server.handler = agent_script("extract", writes((str(target), old)), "Saved.")
    await extract(project, conversation("We run the tests with pytest.", "OK."))

    def supersede(request: RecordedRequest) -> Reply | None:
        if request.purpose != "extract":
            return None
        done = len(tool_messages(request))
        if done == 0:
            return tool_call("read_file", {"file_path": str(target)})
        return writes((str(target), new)) if done == 1 else reply("Updated.")

    project.server.handler = supersede
    said = ("We run the tests with pytest.", "OK.", "The test command is now make check.", "OK.")
    await extract(project, conversation(*said))

    versions = read_versions(project.memory, "project/tests.md")
    assert [(v.operation, v.session_id) for v in versions] == [("extract", SESSION)] * 2
    assert without_provenance(versions[0].content or "") == old
    assert without_provenance(versions[1].content or "") == new
    assert versions[1].why == "from the conversation: “The test command is now make check.”"
