"""How the terminal UI looks: the app's stylesheet (Textual CSS) and the width below which
dialogs take the whole terminal."""

from __future__ import annotations

__all__ = ["CSS", "NARROW_COLUMNS"]

NARROW_COLUMNS = 80  # below this, dialogs take the whole width (no fragments beside them)

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
