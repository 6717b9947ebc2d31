"""An image mentioned in the terminal UI (``@shot.png``) reaches the model as an image part."""

from __future__ import annotations

import base64
import io

from PIL import Image as PilImage
from textual import events

from cairn.testing import reply

from .conftest import send, settle
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw


async def test_an_at_image_mention_is_attached_as_an_image(make_app, scripted_server, project):
    buffer = io.BytesIO()
    PilImage.new("RGB", (5, 5), (250, 250, 0)).save(buffer, "PNG")
    (project / "shot.png").write_bytes(buffer.getvalue())
    scripted_server.enqueue(reply("Yellow."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "what colour is @shot.png")
        await settle(pilot)

        assert "Attached shot.png." in screen_text(app)
    [request] = scripted_server.requests_for("main")
    encoded = base64.b64encode(buffer.getvalue()).decode()
    assert request.images == [f"data:image/png;base64,{encoded}"]
    assert request.contains("what colour is @shot.png")


async def test_pasting_the_path_of_an_image_attaches_it(
    make_app, scripted_server, project, tmp_path
):
    """Terminals paste a dragged-in file as its (quoted) path; an image path attaches the image,
    from anywhere on disk (screenshots are rarely in the workspace)."""
    buffer = io.BytesIO()
    PilImage.new("RGB", (3, 3), (0, 0, 0)).save(buffer, "PNG")
    outside = tmp_path / "Desktop" / "My Shot.png"
    outside.parent.mkdir()
    outside.write_bytes(buffer.getvalue())
    scripted_server.enqueue(reply("Black."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"what is ")
        app.post_message(events.Paste(f"'{outside}'"))
        await pilot.pause()
        assert app.prompt_input.text == "what is [image My Shot.png]"
        await pilot.press("enter")
        await settle(pilot)

    [request] = scripted_server.requests_for("main")
    encoded = base64.b64encode(buffer.getvalue()).decode()
    assert request.images == [f"data:image/png;base64,{encoded}"]
    assert request.contains("what is [image My Shot.png]")


async def test_pasted_text_that_is_not_an_image_path_is_just_text(make_app, project):
    (project / "notes.txt").write_text("x")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(events.Paste(str(project / "notes.txt")))
        await pilot.pause()

        assert app.prompt_input.text == str(project / "notes.txt")
        assert app.prompt_input.pasted_images == {}
