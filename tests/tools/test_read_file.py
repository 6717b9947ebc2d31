from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from cairn.tools.base import Location, ToolContext
from cairn.tools.read_file import (
    DEFAULT_LINE_LIMIT,
    MAX_LINE_CHARS,
    MAX_READ_CHARS,
    ReadFileTool,
)

from ..loop_helpers import run_counting_other_tasks

tool = ReadFileTool()


def write_lines(path: Path, count: int) -> None:
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)), encoding="utf-8")


async def test_reads_a_small_file_whole(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")

    result = await tool.execute({"file_path": "a.txt"}, ctx)

    assert result.error is None
    assert result.output == "alpha\nbeta"


async def test_accepts_an_absolute_path_inside_the_workspace(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "a.txt").write_text("alpha\n", encoding="utf-8")

    result = await tool.execute({"file_path": str(workspace / "a.txt")}, ctx)

    assert result.output == "alpha"


async def test_offset_and_limit_select_a_window_of_lines(workspace: Path, ctx: ToolContext) -> None:
    write_lines(workspace / "a.txt", 10)

    result = await tool.execute({"file_path": "a.txt", "offset": 3, "limit": 2}, ctx)

    assert result.output is not None
    assert result.output.endswith("line 4\nline 5")
    assert "showing lines 4-5 of 10 total lines" in result.output
    assert "next offset: 5" in result.output


async def test_reading_the_last_lines_says_which_lines_were_shown(
    workspace: Path, ctx: ToolContext
) -> None:
    write_lines(workspace / "a.txt", 10)

    result = await tool.execute({"file_path": "a.txt", "offset": 8}, ctx)

    assert result.output == "[Showing lines 9-10 of 10 total lines.]\n\nline 9\nline 10"


async def test_large_file_is_truncated_at_the_line_limit_with_a_note(
    workspace: Path, ctx: ToolContext
) -> None:
    write_lines(workspace / "big.txt", 5000)

    result = await tool.execute({"file_path": "big.txt"}, ctx)

    assert result.output is not None
    assert result.output.startswith(
        f"[File content truncated: showing lines 1-{DEFAULT_LINE_LIMIT} of 5000 total lines. "
        "Use offset/limit to read more"
    )
    assert result.output.endswith(f"line {DEFAULT_LINE_LIMIT}")
    assert f"line {DEFAULT_LINE_LIMIT + 1}\n" not in result.output


async def test_output_is_capped_in_characters_even_below_the_line_limit(
    workspace: Path, ctx: ToolContext
) -> None:
    line = "x" * 999
    (workspace / "wide.txt").write_text((line + "\n") * 500, encoding="utf-8")

    result = await tool.execute({"file_path": "wide.txt"}, ctx)

    assert result.output is not None
    assert len(result.output) <= MAX_READ_CHARS + 200
    assert "showing lines 1-100 of 500 total lines" in result.output


async def test_very_long_lines_are_shortened(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "min.js").write_text("y" * (MAX_LINE_CHARS * 3), encoding="utf-8")

    result = await tool.execute({"file_path": "min.js"}, ctx)

    assert result.output is not None
    assert "y" * (MAX_LINE_CHARS + 1) not in result.output
    assert "[line truncated]" in result.output
    assert f"Lines longer than {MAX_LINE_CHARS} characters were shortened" in result.output


async def test_empty_file_is_reported_as_empty(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "empty.txt").write_text("", encoding="utf-8")

    result = await tool.execute({"file_path": "empty.txt"}, ctx)

    assert result.output == "[The file is empty.]"


async def test_offset_past_the_end_is_an_error_giving_the_line_count(
    workspace: Path, ctx: ToolContext
) -> None:
    write_lines(workspace / "a.txt", 3)

    result = await tool.execute({"file_path": "a.txt", "offset": 3}, ctx)

    assert result.error is not None
    assert "has 3 lines" in result.error


async def test_file_with_nul_bytes_is_refused_as_binary(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "data.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

    result = await tool.execute({"file_path": "data.bin"}, ctx)

    assert result.error is not None
    assert "binary" in result.error


async def test_undecodable_file_is_refused(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "latin1.txt").write_bytes("café".encode("latin-1"))

    result = await tool.execute({"file_path": "latin1.txt"}, ctx)

    assert result.error is not None
    assert "not UTF-8" in result.error


async def test_path_outside_the_workspace_is_refused(
    tmp_path: Path, workspace: Path, ctx: ToolContext
) -> None:
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")

    result = await tool.execute({"file_path": "../secret.txt"}, ctx)

    assert result.error is not None
    assert "outside" in result.error
    assert result.output is None


async def test_missing_file_is_reported_by_name(ctx: ToolContext) -> None:
    result = await tool.execute({"file_path": "nope.txt"}, ctx)

    assert result.error == "File not found: nope.txt"


async def test_directory_is_refused_with_a_pointer_to_list_directory(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "src").mkdir()

    result = await tool.execute({"file_path": "src"}, ctx)

    assert result.error is not None
    assert "list_directory" in result.error


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"file_path": 3},
        {"file_path": "a.txt", "offset": -1},
        {"file_path": "a.txt", "limit": 0},
    ],
)
async def test_invalid_arguments_give_an_error_not_an_exception(
    workspace: Path, ctx: ToolContext, args: dict[str, object]
) -> None:
    (workspace / "a.txt").write_text("a\n", encoding="utf-8")

    result = await tool.execute(args, ctx)

    assert result.error is not None
    assert result.error.startswith("Invalid parameters")


