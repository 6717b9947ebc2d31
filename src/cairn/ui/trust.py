"""The trust question of the terminal UI: shown before the first session in a folder whose
project settings would run commands (hooks, MCP servers) or widen permissions.

The decision itself is :mod:`cairn.config.trust`'s; this asks, listing every command, and
records the answer. ``cairn -p`` and the ACP agent never ask: they run without those settings
and print how to trust the folder.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import OptionList, Static

from cairn.config.trust import ProjectTrust, trust_folder
from cairn.ui.choices import numbered_options
from cairn.ui.styles import share_parsed_css
from cairn.vocabulary.terminal import escape_for_terminal

__all__ = ["TrustApp", "TrustChoice", "ask_to_trust"]

TrustChoice = Literal["trust", "decline", "quit"]
_CHOICES: tuple[tuple[TrustChoice, str], ...] = (
    ("trust", "Trust this folder: use these settings (asked again if they change)"),
    ("decline", "Don't trust it: start without them"),
    ("quit", "Quit"),
)

CSS = """
Screen { align: center middle; }
#trust { width: 90%; max-width: 120; height: auto; max-height: 95%;
         border: round $warning; background: $surface; padding: 0 1; }
#trust > * { height: auto; margin: 0 0 1 0; }
#trust-commands { max-height: 20; }
#trust OptionList { border: none; }
"""


class TrustApp(App[TrustChoice]):
    """Asks once whether to trust ``trust.folder``; its return value is the answer."""

    CSS = CSS
    ENABLE_COMMAND_PALETTE = False
    TITLE = "cairn"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1,y", "choose('trust')", "Trust", show=False),
        Binding("2,n", "choose('decline')", "Don't trust", show=False),
        Binding("3,q,escape,ctrl+c", "choose('quit')", "Quit", show=False, priority=True),
    ]

    def __init__(self, trust: ProjectTrust) -> None:
        super().__init__()
        share_parsed_css(self)
        self.trust = trust

    def compose(self) -> Any:
        heading = (
            "The project settings of this folder changed since you trusted it."
            if self.trust.changed
            else "Do you trust this folder?"
        )
        with Vertical(id="trust"):
            yield Static(Text(heading, style="bold"))
            yield Static(
                Text.assemble(
                    (_shown(str(self.trust.folder)), "bold yellow"),
                    " asks cairn to run these commands or allow these settings. A repository "
                    "you did not write can use them to run programs on your machine:",
                )
            )
            with VerticalScroll(id="trust-commands"):
                yield Static(self._commands())
            yield numbered_options(_CHOICES, id="trust-choices")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 1  # the safe answer is the default
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_choose(event.option.id or "quit")

    def action_choose(self, choice: str) -> None:
        self.exit(choice)  # type: ignore[arg-type]

    def _commands(self) -> Text:
        text = Text()
        for command in self.trust.commands:
            text.append(f"{_shown(command.source)} {_shown(command.key)}\n", style="dim")
            text.append(f"  {_shown(command.text)}\n", style="bold")
        return text


def _shown(text: str) -> str:
    """What a project file says, as written: control characters and bidi overrides escaped."""
    return escape_for_terminal(text, keep_newlines=False)


def ask_to_trust(trust: ProjectTrust) -> TrustChoice:
    """Ask whether to trust ``trust.folder`` and record a trust or decline answer."""
    choice = TrustApp(trust).run() or "quit"
    if choice in ("trust", "decline"):
        trust_folder(trust.folder, trusted=choice == "trust")
    return choice
