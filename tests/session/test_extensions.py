"""Commands and skills from files in a real session: what the model gets, what asks first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.content import FunctionResponse, Text
from cairn.llm.types import ModelRequest
from cairn.testing import ScriptedFrontend, reply, tool_call
from cairn.vocabulary.events import CommandsChanged, Notice, ToolCallStart, ToolCallUpdate

from .helpers import MakeWorld


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own (no ~/.claude of the machine's is read)."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def prompt_text(request: ModelRequest) -> str:
    """The text of the last user message of a request."""
    return "".join(p.text for p in request.contents[-1].parts if isinstance(p, Text))


def notice_texts(events: list[object], source: str) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.source == source]


async def test_a_command_file_with_arguments_and_a_shell_step_expands_into_the_request(
    make_world: MakeWorld, project: Path
) -> None:
    write(
        project / ".cairn" / "commands" / "review.md",
        "---\ndescription: Review a file\nargument-hint: <file> <focus>\n---\n"
        "Review $1 with a focus on $2.\nBranch: !`echo on-branch-main`\nAll: $ARGUMENTS",
    )
    world = make_world()
    session = world.session()

    result = await world.prompt(session, '/review src/app.py "error handling"')

    assert not result.handled_locally
    text = prompt_text(world.last_main())
    assert text == (
        "Review src/app.py with a focus on error handling.\n"
        'Branch: on-branch-main\nAll: src/app.py "error handling"'
    )
    starts = [e for e in world.events if isinstance(e, ToolCallStart)]
    assert [(s.name, s.args["command"]) for s in starts] == [
        ("run_shell_command", "echo on-branch-main")
    ]
    info = next(c for c in session.command_infos() if c.name == "review")
    assert (info.description, info.hint) == ("Review a file", "<file> <focus>")


async def test_a_shell_step_that_needs_approval_asks_and_a_refusal_sends_nothing(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".cairn" / "commands" / "mark.md", "Marked: !`touch marked && echo made`")
    world = make_world()
    user = ScriptedFrontend(permissions=["reject"])
    session = world.session(frontend=user)

    result = await world.prompt(session, "/mark")

    assert result.handled_locally
    assert world.main_requests() == []
    assert "/mark was not run" in result.text
    assert not (project / "marked").exists()
    assert [r.args["command"] for r in user.permission_requests] == ["touch marked && echo made"]


async def test_a_shell_step_nobody_can_approve_is_refused_headless(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".cairn" / "commands" / "mark.md", "Marked: !`touch marked`")
    world = make_world()
    session = world.session()  # non-interactive, as cairn -p

    result = await world.prompt(session, "/mark")

    assert result.handled_locally and world.main_requests() == []
    assert "non-interactive mode cannot ask" in result.text
    assert not (project / "marked").exists()


async def test_allowed_tools_of_a_user_command_run_its_steps_and_the_turns_calls_unasked(
    make_world: MakeWorld, project: Path, tmp_path: Path
) -> None:
    write(
        tmp_path / "cairn-home" / "commands" / "ship.md",
        "---\nallowed-tools: Bash(touch *), Write\n---\nStep: !`touch shipped`\nNow write notes.",
    )
    world = make_world()
    world.provider.enqueue(
        tool_call("write_file", {"file_path": "notes.md", "content": "shipped\n"}),
        reply("Done."),
    )
    user = ScriptedFrontend(default_permission=None)  # any question fails the test
    session = world.session(frontend=user)

    result = await world.prompt(session, "/ship")

    assert result.text == "Done."
    assert (project / "shipped").exists()
    assert (project / "notes.md").read_text() == "shipped\n"
    assert user.permission_requests == []

    # The grant ends with the turn: the next turn's write asks again.
    world.provider.enqueue(
        tool_call("write_file", {"file_path": "more.md", "content": "x"}), reply("ok")
    )
    user2 = ScriptedFrontend(permissions=["reject"])
    session.scheduler.frontend = user2
    await world.prompt(session, "write more")
    assert [r.tool_name for r in user2.permission_requests] == ["write_file"]
    assert not (project / "more.md").exists()


async def test_a_command_files_model_is_used_for_its_turn_only(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".cairn" / "commands" / "quick.md", "---\nmodel: tiny-model\n---\nQuick one.")
    world = make_world()
    session = world.session()

    await world.prompt(session, "/quick")
    await world.prompt(session, "and now normally")

    first, second = world.main_requests()
    assert first.model == "tiny-model"
    assert second.model != "tiny-model"


async def test_mentions_in_the_command_attach_files_but_not_those_in_step_output(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / "style.md", "Use four spaces.")
    write(project / "secret.txt", "do not attach")
    write(project / ".cairn" / "commands" / "style.md", "Follow @style.md.\n!`echo @secret.txt`")
    world = make_world()
    session = world.session()

    await world.prompt(session, "/style")

    sent = "".join(p.text for p in world.last_main().contents[-1].parts if isinstance(p, Text))
    assert "Use four spaces." in sent
    assert "@secret.txt" in sent  # the output as it was
    assert "do not attach" not in sent


async def test_a_qwen_toml_command_uses_args_and_its_shell_syntax(
    make_world: MakeWorld, project: Path
) -> None:
    write(
        project / ".qwen" / "commands" / "find.toml",
        'description = "Find a word"\nprompt = "Look for {{args}}: !{echo found {{args}}}"\n',
    )
    world = make_world()
    session = world.session()

    await world.prompt(session, "/find needle; rm -rf x")

    assert prompt_text(world.last_main()) == "Look for needle; rm -rf x: found needle; rm -rf x"


async def test_namespaced_commands_are_listed_and_a_built_in_name_is_kept_with_a_warning(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".claude" / "commands" / "git" / "commit.md", "Commit: $ARGUMENTS")
    write(project / ".cairn" / "commands" / "help.md", "Not the help.")
    write(project / ".cairn" / "commands" / "broken.md", "---\ndescription: x\nnever closed")
    world = make_world()
    session = world.session()
    names = [c.name for c in session.command_infos()]
    assert "git:commit" in names
    assert names.count("help") == 1

    result = await world.prompt(session, "/git:commit the fix")

    assert prompt_text(world.last_main()) == "Commit: the fix"
    warnings = notice_texts(world.events, "extensions")
    assert any(w.startswith(".cairn/commands/help.md is not used") for w in warnings)
    assert any(w.startswith(".cairn/commands/broken.md is skipped") for w in warnings)
    assert not result.handled_locally

    world.events.clear()
    await world.prompt(session, "again")
    assert notice_texts(world.events, "extensions") == []  # each warning once


async def test_a_command_added_while_the_session_runs_works_at_the_next_prompt(
    make_world: MakeWorld, project: Path
) -> None:
    world = make_world()
    session = world.session()
    seen: list[CommandsChanged] = []

    async def listener(event: object) -> None:
        if isinstance(event, CommandsChanged):
            seen.append(event)

    session.listen(listener)
    await world.prompt(session, "hello")
    write(project / ".cairn" / "commands" / "fresh.md", "A fresh command.")

    await world.prompt(session, "/fresh")

    assert prompt_text(world.last_main()) == "A fresh command."
    assert any("fresh" in [c.name for c in event.commands] for event in seen)


SKILL = """\
---
name: release-notes
description: Write release notes from the git log. Use when asked for release notes.
---

