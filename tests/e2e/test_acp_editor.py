"""End to end: what an editor shows of ``cairn --acp`` (#17), with the ACP SDK's own client.

The client here does what an editor does: it runs ``terminal/*`` commands as real processes,
answers permission requests, and keeps every update. The agent is the real ``cairn --acp``
process against the scripted model server: one process per command line and client
capabilities for the module, each test with its own project, sessions, client and script
(tests/e2e/acp_shared.py says why that is sound); a test that lists the sessions of the
process's own folder, or loads a recording into a fresh process, starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp.exceptions import RequestError
from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from cairn.testing import ScriptedServer, error_reply, reply, tool_call
from cairn.testing.fixtures import isolated_env

from ..polling import eventually_async
from .acp_shared import SharedAgent, module_server, scripted_server, shared_agent
from .conftest import ACP_SHUTDOWN, write_settings
from .test_acp_process import CAIRN, EditorClient, running_agent

__all__ = ["module_server", "scripted_server"]  # fixtures, imported for pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.asyncio(loop_scope="module"),  # the loop the shared agents' connections run on
    pytest.mark.xdist_group("acp_editor"),  # one worker: each shared agent starts once
]
MEMORY_OFF = {"memory": {"enableManagedAutoMemory": False}}  # as the project fixture writes


@pytest.fixture(scope="module")
def shared_home(
    module_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, str], Path]:
    """The shared agents' environment and working folder (a project no test uses)."""
    root = tmp_path_factory.mktemp("acp-editor")
    folder = root / "project"
    (folder / ".git").mkdir(parents=True)
    write_settings(folder, MEMORY_OFF)
    return isolated_env(module_server.base_url, root), folder


@contextlib.asynccontextmanager
async def _shared(
    server: ScriptedServer, home: tuple[dict[str, str], Path], *args: str, **capabilities: Any
) -> AsyncIterator[SharedAgent]:
    env, folder = home
    stderr = folder.parent / f"agent-stderr{''.join(args)}{sorted(capabilities)}.txt"
    async with shared_agent(
        [CAIRN],
        *args,
        server=server,
        env=env,
        cwd=folder,
        stderr=stderr,
        transport=ACP_SHUTDOWN,
        **capabilities,
    ) as agent:
        yield agent


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def terminal_agent(
    module_server: ScriptedServer, shared_home: tuple[dict[str, str], Path]
) -> AsyncIterator[SharedAgent]:
    """``cairn --acp --yolo`` for an editor with terminals."""
    async with _shared(module_server, shared_home, "--yolo", terminal=True) as agent:
        yield agent


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def yolo_agent(
    module_server: ScriptedServer, shared_home: tuple[dict[str, str], Path]
) -> AsyncIterator[SharedAgent]:
    """``cairn --acp --yolo`` for an editor without terminals."""
    async with _shared(module_server, shared_home, "--yolo") as agent:
        yield agent


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def default_agent(
    module_server: ScriptedServer, shared_home: tuple[dict[str, str], Path]
) -> AsyncIterator[SharedAgent]:
    """``cairn --acp`` (approval mode default) for an editor without terminals or files."""
    async with _shared(module_server, shared_home) as agent:
        yield agent


@dataclass
class Terminal:
    """A command the editor runs for the agent, as a real process group."""

    command: list[str]
    cwd: str | None
    env: dict[str, str]
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None
    killed: bool = False
    released: bool = False


@dataclass
class TerminalEditor(EditorClient):
    """An editor that also runs terminals."""

    terminals: dict[str, Terminal] = field(default_factory=dict)
    terminal_created: asyncio.Event = field(default_factory=asyncio.Event)

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **_kw: Any,
    ) -> CreateTerminalResponse:
        variables = {variable.name: variable.value for variable in env or []}
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env=variables,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal = Terminal([command, *(args or [])], cwd, variables, process)
        terminal.reader = asyncio.ensure_future(_read_into(process, terminal.output))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        self.terminal_created.set()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **_kw: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        code = terminal.process.returncode
        status = None if code is None else _exit_status(code)
        return TerminalOutputResponse(
            output=terminal.output.decode(errors="replace"), truncated=False, exit_status=status
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **_kw: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self.terminals[terminal_id]
        code = await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader
        status = _exit_status(code)
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **_kw: Any
    ) -> KillTerminalResponse:
        terminal = self.terminals[terminal_id]
        terminal.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal.process.pid, signal.SIGKILL)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **_kw: Any
    ) -> ReleaseTerminalResponse:
        terminal = self.terminals[terminal_id]
        terminal.released = True
        if terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, signal.SIGKILL)
        return ReleaseTerminalResponse()


