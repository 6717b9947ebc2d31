"""Diffs, recap lines and approval prompts as the terminal UI (and the demo) draw them."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.ui.render import (
    MAX_DIFF_LINES,
    permission_preview,
    permission_title,
    recap_text,
    render_diff,
)
from cairn.vocabulary.interaction import PermissionRequest
from cairn.vocabulary.tool_calls import FileDiff, ToolKind


def test_diff_shows_removed_and_added_lines_relative_to_the_workspace():
    diff = FileDiff(Path("/ws/src/a.py"), "x = 1\ny = 2\n", "x = 1\ny = 3\n")

    text = render_diff(diff, Path("/ws"))

    assert text is not None
    assert text.plain.splitlines() == [
        "--- src/a.py",
        "+++ src/a.py",
        "@@ -1,2 +1,2 @@",
        " x = 1",
        "-y = 2",
        "+y = 3",
    ]


def test_a_new_file_is_all_added_lines():
    text = render_diff(FileDiff(Path("/ws/new.txt"), None, "hello\n"), Path("/ws"))

    assert text is not None
    assert text.plain.splitlines()[:2] == ["--- /dev/null", "+++ new.txt"]
    assert "+hello" in text.plain


def test_a_long_diff_is_cut_with_a_count():
    old = "".join(f"line {i}\n" for i in range(200))
    new = "".join(f"LINE {i}\n" for i in range(200))

    text = render_diff(FileDiff(Path("/ws/a"), old, new), Path("/ws"))

    assert text is not None
    lines = text.plain.splitlines()
    assert len(lines) == MAX_DIFF_LINES + 1
    assert lines[-1].endswith("more diff lines")


def test_recap_line_has_a_bold_label_and_italic_text():
    text = recap_text("Porting the parser.")

    assert text.plain == "※ recap: Porting the parser."
    styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert styles["recap: "] == "dim bold"
    assert styles["Porting the parser."] == "dim italic"


def shell_request(command: str, title: str) -> PermissionRequest:
    return PermissionRequest(
        "c1", "run_shell_command", title, ToolKind.EXECUTE, "exec", {"command": command}
    )


def test_an_approval_prompt_says_what_it_allows_in_words():
    """Regression: the prompt asked "Allow run_shell_command?" / "Allow write_file?" (internal
    tool names) above the call."""
    new_file = FileDiff(Path("/w/a.py"), None, "x\n")
    changed = FileDiff(Path("/w/a.py"), "x\n", "y\n")

    def edit(tool: str, diff: FileDiff | None) -> PermissionRequest:
        return PermissionRequest("c1", tool, "Edit a.py", ToolKind.EDIT, "edit", {}, diff)

    assert permission_title(shell_request("ls", "ls")).plain == "Allow this command?"
    assert permission_title(edit("write_file", new_file)).plain == "Allow this new file?"
    assert permission_title(edit("edit", changed)).plain == "Allow this edit?"
    assert permission_title(edit("edit", None)).plain == "Allow this edit?"
    mcp = PermissionRequest("c1", "mcp__docs__search", "search", ToolKind.OTHER, "mcp", {})
    assert permission_title(mcp).plain == "Allow mcp__docs__search?"  # the name the user set up


def test_a_command_is_previewed_unless_the_title_already_shows_it():
    long = "pytest -q tests/" + "x" * 200

    assert permission_preview(shell_request("ls -la", "ls -la")) is None
    preview = permission_preview(shell_request(long, long[:40] + "…"))
    assert preview is not None and preview.plain == long


def test_an_edit_is_previewed_as_its_diff():
    diff = FileDiff(Path("/ws/a.py"), "x = 1\n", "x = 2\n")
    request = PermissionRequest("c1", "edit", "Edit a.py", ToolKind.EDIT, "edit", {}, diff)

    preview = permission_preview(request, Path("/ws"))

    assert preview is not None and "+x = 2" in preview.plain


def test_other_arguments_are_previewed_as_indented_json():
    """Issue #30: a pending call's arguments read as formatted JSON, not collapsed."""
    args = {"query": "open bugs", "filters": {"label": ["bug", "p1"], "state": "open"}}
    request = PermissionRequest("c1", "mcp__gh__search", "search", ToolKind.OTHER, "mcp", args)

    preview = permission_preview(request)

    assert preview is not None
    assert preview.plain == json.dumps(args, indent=2)