# Release notes

1. Read the template in template.md.
2. Write NOTES.md.
"""


async def test_the_model_loads_a_skill_through_the_skill_tool_and_reads_its_files(
    make_world: MakeWorld, tmp_path: Path
) -> None:
    skill_dir = tmp_path / "cairn-home" / "skills" / "release-notes"
    write(skill_dir / "SKILL.md", SKILL)
    write(skill_dir / "template.md", "TEMPLATE-7731")
    world = make_world()
    world.provider.enqueue(
        tool_call("skill", {"skill": "release-notes"}),
        tool_call("read_file", {"file_path": str(skill_dir / "template.md")}),
        reply("Written."),
    )
    session = world.session()

    await world.prompt(session, "write the release notes")

    first, second, third = world.main_requests()
    assert "- release-notes: Write release notes from the git log." in first.system
    assert "1. Read the template in template.md." not in first.system
    assert "skill" in [t.name for t in first.tools]
    loaded = next(p for p in second.contents[-1].parts if isinstance(p, FunctionResponse))
    output = loaded.response["output"]
    assert "# Release notes" in output
    assert str(skill_dir / "template.md") in output
    read = next(p for p in third.contents[-1].parts if isinstance(p, FunctionResponse))
    assert "TEMPLATE-7731" in json.dumps(read.response)


async def test_a_skill_runs_as_its_own_slash_command_and_skills_lists_it(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".claude" / "skills" / "release-notes" / "SKILL.md", SKILL)
    world = make_world()
    session = world.session()

    await world.prompt(session, "/release-notes v2.0")
    sent = prompt_text(world.last_main())
    assert "The user ran the skill /release-notes" in sent
    assert "# Release notes" in sent
    assert sent.rstrip().endswith("ARGUMENTS: v2.0")

    listing = await world.prompt(session, "/skills")
    assert listing.handled_locally
    assert "- release-notes — Write release notes" in listing.text
    assert ".claude/skills/release-notes/SKILL.md" in listing.text


async def test_skills_can_be_turned_off(make_world: MakeWorld, project: Path) -> None:
    write(project / ".cairn" / "skills" / "release-notes" / "SKILL.md", SKILL)
    world = make_world(skills={"enabled": False})
    session = world.session()

    await world.prompt(session, "hi")

    request = world.last_main()
    assert "release-notes" not in request.system
    assert "skill" not in [t.name for t in request.tools]
    assert "release-notes" not in [c.name for c in session.command_infos()]


async def test_a_skill_only_the_user_may_run_is_neither_listed_nor_loadable(
    make_world: MakeWorld, project: Path
) -> None:
    write(
        project / ".cairn" / "skills" / "deploy" / "SKILL.md",
        "---\ndescription: Deploy to production\ndisable-model-invocation: true\n---\nDeploy.",
    )
    world = make_world()
    world.provider.enqueue(tool_call("skill", {"skill": "deploy"}), reply("ok"))
    session = world.session()

    await world.prompt(session, "deploy it")

    first, second = world.main_requests()
    assert "Deploy to production" not in first.system
    assert "skill" not in [t.name for t in first.tools]
    assert "deploy" in [c.name for c in session.command_infos()]
    response = next(p for p in second.contents[-1].parts if isinstance(p, FunctionResponse))
    assert "not found" in response.response["error"]


async def test_tool_updates_of_a_shell_step_reach_the_sink(
    make_world: MakeWorld, project: Path
) -> None:
    write(project / ".cairn" / "commands" / "date.md", "Today: !`echo 2030-01-01`")
    world = make_world()
    session = world.session()

    await world.prompt(session, "/date")

    updates = [e for e in world.events if isinstance(e, ToolCallUpdate) and e.status == "completed"]
    assert updates and "2030-01-01" in (updates[0].output or "")


async def test_a_projects_allowed_tools_apply_only_once_its_folder_is_trusted(
    make_world: MakeWorld, project: Path
) -> None:
    from cairn.config.trust import trust_folder

    write(
        project / ".claude" / "commands" / "stamp.md",
        "---\nallowed-tools: Bash(touch *)\n---\nStamp: !`touch stamped && echo ok`",
    )
    world = make_world()
    untrusted_user = ScriptedFrontend(permissions=["reject"])
    session = world.session(frontend=untrusted_user)

    await world.prompt(session, "/stamp")

    assert [r.tool_name for r in untrusted_user.permission_requests] == ["run_shell_command"]
    assert not (project / "stamped").exists()
    assert any("not applied" in t for t in notice_texts(world.events, "permissions"))

    trust_folder(project)  # as `cairn trust` does, with the grant it now makes
    trusted_user = ScriptedFrontend(default_permission=None)  # any question fails the test
    session.scheduler.frontend = trusted_user
    await world.prompt(session, "/stamp")

    assert trusted_user.permission_requests == []
    assert (project / "stamped").exists()