def tool_updates(editor: EditorClient, call_id: str) -> list[dict[str, Any]]:
    """The ``tool_call_update`` payloads of one call, as sent (camelCase)."""
    return [
        u.model_dump(by_alias=True, exclude_none=True)
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.tool_call_id == call_id
    ]


async def _read_into(process: asyncio.subprocess.Process, output: bytearray) -> None:
    assert process.stdout is not None
    while chunk := await process.stdout.read(4096):
        output.extend(chunk)


def _exit_status(code: int) -> TerminalExitStatus:
    if code < 0:
        return TerminalExitStatus(exit_code=None, signal=signal.Signals(-code).name)
    return TerminalExitStatus(exit_code=code, signal=None)


# ----- commands in the editor's terminal -----


async def test_a_command_runs_in_the_editors_terminal_and_the_model_gets_its_output(
    scripted_server: ScriptedServer, terminal_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo TERM-OUT; echo TERM-ERR >&2"}, id="c1"),
        reply("Ran it."),
        purpose="main",
    )
    editor = TerminalEditor()
    async with terminal_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session(terminal=True)
        response = await agent.prompt(session_id, "run it")

    assert response.stop_reason == "end_turn"
    [terminal] = editor.terminals.values()
    assert terminal.command == ["bash", "-c", "echo TERM-OUT; echo TERM-ERR >&2"]
    assert terminal.cwd == str(project.resolve())
    assert terminal.env["CAIRN"] == "1"
    assert "OPENAI_API_KEY" not in terminal.env  # cairn's secrets stay out, as locally
    assert terminal.released
    shown = {"type": "terminal", "terminalId": "term-1"}
    running, done = tool_updates(editor, "c1")[-2:]
    assert (running["status"], running["content"]) == ("in_progress", [shown])
    assert done["status"] == "completed"
    assert done["content"] == [shown]
    assert done["rawOutput"] == {"output": "TERM-OUT\nTERM-ERR\n\nExit code: 0"}
    second = scripted_server.requests_for("main")[1]
    assert second.contains("TERM-OUT") and second.contains("Exit code: 0")


async def test_cancelling_the_turn_kills_the_command_in_the_editors_terminal(
    scripted_server: ScriptedServer, terminal_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo started; sleep 60"}, id="c1"),
        purpose="main",
    )
    editor = TerminalEditor()
    async with terminal_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session(terminal=True)
        running = asyncio.ensure_future(agent.prompt(session_id, "run it"))
        await asyncio.wait_for(editor.terminal_created.wait(), 30)
        [terminal] = editor.terminals.values()
        assert await eventually_async(lambda: b"started" in terminal.output)
        await agent.conn.cancel(session_id=session_id)
        response = await asyncio.wait_for(running, 30)
        assert await eventually_async(lambda: terminal.released)

    assert response.stop_reason == "cancelled"
    # killed (SIGKILL sent): its status arrives once the event loop has reaped it
    assert await asyncio.wait_for(terminal.process.wait(), 30) == -signal.SIGKILL
    last = tool_updates(editor, "c1")[-1]
    assert last["status"] == "failed"
    assert last["content"][0] == {"type": "terminal", "terminalId": "term-1"}
    assert last["_meta"] == {"cairn": {"outcome": "cancelled"}}


async def test_a_command_past_its_time_limit_is_killed_in_the_terminal_and_the_model_told(
    scripted_server: ScriptedServer, terminal_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo slow; sleep 60", "timeout": 1}, id="c1"),
        reply("It timed out."),
        purpose="main",
    )
    editor = TerminalEditor()
    async with terminal_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session(terminal=True)
        await agent.prompt(session_id, "run it")

    [terminal] = editor.terminals.values()
    assert terminal.killed and terminal.released
    second = scripted_server.requests_for("main")[1]
    assert second.contains("Command timed out after 1 s")
    assert second.contains("slow")


