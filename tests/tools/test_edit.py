from __future__ import annotations

from pathlib import Path

import pytest

from cairn.tools.base import FileDiff, ToolContext
from cairn.tools.edit import EditTool

tool = EditTool()


@pytest.fixture
def source(workspace: Path) -> Path:
    path = workspace / "app.py"
    path.write_text("def main():\n    print('hi')\n    return 0\n", encoding="utf-8")
    return path


async def test_replaces_a_unique_match(source: Path, ctx: ToolContext) -> None:
    result = await tool.execute(
        {"file_path": "app.py", "old_string": "print('hi')", "new_string": "print('bye')"}, ctx
    )

    assert result.error is None
    assert result.output == "Edited app.py: replaced 1 occurrence."
    assert source.read_text(encoding="utf-8") == "def main():\n    print('bye')\n    return 0\n"


async def test_result_carries_the_diff_and_the_changed_line(source: Path, ctx: ToolContext) -> None:
    result = await tool.execute(
        {"file_path": "app.py", "old_string": "return 0", "new_string": "return 1"}, ctx
    )

    assert result.diff is not None
    assert result.diff.old_text == "def main():\n    print('hi')\n    return 0\n"
    assert result.diff.new_text.endswith("return 1\n")
    assert result.locations[0].line == 3


async def test_missing_text_is_an_error_about_exact_whitespace(
    source: Path, ctx: ToolContext
) -> None:
    result = await tool.execute(
        {"file_path": "app.py", "old_string": "print('hi')\nreturn 0", "new_string": "x"}, ctx
    )

    assert result.error is not None
    assert "0 occurrences" in result.error
    assert "whitespace and indentation" in result.error
    assert source.read_text(encoding="utf-8").count("print('hi')") == 1


async def test_several_matches_without_replace_all_is_an_error_giving_the_count(
    workspace: Path, ctx: ToolContext
) -> None:
    path = workspace / "a.txt"
    path.write_text("x = 1\nx = 1\nx = 1\n", encoding="utf-8")

    result = await tool.execute(
        {"file_path": "a.txt", "old_string": "x = 1", "new_string": "y"}, ctx
    )

    assert result.error is not None
    assert "Found 3 occurrences" in result.error
    assert "replace_all" in result.error
    assert path.read_text(encoding="utf-8") == "x = 1\nx = 1\nx = 1\n"


async def test_replace_all_replaces_every_match(workspace: Path, ctx: ToolContext) -> None:
    path = workspace / "a.txt"
    path.write_text("x = 1\nx = 1\nz\n", encoding="utf-8")

    result = await tool.execute(
        {"file_path": "a.txt", "old_string": "x = 1", "new_string": "y = 2", "replace_all": True},
        ctx,
    )

    assert result.output == "Edited a.txt: replaced 2 occurrences."
    assert path.read_text(encoding="utf-8") == "y = 2\ny = 2\nz\n"


async def test_replacement_text_is_literal_not_a_regex_template(
    workspace: Path, ctx: ToolContext
) -> None:
    path = workspace / "a.txt"
    path.write_text("price\n", encoding="utf-8")

    await tool.execute(
        {"file_path": "a.txt", "old_string": "price", "new_string": r"$1 \g<0>"}, ctx
    )

    assert path.read_text(encoding="utf-8") == "$1 \\g<0>\n"


async def test_identical_old_and_new_is_an_error(source: Path, ctx: ToolContext) -> None:
    result = await tool.execute(
        {"file_path": "app.py", "old_string": "main", "new_string": "main"}, ctx
    )

    assert result.error is not None
    assert "identical" in result.error


async def test_empty_old_string_creates_a_missing_file(workspace: Path, ctx: ToolContext) -> None:
    result = await tool.execute(
        {"file_path": "docs/new.md", "old_string": "", "new_string": "# Title\n"}, ctx
    )

    assert result.output == "Created docs/new.md."
    assert (workspace / "docs" / "new.md").read_text(encoding="utf-8") == "# Title\n"
    assert result.diff is not None
    assert result.diff.old_text is None


async def test_empty_old_string_on_an_existing_file_is_an_error(
    source: Path, ctx: ToolContext
) -> None:
    result = await tool.execute({"file_path": "app.py", "old_string": "", "new_string": "x"}, ctx)

    assert result.error is not None
    assert "already exists" in result.error
    assert source.read_text(encoding="utf-8").startswith("def main")


async def test_editing_a_missing_file_suggests_how_to_create_it(ctx: ToolContext) -> None:
    result = await tool.execute({"file_path": "nope.py", "old_string": "a", "new_string": "b"}, ctx)

    assert result.error is not None
    assert result.error.startswith("File not found: nope.py")
    assert "write_file" in result.error


async def test_crlf_file_matches_a_multiline_lf_old_string_and_keeps_crlf(
    workspace: Path, ctx: ToolContext
) -> None:
    """Regression: files were read with universal newlines, so every edit rewrote CRLF as LF."""
    path = workspace / "win.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")

    result = await tool.execute(
        {"file_path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"}, ctx
    )

    assert result.error is None
    assert path.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_preview_is_the_diff_and_leaves_the_file_alone(
    source: Path, ctx: ToolContext
) -> None:
    before = source.read_text(encoding="utf-8")

    diff = await tool.preview(
        {"file_path": "app.py", "old_string": "return 0", "new_string": "return 2"}, ctx
    )

    assert diff == FileDiff(source.resolve(), before, before.replace("return 0", "return 2"))
    assert source.read_text(encoding="utf-8") == before


async def test_preview_of_a_failing_edit_is_none(source: Path, ctx: ToolContext) -> None:
    assert (
        await tool.preview({"file_path": "app.py", "old_string": "zzz", "new_string": "y"}, ctx)
        is None
    )


async def test_editing_outside_the_workspace_is_refused(tmp_path: Path, ctx: ToolContext) -> None:
    outside = tmp_path / "other.txt"
    outside.write_text("a\n", encoding="utf-8")

    result = await tool.execute(
        {"file_path": str(outside), "old_string": "a", "new_string": "b"}, ctx
    )

    assert result.error is not None
    assert "outside" in result.error
    assert outside.read_text(encoding="utf-8") == "a\n"


def test_needs_edit_confirmation(ctx: ToolContext) -> None:
    assert tool.confirmation({}, ctx) == "edit"
