"""How the terminal UI looks: the app's stylesheet (Textual CSS), the width below which
dialogs take the whole terminal, and a stylesheet that parses each CSS source once a process.

Textual parses every source (the app's CSS and each widget class's ``DEFAULT_CSS``) again for
each app, and all of them again in a fresh stylesheet on each re-parse (the theme set at start,
a screen with CSS of its own): a fifth of a bare app's start-up. The parsed rules depend only on
the source and the theme's variables and are read-only once parsed, so :class:`SharedStylesheet`
keeps them for the process (the trust question and the app share them; so do the tests' apps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.app import App
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet

__all__ = ["CSS", "NARROW_COLUMNS", "SharedStylesheet", "share_parsed_css"]

NARROW_COLUMNS = 80  # below this, dialogs take the whole width (no fragments beside them)
PARSED_SOURCES_KEPT = 512  # parsed CSS sources a process keeps: every widget class's, a few themes

_parsed: dict[tuple[Any, ...], list[RuleSet]] = {}

CSS = """
Screen { layers: base; }
#transcript { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
#transcript > * { height: auto; margin: 0 0 1 0; }
.welcome { color: $text-muted; }
.user { background: $boost; padding: 0 1; }
.steer { color: $text-muted; padding: 0 1; }
.assistant { margin: 0 0 1 0; padding: 0 0; }
.assistant MarkdownBlock { margin: 0 1 0 1; }
.thought { border: none; padding: 0; margin: 0 0 1 0; background: transparent; }
.thought CollapsibleTitle { color: $text-muted; padding: 0 1; }
.thought Contents { padding: 0 0 0 3; }
.tool { padding: 0 1; }
.tool-body { padding: 0 0 0 2; }
.tool-output { height: auto; padding: 0 0 0 2; }
.tool-expander { border: none; padding: 0; margin: 0; background: transparent; }
.tool-expander CollapsibleTitle { color: $text-muted; padding: 0; }
.tool-expander Contents { padding: 0; }
.recap { padding: 0 1; }
.notice { padding: 0 1; }
.shell { padding: 0 1; }
.shell-output { height: auto; padding: 0 0 0 2; }
.plan { padding: 0 1; }
#completions { height: auto; max-height: 10; margin: 0 1; border: none; background: $panel; }
#prompt { height: auto; max-height: 10; margin: 0 1; border: round $primary; padding: 0 1; }
#status { height: 1; padding: 0 2; color: $text-muted; }
.dialog-screen { align: center middle; }
.dialog { width: 80%; max-width: 100; height: auto; max-height: 90%;
          border: round $accent; background: $surface; padding: 0 1; }
.dialog-wide { width: 90%; max-width: 120; }
CairnApp.-narrow .dialog { width: 100%; }
.dialog > * { height: auto; margin: 0 0 1 0; }
.dialog-preview { height: auto; max-height: 16; }
.dialog OptionList { height: auto; max-height: 20; border: none; }
"""


class SharedStylesheet(Stylesheet):
    """A Textual stylesheet whose parsed rules are shared by every stylesheet of the process
    with the same variables (the theme's colours)."""

    def __init__(self, *, variables: dict[str, str] | None = None) -> None:
        super().__init__(variables=variables)
        self._theme = _frozen(variables or {})

    def set_variables(self, variables: dict[str, str]) -> None:
        super().set_variables(variables)
        self._theme = _frozen(variables)

    def _parse_rules(self, css: str, *args: Any, **kwargs: Any) -> list[RuleSet]:
        key = (self._theme, css, args, tuple(sorted(kwargs.items())))
        rules = _parsed.get(key)
        if rules is None:
            rules = super()._parse_rules(css, *args, **kwargs)
            if len(_parsed) >= PARSED_SOURCES_KEPT:
                del _parsed[next(iter(_parsed))]  # the oldest
            _parsed[key] = rules
        return rules

    def reparse(self) -> None:
        """Textual's own, into a fresh stylesheet of this class (Textual's makes a plain one,
        which would parse every source again): on an error, this one is left as it was."""
        fresh = SharedStylesheet(variables=self._variables)
        fresh.source = dict(self.source)
        try:
            fresh.parse()
        except Exception:
            self._invalid_css.update(fresh._invalid_css)
            raise
        self._rules = fresh.rules
        self._rules_map = None
        self.source = fresh.source
        self._require_parse = False


def share_parsed_css(app: App[Any]) -> None:
    """Give ``app`` a :class:`SharedStylesheet` (from its ``__init__``, before it runs)."""
    app.stylesheet = SharedStylesheet(variables=app.theme_variables)


def _frozen(variables: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(variables.items()))