@dataclass
class RefusingTerminalEditor(TerminalEditor):
    """An editor that declares terminals but refuses to open one, or to release one."""

    refuse_create: bool = False
    refuse_release: bool = False

    async def create_terminal(
        self, session_id: str, command: str, **kwargs: Any
    ) -> CreateTerminalResponse:
        if self.refuse_create:
            raise RequestError.invalid_params({"details": "terminals are off in this workspace"})
        return await super().create_terminal(session_id, command, **kwargs)

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        response = await super().release_terminal(session_id, terminal_id, **kwargs)
        if self.refuse_release:
            raise RequestError.internal_error({"details": "the terminal pane is gone"})
        return response


async def run_in_terminal(
    editor: TerminalEditor,
    command: str,
    *,
    server: ScriptedServer,
    agent: SharedAgent,
    project: Path,
) -> str:
    """One ``--yolo`` turn that runs ``command`` as call ``c1``; the prompt's stop reason."""
    server.enqueue(
        tool_call("run_shell_command", {"command": command}, id="c1"),
        reply("Done."),
        purpose="main",
    )
    async with agent.attach(project, client=editor) as sessions:
        session_id = await sessions.start_session(terminal=True)
        response = await sessions.prompt(session_id, "run it")
    return response.stop_reason


async def test_a_terminal_the_editor_refuses_to_open_is_the_models_error_with_its_details(
    scripted_server: ScriptedServer, terminal_agent: SharedAgent, project: Path
) -> None:
    editor = RefusingTerminalEditor(refuse_create=True)
    stop = await run_in_terminal(
        editor, "echo never", server=scripted_server, agent=terminal_agent, project=project
    )

    assert stop == "end_turn"
    assert editor.terminals == {}
    second = scripted_server.requests_for("main")[1]
    assert second.contains("The editor could not run the command: Invalid params")
    assert second.contains("terminals are off in this workspace")
    assert tool_updates(editor, "c1")[-1]["status"] == "failed"


async def test_a_refused_terminal_release_still_gives_the_model_the_commands_output(
    scripted_server: ScriptedServer, terminal_agent: SharedAgent, project: Path
) -> None:
    editor = RefusingTerminalEditor(refuse_release=True)
    stop = await run_in_terminal(
        editor,
        "echo RELEASED-OUT",
        server=scripted_server,
        agent=terminal_agent,
        project=project,
    )

    assert stop == "end_turn"
    [terminal] = editor.terminals.values()
    assert terminal.released
    assert tool_updates(editor, "c1")[-1]["status"] == "completed"
    second = scripted_server.requests_for("main")[1]
    assert second.contains("RELEASED-OUT") and second.contains("Exit code: 0")


async def test_without_the_terminal_capability_a_command_runs_locally_and_shows_its_output(
    scripted_server: ScriptedServer, yolo_agent: SharedAgent, project: Path
) -> None:
    """#17: without a client terminal, the final update carried only "exit 0"."""
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo PLAIN-OUT"}, id="c1"),
        reply("Ran it."),
        purpose="main",
    )
    editor = TerminalEditor()
    async with yolo_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "run it")

    assert editor.terminals == {}
    done = tool_updates(editor, "c1")[-1]
    text = "PLAIN-OUT\n\nExit code: 0"
    assert done["content"] == [{"type": "content", "content": {"type": "text", "text": text}}]
    assert done["rawOutput"] == {"output": text}


# ----- errors and retries -----


def retry_notices(editor: EditorClient) -> list[dict[str, Any]]:
    messages = [
        u.model_dump(by_alias=True, exclude_none=True)
        for u in editor.updates
        if u.session_update == "agent_message_chunk"
    ]
    return [m for m in messages if m.get("_meta", {}).get("cairn", {}).get("source") == "retry"]


