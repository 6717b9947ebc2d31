"""The base of the memory tool wrappers: what a subclass does not change is the inner tool's."""

from __future__ import annotations

from pathlib import Path

from cairn.abort import AbortController
from cairn.memory.wrapped_tool import WrappedTool
from cairn.tools.base import ToolContext
from cairn.tools.write_file import WriteFileTool


async def test_a_wrapped_tool_describes_asks_previews_and_writes_as_the_tool_it_wraps(
    tmp_path: Path,
) -> None:
    inner = WriteFileTool()
    wrapped = WrappedTool(inner)
    ctx = ToolContext(workspace=tmp_path, abort=AbortController().signal)
    args = {"file_path": "notes.md", "content": "hello\n"}

    assert (wrapped.name, wrapped.kind) == (inner.name, inner.kind)
    assert (wrapped.description, wrapped.parameters) == (inner.description, inner.parameters)
    assert wrapped.title(args) == inner.title(args)
    assert wrapped.confirmation(args, ctx) == inner.confirmation(args, ctx)
    assert wrapped.locations(args, ctx) == inner.locations(args, ctx)
    preview = await wrapped.preview(args, ctx)
    assert preview is not None and preview == await inner.preview(args, ctx)

    result = await wrapped.execute(args, ctx)

    assert result.error is None
    assert (tmp_path / "notes.md").read_text(encoding="utf-8") == "hello\n"
