from __future__ import annotations

from pathlib import Path

from cairn.tools.base import ToolContext
from cairn.tools.list_directory import MAX_ENTRIES, ListDirectoryTool

tool = ListDirectoryTool()


async def test_lists_folders_first_with_a_trailing_slash(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "b.txt").write_text("", encoding="utf-8")
    (workspace / "A.md").write_text("", encoding="utf-8")
    (workspace / "src").mkdir()
    (workspace / "Docs").mkdir()

    result = await tool.execute({"path": "."}, ctx)

    assert result.output == "Contents of .:\nDocs/\nsrc/\nA.md\nb.txt"


async def test_lists_a_subfolder_by_relative_path(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("", encoding="utf-8")

    result = await tool.execute({"path": "src"}, ctx)

    assert result.output == "Contents of src:\nmain.py"


async def test_ignore_patterns_leave_entries_out(workspace: Path, ctx: ToolContext) -> None:
    for name in ("a.py", "a.pyc", "b.pyc"):
        (workspace / name).write_text("", encoding="utf-8")

    result = await tool.execute({"path": ".", "ignore": ["*.pyc"]}, ctx)

    assert result.output == "Contents of .:\na.py"


async def test_empty_folder_says_so(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "empty").mkdir()

    result = await tool.execute({"path": "empty"}, ctx)

    assert result.output == "Folder empty is empty."


async def test_a_file_is_refused_with_a_pointer_to_read_file(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "a.txt").write_text("", encoding="utf-8")

    result = await tool.execute({"path": "a.txt"}, ctx)

    assert result.error is not None
    assert "read_file" in result.error


async def test_missing_folder_is_an_error(ctx: ToolContext) -> None:
    result = await tool.execute({"path": "nowhere"}, ctx)

    assert result.error == "Folder not found: nowhere"


async def test_folder_outside_the_workspace_is_refused(ctx: ToolContext) -> None:
    result = await tool.execute({"path": "/"}, ctx)

    assert result.error is not None
    assert "outside" in result.error


async def test_ignore_must_be_a_list_of_strings(ctx: ToolContext) -> None:
    result = await tool.execute({"path": ".", "ignore": "*.pyc"}, ctx)

    assert result.error is not None
    assert "`ignore` must be a list of strings" in result.error


async def test_long_listings_are_capped_with_a_note(workspace: Path, ctx: ToolContext) -> None:
    for n in range(MAX_ENTRIES + 5):
        (workspace / f"f{n:05}.txt").write_text("", encoding="utf-8")

    result = await tool.execute({"path": "."}, ctx)

    assert result.output is not None
    lines = result.output.splitlines()
    assert len(lines) == MAX_ENTRIES + 2
    assert lines[-1].startswith(f"[Showing {MAX_ENTRIES} of {MAX_ENTRIES + 5} entries.")