async def test_a_failing_model_shows_each_retry_then_an_error_with_its_details(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    """#17: retries were silent, and the error's data was null."""
    write_settings(project, {**MEMORY_OFF, "model": {"generationConfig": {"maxRetries": 3}}})
    failure = error_reply(500, "upstream overloaded", retry_after=0.05)
    scripted_server.enqueue(failure, failure, failure, purpose="main")
    editor = EditorClient()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        with pytest.raises(RequestError) as caught:
            await agent.prompt(session_id, "hi")

    notices = retry_notices(editor)
    assert [n["_meta"]["cairn"]["attempt"] for n in notices] == [2, 3]
    assert all(n["_meta"]["cairn"]["maxAttempts"] == 3 for n in notices)
    assert notices[0]["content"]["text"].startswith("⚠ The model request failed; retrying in")
    assert "upstream overloaded" in notices[0]["content"]["text"]
    assert caught.value.code == -32603
    assert caught.value.data["status"] == 500
    assert "upstream overloaded" in caught.value.data["details"]
    assert caught.value.data["errorKind"] == "api_error"


async def test_a_rate_limit_keeps_code_429_and_carries_the_providers_message(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    """#17: a rate-limited turn answered 429 with data null."""
    write_settings(project, {**MEMORY_OFF, "model": {"generationConfig": {"maxRetries": 1}}})
    scripted_server.enqueue(error_reply(429, "tokens per minute exceeded"), purpose="main")
    async with default_agent.attach(project, client=EditorClient()) as agent:
        session_id = await agent.start_session()
        with pytest.raises(RequestError) as caught:
            await agent.prompt(session_id, "hi")

    assert caught.value.code == 429
    assert caught.value.data["status"] == 429
    assert caught.value.data["errorKind"] == "rate_limit"
    assert "tokens per minute exceeded" in caught.value.data["details"]


# ----- requests the agent opens -----


@dataclass
class SilentEditor(EditorClient):
    """An editor whose user never answers a permission request."""

    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_kw: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def cancelled_request_ids(self) -> list[Any]:
        return [
            m["params"]["requestId"] for m in self.wire if m.get("method") == "$/cancel_request"
        ]

    def permission_request_ids(self) -> list[Any]:
        return [m["id"] for m in self.wire if m.get("method") == "session/request_permission"]


async def test_a_permission_request_is_withdrawn_when_a_new_prompt_supersedes_its_turn(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    """#17: the editor kept a dead approval dialog after the turn was superseded."""
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "a.txt", "content": "x"}, id="c1"),
        reply("Second answer."),
        purpose="main",
    )
    editor = SilentEditor()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        first = asyncio.ensure_future(agent.prompt(session_id, "write a.txt"))
        await asyncio.wait_for(editor.asked.wait(), 30)
        second = await agent.prompt(session_id, "never mind")
        first_response = await asyncio.wait_for(first, 30)

    assert first_response.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    assert editor.cancelled_request_ids() == editor.permission_request_ids() != []
    last = tool_updates(editor, "c1")[-1]
    assert last["status"] == "failed"
    assert last["_meta"] == {"cairn": {"outcome": "cancelled"}}
    assert not (project / "a.txt").exists()


async def test_a_permission_request_is_withdrawn_when_its_turn_is_cancelled(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch b.txt"}, id="c1"), purpose="main"
    )
    editor = SilentEditor()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        running = asyncio.ensure_future(agent.prompt(session_id, "touch b.txt"))
        await asyncio.wait_for(editor.asked.wait(), 30)
        await agent.conn.cancel(session_id=session_id)
        response = await asyncio.wait_for(running, 30)
        assert await eventually_async(lambda: editor.cancelled_request_ids() != [])

    assert response.stop_reason == "cancelled"
    assert editor.cancelled_request_ids() == editor.permission_request_ids()
    assert tool_updates(editor, "c1")[-1]["_meta"] == {"cairn": {"outcome": "cancelled"}}


async def test_a_read_the_editor_refuses_is_a_refusal_not_a_read_from_disk(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """#17: a refused fs/read_text_file was read from disk behind the editor's back."""
    secret = project / "secret.txt"
    secret.write_text("DISK-CONTENT\n")
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": "secret.txt"}, id="c1"),
        reply("Could not read it."),
        purpose="main",
    )
    editor = EditorClient(refused={str(secret): "this file is excluded by the editor"})
    async with running_agent(cairn_env, project, client=editor) as agent:
        session_id = await agent.start_session(fs={"readTextFile": True})
        await agent.prompt(session_id, "read secret.txt")

    assert editor.reads == [str(secret)]
    second = scripted_server.requests_for("main")[1]
    assert not second.contains("DISK-CONTENT")
    assert second.contains("the editor refused to read it")
    assert second.contains("this file is excluded by the editor")
    assert tool_updates(editor, "c1")[-1]["status"] == "failed"


# ----- sessions -----


