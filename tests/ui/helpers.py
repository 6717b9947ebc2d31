"""Reading what the terminal UI shows, as plain text (what a person would see)."""

from __future__ import annotations

import io
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
