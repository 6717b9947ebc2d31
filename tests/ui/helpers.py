"""Reading what the terminal UI shows, as plain text (what a person would see)."""

from __future__ import annotations

import io
import unicodedata
from typing import Any

from rich.console import Console
from textual.app import App


def screen_text(app: App[Any]) -> str:
    """The current screen (dialogs over the conversation included) as lines of text."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    render = app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens
    )
    console.print(render)
    return console.export_text()



async def burst(pilot: Any, *keys: str) -> None:
    """Send ``keys`` the way a paste without bracketed paste or a laggy link does: all at once.

    ``pilot.press`` waits for the app to go idle after every key; this queues every key event
    before the app handles the first one (as a terminal read of several bytes does), then waits.
    """
    from textual import events
    from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

    driver = pilot.app._driver
    for key in keys:
        name = _character_to_key(key) if len(key) == 1 and not key.isalnum() else key
        try:
            char: str | None = unicodedata.lookup(
                _get_unicode_name_from_key(REPLACED_KEYS.get(name, name))
            )
        except KeyError:
            char = key if len(key) == 1 else None
        event = events.Key(name, char)
        event.set_sender(pilot.app)
        driver.send_message(event)
    await pilot.pause()
