"""The ``/rewind`` picker: a turn of the session (newest first, with the files changed since),
then what to restore. The rewind itself is the session's (:mod:`cairn.session.rewind`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cairn.recording.rewind import RewindMode
from cairn.session.rewind import (
    REWIND_USAGE,
    RewindError,
    RewindListing,
    RewindPoint,
    parse_rewind_args,
)
from cairn.ui.choices import ChoiceScreen, focus_first_option, numbered_options
from cairn.ui.transcript import NoticeView

if TYPE_CHECKING:
    from cairn.ui.app import CairnApp

__all__ = ["RewindChoice", "RewindCommand", "RewindModeScreen", "RewindScreen"]

RewindChoice: TypeAlias = tuple[int, RewindMode] | str  # (turn, mode), or "undo"
MAX_PROMPT_CHARS = 70  # of a turn's prompt shown in the list
MAX_FILES_SHOWN = 3  # file names shown per turn before "+N more"
UNDO = "undo"
_MODES: tuple[tuple[RewindMode, str], ...] = (
    ("both", "Restore code and conversation"),
    ("conversation", "Restore the conversation only (keep the files)"),
    ("code", "Restore the code only (keep the conversation)"),
)


class RewindScreen(ModalScreen[int | str | None]):
    """Pick a turn (its number), ``"undo"`` for the last rewind, or nothing (Esc)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, listing: RewindListing) -> None:
        super().__init__(classes="dialog-screen")
        self.listing = listing

    def compose(self) -> Any:
        with Vertical(classes="dialog dialog-wide"):
            yield Static(Text("Rewind to before which turn?", style="bold"))
            if self.listing.checkpoints_off:
                yield Static(
                    Text(f"Only the conversation can go back: {self.listing.checkpoints_off}.",
                         style="yellow")
                )  # fmt: skip
            yield OptionList(*self._options(), id="rewind-turns")

    def on_mount(self) -> None:
        focus_first_option(self)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        chosen = event.option.id or ""
        self.dismiss(UNDO if chosen == UNDO else int(chosen))

    def action_close(self) -> None:
        self.dismiss(None)

    def _options(self) -> list[Option]:
        options = []
        if self.listing.undoable is not None:
            label = "↶ Undo the last rewind" + (
                " (it stopped part way)" if self.listing.undoable.partial else ""
            )
            options.append(Option(Text(label, style="bold"), id=UNDO))
        options += [
            Option(_turn_label(point), id=str(point.number)) for point in self.listing.points
        ]
        return options


class RewindModeScreen(ChoiceScreen[RewindMode | None]):
    """What to restore for the chosen turn."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, point: RewindPoint, checkpoints_off: str | None) -> None:
        super().__init__({mode: mode for mode, _ in _MODES})
        self.point = point
        self.checkpoints_off = checkpoints_off

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(Text(f"Rewind to before turn {self.point.number}", style="bold"))
            yield Static(Text(_shorten(self.point.text), style="dim"))
            if not self.point.code:
                why = self.checkpoints_off or "no files changed since this turn"
                yield Static(Text(f"The code stays as it is: {why}.", style="yellow"))
            yield numbered_options(_MODES, id="rewind-modes")

    def action_cancel(self) -> None:
        self.dismiss(None)


class RewindCommand:
    """``/rewind`` in the terminal UI: the picker, then the session's rewind, then the
    conversation shown as it is now (the rewound prompt in the input, to edit and send again)."""

    def __init__(self, app: CairnApp) -> None:
        self.app = app

    async def run(self, args: str) -> None:
        """``/rewind`` (a listing to pick from), ``/rewind N [mode]`` or ``/rewind undo``."""
        app = self.app
        if app.busy:
            await app.transcript.add(
                NoticeView("error", "Cannot rewind while a turn is running; wait or press Esc.")
            )
            return
        if args.lower() == "undo":
            await self.apply(None)
            return
        parsed = parse_rewind_args(args)
        if parsed is None:
            await app.transcript.add(NoticeView("error", f"Usage: {REWIND_USAGE}"))
            return
        number, mode = parsed
        if number is not None:
            await self.apply((number, mode))
            return
        try:
            listing = await app.session.rewind_listing()
        except RewindError as exc:
            await app.transcript.add(NoticeView("error", f"Cannot rewind: {exc}."))
            return
        if not listing.points and listing.undoable is None:
            await app.transcript.add(NoticeView("info", "No turns to rewind to yet."))
            return
        await app.push_screen(RewindScreen(listing), callback=self._picked(listing))

    def _picked(self, listing: RewindListing) -> Callable[[int | str | None], None]:
        app = self.app

        def picked(choice: int | str | None) -> None:
            if choice == "undo":
                app.call_next(self.apply, None)
                return
            point = next((p for p in listing.points if p.number == choice), None)
            if point is None:
                return

            def chosen(mode: RewindMode | None) -> None:
                if mode is not None:
                    app.call_next(self.apply, (point.number, mode))

            app.push_screen(RewindModeScreen(point, listing.checkpoints_off), callback=chosen)

        return picked

    async def apply(self, target: tuple[int, RewindMode] | None) -> None:
        app = self.app
        session = app.session
        try:
            outcome = await (
                session.undo_rewind(announce=False)
                if target is None
                else session.rewind(*target, announce=False)
            )
        except RewindError as exc:
            await app.transcript.add(NoticeView("error", f"Cannot rewind: {exc}."))
            return
        if outcome.loaded is not None:  # the conversation changed: show it as it is now
            await app.show_session(session, resumed=False)
            if outcome.prompt:
                app.prompt_input.load_draft(outcome.prompt)  # to edit and send again
        await app.transcript.add(NoticeView("info", outcome.message))


def _turn_label(point: RewindPoint) -> Text:
    label = Text(f"{point.number:>3}. ", style="bold")
    label.append(_shorten(point.text))
    if point.files:
        names = [f.path for f in point.files[:MAX_FILES_SHOWN]]
        more = len(point.files) - len(names)
        listed = ", ".join(names) + (f" +{more} more" if more > 0 else "")
        label.append(f"  — {len(point.files)} file(s): {listed}", style="dim")
    elif not point.code:
        label.append("  — no file changes", style="dim")
    return label


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_PROMPT_CHARS else flat[: MAX_PROMPT_CHARS - 1] + "…"
