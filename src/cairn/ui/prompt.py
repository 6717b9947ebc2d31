"""The prompt box: multi-line input with history and completion of commands and ``@path``."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Key, Paste
from textual.message import Message
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option

from cairn.content import Image
from cairn.images import ImageError, is_image_path, load_image
from cairn.ui.completion import BUILTIN_COMMANDS, Completion, complete
from cairn.ui.input_history import InputHistory
from cairn.vocabulary.events import CommandInfo

__all__ = ["CompletionMenu", "PromptInput", "pasted_image_path"]

PLACEHOLDER = "Type a message · / commands · @ attach a file · ! run a shell command"


class CompletionMenu(OptionList):
    """The suggestions for what is being typed; the prompt box keeps the keyboard focus."""

    can_focus = False

    def __init__(self) -> None:
        super().__init__(id="completions")
        self.completions: list[Completion] = []
        self.display = False

    def show(self, completions: list[Completion]) -> None:
        self.completions = completions
        self.set_options(
            Option(Text.assemble((c.label, "bold"), (f"  {c.description}", "dim")))
            for c in completions
        )
        self.display = bool(completions)
        if completions:
            self.highlighted = 0

    def hide(self) -> None:
        self.completions = []
        self.display = False

    @property
    def current(self) -> Completion | None:
        if not self.display or self.highlighted is None:
            return None
        if 0 <= self.highlighted < len(self.completions):
            return self.completions[self.highlighted]
        return None


class PromptInput(TextArea):
    """Enter sends; Ctrl+J, Shift+Enter, Alt+Enter or a trailing ``\\`` start a new line."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+j,shift+enter,alt+enter", "newline", "New line", show=False),
    ]

    class Submitted(Message):
        def __init__(self, text: str, images: tuple[Image, ...] = ()) -> None:
            super().__init__()
            self.text = text
            self.images = images  # pasted image files whose placeholder is still in the text

    def __init__(
        self,
        *,
        history: InputHistory,
        cwd: Path,
        menu: CompletionMenu,
        commands: Callable[[], Sequence[CommandInfo]] = lambda: BUILTIN_COMMANDS,
    ) -> None:
        super().__init__(
            id="prompt",
            soft_wrap=True,
            show_line_numbers=False,
            tab_behavior="focus",
            compact=True,
            highlight_cursor_line=False,
            placeholder=PLACEHOLDER,
        )
        self.prompt_history = history
        self.cwd = cwd
        self.menu = menu
        self._commands = commands  # the session's, which other parts may add to
        # The (text, cursor) the menu was last computed or dismissed for; Enter and Tab
        # recompute it when the text has moved on (keys of a burst outrun the Changed messages).
        self._menu_for: tuple[str, int] | None = None
        self.pasted_images: dict[str, Image] = {}  # "[image shot.png]" -> the image read

    async def _on_paste(self, event: Paste) -> None:
        """A pasted (or dragged-in) path of an image file attaches that image.

        Any other paste is left to TextArea's own handler, which Textual runs after this one.
        """
        path = pasted_image_path(event.text, self.cwd)
        if path is None:
            return
        event.prevent_default()  # TextArea's handler would insert the path as text
        try:
            image = await asyncio.to_thread(load_image, path, source=path.name)
        except ImageError as exc:
            self.app.notify(f"Not attached: {exc}", severity="warning")
            self.insert(event.text)
            return
        label = f"[image {path.name}]"
        count = 1
        while label in self.pasted_images:
            count += 1
            label = f"[image {path.name} #{count}]"
        self.pasted_images[label] = image
        self.insert(label)

    # ----- keys -----

    async def _on_key(self, event: Key) -> None:
        """Every key of the prompt box is handled here, in arrival order.

        Textual runs a widget's key bindings only when the key has bubbled up to the app, after
        the keys queued behind it were typed; in a burst (a paste without bracketed paste, a
        fast typist, a laggy link) Ctrl+J or Home would then land in the wrong place.
        """
        if event.key == "enter":
            self._consume(event)
            self._enter()
            return
        if event.key == "tab" and self._current_completion() is not None:
            self._consume(event)
            completion = self.menu.current
            assert completion is not None
            self.apply_completion(completion)
            return
        if event.key == "escape" and self.menu.display:
            self._consume(event)
            self.menu.hide()
            self._menu_for = self._state()
            return
        bindings = self._bindings.key_to_bindings.get(event.key, ())
        if bindings and event.key != "ctrl+c":  # Ctrl+C is the app's (cancel, clear, quit)
            self._consume(event)
            for binding in bindings:
                if await self.app.run_action(binding.action, self):
                    break
            return
        await super()._on_key(event)

    @staticmethod
    def _consume(event: Key) -> None:
        event.stop()
        event.prevent_default()

    def _enter(self) -> None:
        completion = self._current_completion()
        if completion is not None and self._changes(completion):
            self.apply_completion(completion)
            return
        row, column = self.cursor_location
        line = self.document.get_line(row)
        if column > 0 and line[:column].endswith("\\"):
            self.replace("\n", (row, column - 1), (row, column))
            return
        text = self.text
        if not text.strip():
            return
        self.prompt_history.add(text)
        images = tuple(image for label, image in self.pasted_images.items() if label in text)
        self._set_text("")
        self.pasted_images.clear()
        self.post_message(self.Submitted(text, images))

    def action_newline(self) -> None:
        self.insert("\n")

    def action_cursor_up(self, select: bool = False) -> None:
        if self.menu.display and not select:
            self.menu.action_cursor_up()
            return
        if not select and self.cursor_location[0] == 0:
            entry = self.prompt_history.previous(self.text)
            if entry is not None:
                self._set_text(entry)
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if self.menu.display and not select:
            self.menu.action_cursor_down()
            return
        last_row = self.document.line_count - 1
        if not select and self.cursor_location[0] == last_row and self.prompt_history.browsing:
            entry = self.prompt_history.next()
            if entry is not None:
                self._set_text(entry)
            return
        super().action_cursor_down(select)

    # ----- completion -----

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._menu_for != self._state():
            self.refresh_completions()

    def refresh_completions(self) -> None:
        text = self.text
        cursor = self._offset_of_cursor()
        self._menu_for = (text, cursor)
        completions = complete(text, cursor, self.cwd, self._commands()) if text else []
        if completions:
            self.menu.show(completions)
        else:
            self.menu.hide()

    def _current_completion(self) -> Completion | None:
        """The highlighted completion for the text as it is now (recomputed if it moved on)."""
        if self._menu_for != self._state():
            self.refresh_completions()
        return self.menu.current

    def apply_completion(self, completion: Completion) -> None:
        text = self.text
        new = text[: completion.start] + completion.insert + text[completion.end :]
        offset = completion.start + len(completion.insert)
        self.text = new
        self.cursor_location = self._location(new, offset)
        if completion.insert.endswith("/"):
            self.refresh_completions()  # a folder: offer what is inside it
        else:
            self.menu.hide()
            self._menu_for = self._state()

    def _changes(self, completion: Completion) -> bool:
        current = self.text[completion.start : completion.end]
        return current != completion.insert.rstrip(" ")

    def _set_text(self, text: str) -> None:
        """Text we put in the box ourselves (history, clearing): no completion menu for it."""
        self.text = text
        self.cursor_location = self._location(text, len(text))
        self.menu.hide()
        self._menu_for = self._state()

    def clear_draft(self) -> None:
        self._set_text("")
        self.pasted_images.clear()

    def load_draft(self, text: str) -> None:
        """Put ``text`` in the box to edit and send (a rewound prompt)."""
        self._set_text(text)

    def _state(self) -> tuple[str, int]:
        return self.text, self._offset_of_cursor()

    def _offset_of_cursor(self) -> int:
        row, column = self.cursor_location
        lines = self.text.split("\n")
        return sum(len(line) + 1 for line in lines[:row]) + column

    @staticmethod
    def _location(text: str, offset: int) -> tuple[int, int]:
        before = text[:offset]
        row = before.count("\n")
        column = len(before) - (before.rfind("\n") + 1)
        return row, column


def pasted_image_path(text: str, cwd: Path) -> Path | None:
    """The image file a pasted text names, if it is one path (quoted or escaped, as terminals
    paste a dragged file) of an existing image file; else ``None``."""
    text = text.strip()
    if not text or "\n" in text:
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if len(words) != 1:
        return None
    raw = words[0].removeprefix("file://")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = cwd / path
    return path if is_image_path(path) and path.is_file() else None
