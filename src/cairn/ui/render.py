"""How the terminal UI draws diffs, recaps and approval prompts, as rich ``Text``.

No Textual here: ``cairn demo`` shows an approval exactly as the UI's dialog does without
loading the UI.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from rich.text import Text

from cairn.vocabulary.interaction import PermissionRequest
from cairn.vocabulary.terminal import escape_for_terminal as shown
from cairn.vocabulary.tool_calls import FileDiff

__all__ = [
    "display_path",
    "permission_preview",
    "permission_title",
    "recap_text",
    "render_diff",
]

MAX_DIFF_LINES = 60  # lines of an edit's diff shown under the call
DIFF_CONTEXT_LINES = 2  # unchanged lines around each change
MAX_PREVIEW_CHARS = 2000  # of a command or argument list shown in the approval dialog


def recap_text(text: str) -> Text:
    return Text.assemble(("※ ", "dim"), ("recap: ", "dim bold"), (text, "dim italic"))


def permission_title(request: PermissionRequest) -> Text:
    """``Allow this edit?``: the first line of an approval prompt, in words (the call's own
    title comes under it). Other tools, MCP ones for instance, by the name the user knows."""
    if request.confirmation == "exec":
        what = "this command"
    elif request.confirmation == "edit":
        new = request.diff is not None and request.diff.old_text is None
        what = "this new file" if new else "this edit"
    else:
        what = request.tool_name
    return Text.assemble(("Allow ", "bold"), (what, "bold yellow"), ("?", "bold"))


def permission_preview(request: PermissionRequest, cwd: Path | None = None) -> Text | None:
    """What the call would do: an edit's diff, a command, or the arguments (indented JSON).

    ``None`` when that would only repeat the call's title (a short shell command).
    """
    diff = render_diff(request.diff, cwd)
    if diff is not None:
        return diff
    command = request.args.get("command")
    if isinstance(command, str):
        if command.strip() == request.title.strip():
            return None
        return Text(shown(command[:MAX_PREVIEW_CHARS]), style="bold")
    try:
        text = json.dumps(request.args, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError, RecursionError):
        text = str(request.args)
    if len(text) > MAX_PREVIEW_CHARS:
        text = text[: MAX_PREVIEW_CHARS - 1] + "…"
    return Text(shown(text), style="dim")


def render_diff(diff: FileDiff | None, base: Path | None = None) -> Text | None:
    """A coloured unified diff of an edit (a new file shows as all added lines).

    Paths under ``base`` (the workspace) are shown relative to it.
    """
    if diff is None:
        return None
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    name = display_path(diff.path, base)
    lines = list(
        difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if diff.old_text is None else name,
            tofile=name,
            lineterm="",
            n=DIFF_CONTEXT_LINES,
        )
    )
    if not lines:
        return Text("(no changes)", style="dim")
    text = Text()
    for line in lines[:MAX_DIFF_LINES]:
        text.append(shown(line, keep_newlines=False) + "\n", style=_diff_style(line))
    if len(lines) > MAX_DIFF_LINES:
        text.append(f"… {len(lines) - MAX_DIFF_LINES} more diff lines", style="dim")
    text.rstrip()
    return text


def display_path(path: Path, base: Path | None) -> str:
    if base is not None:
        try:
            return str(path.relative_to(base))
        except ValueError:
            pass
    return str(path)


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    return "dim"