async def test_resume_reattaches_a_recorded_session_without_replaying_it(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(reply("FIRST-ANSWER"), reply("Second."), purpose="main")
    async with default_agent.attach(project, client=EditorClient()) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "FIRST-QUESTION")

    editor = EditorClient()  # a process of its own, with the recording the first one made
    async with running_agent(default_agent.env, project, client=editor) as agent:
        init = await agent.conn.initialize(protocol_version=1)
        resumed = await agent.conn.resume_session(
            session_id=session_id, cwd=str(project), mcp_servers=[]
        )
        replayed = [u.session_update for u in editor.updates]
        response = await agent.prompt(session_id, "and then?")

    capabilities = init.agent_capabilities.session_capabilities
    assert capabilities.resume is not None and capabilities.close is not None
    assert resumed.modes is not None and resumed.modes.current_mode_id == "default"
    assert "user_message_chunk" not in replayed and "agent_message_chunk" not in replayed
    assert response.stop_reason == "end_turn"
    second = scripted_server.requests_for("main")[1]
    assert second.contains("FIRST-QUESTION") and second.contains("FIRST-ANSWER")


async def test_close_cancels_the_running_turn_and_frees_the_session(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    scripted_server.enqueue(reply("too late", delay=30), purpose="main")
    async with default_agent.attach(project, client=EditorClient()) as agent:
        session_id = await agent.start_session()
        running = asyncio.ensure_future(agent.prompt(session_id, "take your time"))
        assert await eventually_async(lambda: len(scripted_server.requests_for("main")) == 1)
        await agent.conn.close_session(session_id=session_id)
        response = await asyncio.wait_for(running, 30)
        with pytest.raises(RequestError) as caught:
            await agent.prompt(session_id, "still there?")
        listed = await agent.conn.list_sessions(cwd=str(project))

    assert response.stop_reason == "cancelled"
    assert caught.value.code == -32602  # closed: not open any more
    assert session_id in [s.session_id for s in listed.sessions]  # still recorded


def titles(editor: EditorClient) -> list[str]:
    return [u.title for u in editor.updates if u.session_update == "session_info_update"]


async def test_a_session_is_titled_by_its_first_line_then_by_the_model(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    write_settings(project, {**MEMORY_OFF, "fastModel": "small-model"})
    scripted_server.enqueue(reply("Fixed the redirect."), purpose="main")
    scripted_server.enqueue(reply('"Login redirect fix."'), purpose="title")
    editor = EditorClient()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "the login page loops\nafter I sign in it redirects")
        first = titles(editor)[:1]
        assert await eventually_async(lambda: len(titles(editor)) == 2)
        listed = await agent.conn.list_sessions(cwd=str(project))

    assert first == ["the login page loops"]
    assert titles(editor) == ["the login page loops", "Login redirect fix"]
    [asked] = scripted_server.requests_for("title")
    assert asked.model == "small-model"
    assert asked.contains("the login page loops") and asked.contains("Fixed the redirect.")
    assert [s.title for s in listed.sessions if s.session_id == session_id] == [
        "Login redirect fix"
    ]


async def test_with_session_titles_off_the_first_line_stays_and_no_model_is_asked(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    write_settings(
        project,
        {**MEMORY_OFF, "fastModel": "small-model", "general": {"sessionTitles": False}},
    )
    scripted_server.enqueue(reply("Done."), reply("Done too."), purpose="main")
    editor = EditorClient()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "rename the module")
        second = await agent.prompt(session_id, "and the tests")

    assert second.stop_reason == "end_turn"
    assert titles(editor) == ["rename the module"]
    assert scripted_server.requests_for("title") == []


async def test_load_restores_the_mode_the_plan_and_what_a_cancelled_answer_showed(
    scripted_server: ScriptedServer, default_agent: SharedAgent, project: Path
) -> None:
    """#17: a loaded session lost its approval mode, its plan and cancelled partial answers."""
    todos = [
        {"id": "1", "content": "Write the parser", "status": "completed"},
        {"id": "2", "content": "Test the parser", "status": "completed"},
    ]  # all done: open items would make the session remind the model to go on
    scripted_server.enqueue(
        tool_call("todo_write", {"todos": todos}),
        reply("Planned."),
        reply(chunks=["PARTIAL-", "ANSWER", " never", " finished"], chunk_delay=2.0),
        purpose="main",
    )
    editor = EditorClient()
    async with default_agent.attach(project, client=editor) as agent:
        session_id = await agent.start_session()
        await agent.conn.set_session_mode(session_id=session_id, mode_id="auto-edit")
        await agent.prompt(session_id, "plan the parser")
        running = asyncio.ensure_future(agent.prompt(session_id, "now write it"))
        assert await eventually_async(lambda: "PARTIAL-" in _agent_text(editor))
        await agent.conn.cancel(session_id=session_id)
        assert (await asyncio.wait_for(running, 30)).stop_reason == "cancelled"

    scripted_server.enqueue(reply("Carrying on."), purpose="main")
    loader = EditorClient()  # a process of its own, with the recording the first one made
    async with running_agent(default_agent.env, project, client=loader) as agent:
        await agent.conn.initialize(protocol_version=1)
        loaded = await agent.conn.load_session(
            session_id=session_id, cwd=str(project), mcp_servers=[]
        )
        replayed = list(loader.updates)
        await agent.prompt(session_id, "go on")

    assert loaded.modes is not None and loaded.modes.current_mode_id == "auto-edit"
    [plan] = [u for u in replayed if u.session_update == "plan"]
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Write the parser", "completed"),
        ("Test the parser", "completed"),
    ]
    assert "PARTIAL-" in _agent_text(loader)
    last = scripted_server.requests_for("main")[-1]
    assert not last.contains("PARTIAL-")  # shown again, never given to the model


