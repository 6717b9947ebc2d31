from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from cairn.tools.base import FileDiff, Location, ToolContext
from cairn.tools.write_file import WriteFileTool

tool = WriteFileTool()


async def test_creates_the_file_and_missing_parent_folders(
    workspace: Path, ctx: ToolContext
) -> None:
    result = await tool.execute({"file_path": "src/pkg/new.py", "content": "x = 1\n"}, ctx)

    target = workspace / "src" / "pkg" / "new.py"
    assert target.read_text(encoding="utf-8") == "x = 1\n"
    assert result.output == "Created src/pkg/new.py (1 lines)."
    assert result.diff == FileDiff(target.resolve(), None, "x = 1\n")
    assert result.locations == [Location(target.resolve())]


async def test_overwriting_gives_a_diff_with_the_old_text(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "a.txt").write_text("old\n", encoding="utf-8")

    result = await tool.execute({"file_path": "a.txt", "content": "new\n"}, ctx)

    assert (workspace / "a.txt").read_text(encoding="utf-8") == "new\n"
    assert result.diff is not None
    assert (result.diff.old_text, result.diff.new_text) == ("old\n", "new\n")
    assert result.output is not None
    assert result.output.startswith("Overwrote a.txt")


async def test_preview_shows_the_change_without_writing(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "a.txt").write_text("old\n", encoding="utf-8")

    diff = await tool.preview({"file_path": "a.txt", "content": "new\n"}, ctx)

    assert diff == FileDiff((workspace / "a.txt").resolve(), "old\n", "new\n")
    assert (workspace / "a.txt").read_text(encoding="utf-8") == "old\n"


async def test_preview_of_a_new_file_has_no_old_text(ctx: ToolContext) -> None:
    diff = await tool.preview({"file_path": "fresh.txt", "content": "hi"}, ctx)

    assert diff is not None
    assert diff.old_text is None


async def test_preview_of_invalid_arguments_is_none(ctx: ToolContext) -> None:
    assert await tool.preview({"file_path": "a.txt"}, ctx) is None


async def test_empty_content_writes_an_empty_file(workspace: Path, ctx: ToolContext) -> None:
    result = await tool.execute({"file_path": "empty.txt", "content": ""}, ctx)

    assert result.error is None
    assert (workspace / "empty.txt").read_bytes() == b""


async def test_writing_outside_the_workspace_is_refused(tmp_path: Path, ctx: ToolContext) -> None:
    result = await tool.execute({"file_path": str(tmp_path / "escape.txt"), "content": "x"}, ctx)

    assert result.error is not None
    assert "outside" in result.error
    assert not (tmp_path / "escape.txt").exists()


async def test_protected_subfolder_is_refused(workspace: Path, protected_ctx: ToolContext) -> None:
    result = await tool.execute({"file_path": "pinned/a.md", "content": "x"}, protected_ctx)

    assert result.error is not None
    assert "protected" in result.error
    assert not (workspace / "pinned").exists()


async def test_replacing_a_binary_file_is_refused(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "blob.bin").write_bytes(b"\xff\xfe\x00binary")

    result = await tool.execute({"file_path": "blob.bin", "content": "text"}, ctx)

    assert result.error is not None
    assert "not a UTF-8 text file" in result.error
    assert (workspace / "blob.bin").read_bytes() == b"\xff\xfe\x00binary"


async def test_writing_onto_a_folder_is_an_error(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "src").mkdir()

    result = await tool.execute({"file_path": "src", "content": "x"}, ctx)

    assert result.error is not None
    assert "is a directory" in result.error


def test_needs_edit_confirmation(ctx: ToolContext) -> None:
    assert tool.confirmation({"file_path": "a", "content": ""}, ctx) == "edit"


async def test_a_fifo_is_never_replaced_or_waited_on(workspace: Path, ctx: ToolContext) -> None:
    """A FIFO where a file should be is refused before it is opened (it would block)."""
    os.mkfifo(workspace / "pipe")

    result = await asyncio.wait_for(
        tool.execute({"file_path": "pipe", "content": "x"}, ctx), 30
    )

    assert result.error is not None and "FIFO" in result.error
    assert stat.S_ISFIFO((workspace / "pipe").lstat().st_mode)