async def test_reads_through_the_context_file_system(workspace: Path, ctx: ToolContext) -> None:
    """An editor's unsaved buffer (served by ctx.fs) wins over the file on disk."""

    class Buffers:
        async def read_text(self, path: Path) -> str:
            return "unsaved buffer\n"

        async def write_text(self, path: Path, content: str) -> None:
            raise AssertionError("read_file must not write")

    (workspace / "a.txt").write_text("on disk\n", encoding="utf-8")
    ctx.fs = Buffers()

    result = await tool.execute({"file_path": "a.txt"}, ctx)

    assert result.output == "unsaved buffer"


def test_locations_point_at_the_file_and_first_line(workspace: Path, ctx: ToolContext) -> None:
    locations = tool.locations({"file_path": "a.txt", "offset": 9}, ctx)

    assert locations == [Location(workspace.resolve() / "a.txt", 10)]


async def test_an_image_file_is_returned_as_an_image(workspace: Path, ctx: ToolContext) -> None:
    raw = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
    (workspace / "dot.gif").write_bytes(raw)

    result = await tool.execute({"file_path": "dot.gif"}, ctx)

    assert result.error is None
    [image] = result.media
    assert (image.mime_type, image.source, image.size) == ("image/gif", "dot.gif", len(raw))
    assert result.output == "Read image dot.gif (image/gif, 14 B); it is attached for you to see."


async def test_a_file_named_like_an_image_that_is_not_one_is_refused(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "fake.png").write_text("just text", encoding="utf-8")

    result = await tool.execute({"file_path": "fake.png"}, ctx)

    assert result.error == "fake.png is not a PNG, JPEG, GIF or WebP image"


async def test_a_fifo_is_refused_at_once_instead_of_blocking(
    workspace: Path, ctx: ToolContext
) -> None:
    """Regression (#18): read_file on a FIFO hung the turn (and froze `cairn serve`)."""
    os.mkfifo(workspace / "pipe")

    result = await asyncio.wait_for(tool.execute({"file_path": "pipe"}, ctx), 30)

    assert result.error is not None
    assert "pipe is a FIFO, not a regular file" in result.error


async def test_a_symlink_to_a_fifo_is_refused_too(workspace: Path, ctx: ToolContext) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "link").symlink_to(workspace / "pipe")

    result = await asyncio.wait_for(tool.execute({"file_path": "link"}, ctx), 30)

    assert result.error is not None and "FIFO" in result.error


async def test_the_event_loop_keeps_running_while_a_file_is_read(
    workspace: Path, ctx: ToolContext
) -> None:
    """Reads happen in a worker thread: other tasks (the daemon's /health) keep running."""
    (workspace / "big.txt").write_text("line\n" * 200_000)

    result, ran = await run_counting_other_tasks(
        tool.execute({"file_path": "big.txt", "limit": 1}, ctx)
    )

    assert result.error is None
    assert ran > 0