def _agent_text(editor: EditorClient) -> str:
    return "".join(
        u.content.text for u in editor.updates if u.session_update == "agent_message_chunk"
    )


async def test_list_reports_each_sessions_own_folder_and_filters_by_it(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """#17: every session was listed with the project root as its cwd, whatever cwd asked."""
    sub = project / "services" / "billing"
    sub.mkdir(parents=True)
    scripted_server.enqueue(reply("root answer"), reply("sub answer"), purpose="main")
    async with running_agent(cairn_env, project) as agent:
        at_root = await agent.start_session()
        await agent.prompt(at_root, "at the root")
        in_sub = (await agent.conn.new_session(cwd=str(sub), mcp_servers=[])).session_id
        await agent.prompt(in_sub, "in billing")
        everything = await agent.conn.list_sessions()
        billing = await agent.conn.list_sessions(cwd=str(sub))
        root_only = await agent.conn.list_sessions(cwd=str(project))

    assert {(s.session_id, s.cwd) for s in everything.sessions} == {
        (at_root, str(project.resolve())),
        (in_sub, str(sub.resolve())),
    }
    assert [s.session_id for s in billing.sessions] == [in_sub]
    assert [s.session_id for s in root_only.sessions] == [at_root]


async def test_additional_directories_are_roots_the_file_tools_may_use(
    scripted_server: ScriptedServer, yolo_agent: SharedAgent, project: Path
) -> None:
    """#17: additionalDirectories were ignored, so files there were outside the workspace."""
    shared = project.parent / "shared-lib"
    shared.mkdir()
    (shared / "notes.md").write_text("SHARED-NOTES\n")
    read = tool_call("read_file", {"file_path": str(shared / "notes.md")})
    scripted_server.enqueue(
        read,
        tool_call("write_file", {"file_path": str(shared / "out.md"), "content": "written"}),
        reply("Done."),
        read,
        reply("Refused."),
        purpose="main",
    )
    async with yolo_agent.attach(project, client=EditorClient()) as agent:
        init = yolo_agent.initialized
        with_roots = await agent.conn.new_session(
            cwd=str(project), additional_directories=[str(shared)], mcp_servers=[]
        )
        await agent.prompt(with_roots.session_id, "use the shared lib")
        without = await agent.conn.new_session(cwd=str(project), mcp_servers=[])
        await agent.prompt(without.session_id, "read it again")
        with pytest.raises(RequestError) as caught:
            await agent.conn.new_session(
                cwd=str(project), additional_directories=["relative/dir"], mcp_servers=[]
            )

    assert init.agent_capabilities.session_capabilities.additional_directories is not None
    first, after_read, _after_write, other_first, other_read = scripted_server.requests_for("main")
    assert first.contains(str(shared))  # the model is told about the extra folder
    assert not other_first.contains(str(shared))
    assert after_read.contains("SHARED-NOTES")
    assert (shared / "out.md").read_text() == "written"
    assert not other_read.contains("SHARED-NOTES")
    assert other_read.contains("outside the allowed directories")
    assert caught.value.code == -32602
