"""``_cairn/rewind`` on the in-process ACP agent over a real workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.exceptions import RequestError
from acp.schema import ClientCapabilities, TextContentBlock

from cairn.testing import ScriptedServer, reply, tool_call

from .acp_doubles import FS_CAPABILITIES, agent_options, connect


def text(value: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=value)]


async def test_listing_rewinding_and_undoing_through_the_extension(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "plan.md", "content": "the plan\n"}),
        reply("Wrote the plan."),
        purpose="main",
    )
    options = agent_options(scripted_server, project, approval_mode="yolo")
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        sid = session.session_id
        await conn.prompt(session_id=sid, prompt=text("write a plan"))

        listing = await conn.ext_method("cairn/rewind", {"sessionId": sid})
        rewound = await conn.ext_method(
            "cairn/rewind", {"sessionId": sid, "turn": 1, "mode": "code"}
        )
        gone = (project / "plan.md").exists()
        undone = await conn.ext_method("cairn/rewind", {"sessionId": sid, "undo": True})

    assert listing["turns"] == [
        {
            "turn": 1,
            "prompt": "write a plan",
            "timestamp": listing["turns"][0]["timestamp"],
            "codeRestorable": True,
            "files": [{"path": "plan.md", "status": "added"}],
        }
    ]
    assert rewound["code"]["removed"] == ["plan.md"] and not rewound["conversationRewound"]
    assert not gone
    assert "Undid the last rewind" in undone["message"]
    told = client.agent_text()  # the editor is told, as for any notice
    assert "Rewound to turn 1" in told and "Undid the last rewind" in told
    assert (project / "plan.md").read_text() == "the plan\n"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"turn": "1"}, -32602),
        ({"turn": 1, "undo": True}, -32602),
        ({"mode": "code"}, -32602),
        ({"turn": 4}, -32600),
        ({"undo": True}, -32600),
    ],
)
async def test_bad_rewind_requests_are_errors_that_say_why(
    scripted_server: ScriptedServer, project: Path, params: dict[str, object], code: int
) -> None:
    scripted_server.enqueue(reply("Hello."), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("hello"))
        with pytest.raises(RequestError) as caught:
            await conn.ext_method("cairn/rewind", {"sessionId": session.session_id, **params})

    assert caught.value.code == code


async def test_restored_files_reach_the_editors_buffers(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """Issue #30: `_cairn/rewind` restored files on disk only, so an editor keeping its own
    buffers showed the rewound text. A client offering fs/write_text_file gets each restored
    file through it (the answer names the removed ones)."""
    (project / "notes.txt").write_text("v1\n")
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "echo v2 > notes.txt; echo new > extra.txt"}),
        reply("Changed them."),
        purpose="main",
    )
    options = agent_options(scripted_server, project, approval_mode="yolo")
    async with connect(options) as (conn, client):
        caps = ClientCapabilities.model_validate(FS_CAPABILITIES)
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=str(project))
        sid = session.session_id
        await conn.prompt(session_id=sid, prompt=text("change the notes"))
        rewound = await conn.ext_method(
            "cairn/rewind", {"sessionId": sid, "turn": 1, "mode": "code"}
        )
        restored_writes = dict(client.writes)
        await conn.ext_method("cairn/rewind", {"sessionId": sid, "undo": True})

    assert (project / "notes.txt").read_text() == "v2\n"  # the undo
    assert rewound["code"] == {"restored": ["notes.txt"], "removed": ["extra.txt"], "kept": []}
    assert restored_writes == {str(project / "notes.txt"): "v1\n"}
    assert client.writes[str(project / "notes.txt")] == "v2\n"
    assert client.writes[str(project / "extra.txt")] == "new\n"
