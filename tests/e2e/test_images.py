"""An image reaches the model as an image part from every front end, as a real process each.

ACP image blocks (``cairn --acp``), daemon image parts (``cairn serve``) and ``@image`` mentions
in ``cairn -p`` all go through the one attachment builder; the scripted server sees the request.
"""

from __future__ import annotations

import base64
import io
import sys
from pathlib import Path

import pytest
from acp.schema import ClientCapabilities, ImageContentBlock, TextContentBlock
from acp.stdio import spawn_agent_process
from PIL import Image as PilImage

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import ScriptedServer, reply

from .conftest import ACP_SHUTDOWN, RunCairn, write_settings
from .test_acp_process import EditorClient
from .test_daemon import serve  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

CAIRN_BIN = str(Path(sys.executable).parent / "cairn")


def png(colour: tuple[int, int, int] = (10, 200, 30)) -> bytes:
    buffer = io.BytesIO()
    PilImage.new("RGB", (6, 4), colour).save(buffer, "PNG")
    return buffer.getvalue()


def data_uri(raw: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def test_an_at_image_mention_in_headless_reaches_the_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    raw = png()
    (project / "shot.png").write_bytes(raw)
    scripted_server.enqueue(reply("A green square."))

    done = run_cairn("-p", "what is in @shot.png?")

    assert done.returncode == 0, done.stderr
    [request] = scripted_server.requests
    assert request.images == [data_uri(raw)]
    assert "what is in @shot.png?" in request.last_user_text()


def test_a_text_only_model_gets_the_note_for_an_attached_image(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "shot.png").write_bytes(png())
    write_settings(
        project, {"memory": {"enableManagedAutoMemory": False}, "model": {"supportsImages": False}}
    )
    scripted_server.enqueue(reply("I cannot see it."))

    done = run_cairn("-p", "what is in @shot.png?")

    assert done.returncode == 0, done.stderr
    [request] = scripted_server.requests
    assert request.images == []
    assert "[image shot.png (image/png," in request.last_user_text()


async def test_an_acp_image_block_reaches_the_model_and_images_are_advertised(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    raw = png((200, 0, 0))
    scripted_server.enqueue(reply("Red."), purpose="main")
    client = EditorClient()
    async with spawn_agent_process(
        client, CAIRN_BIN, "--acp", env=cairn_env, cwd=project, transport_kwargs=ACP_SHUTDOWN
    ) as (conn, _process):
        hello = await conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities()
        )
        session = await conn.new_session(cwd=str(project))
        block = ImageContentBlock(
            type="image", mime_type="image/png", data=base64.b64encode(raw).decode()
        )
        response = await conn.prompt(
            session_id=session.session_id,
            prompt=[TextContentBlock(type="text", text="which colour?"), block],
        )

    assert hello.agent_capabilities is not None
    assert hello.agent_capabilities.prompt_capabilities is not None
    assert hello.agent_capabilities.prompt_capabilities.image is True
    assert response.stop_reason == "end_turn"
    [request] = scripted_server.requests_for("main")
    assert request.images == [data_uri(raw)]


async def test_a_daemon_image_part_reaches_the_model(
    serve: object, scripted_server: ScriptedServer  # noqa: F811 - the fixture
) -> None:
    raw = png((0, 0, 255))
    served = serve()  # type: ignore[operator]
    scripted_server.enqueue(reply("Blue."), purpose="main")
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        text = await session.prompt_and_wait(
            [
                {"type": "text", "text": "which colour?"},
                {"type": "image", "mimeType": "image/png", "data": base64.b64encode(raw).decode()},
            ]
        )

    assert text == "Blue."
    [request] = scripted_server.requests_for("main")
    assert request.images == [data_uri(raw)]
