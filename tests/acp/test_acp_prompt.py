"""ACP prompt content blocks as a session PromptRequest."""

from __future__ import annotations

from pathlib import Path

from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from cairn.acp.prompt import MAX_ATTACHED_FILE_CHARS, build_prompt_request
from cairn.content import Text
from cairn.tools.base import LocalFileSystem


def text(value: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=value)


async def test_text_blocks_are_joined_with_a_space_and_sent_as_typed() -> None:
    request = await build_prompt_request([text("fix"), text("the bug")], LocalFileSystem())

    assert request.text == "fix the bug"
    assert request.parts is None
    assert request.fresh


async def test_a_linked_file_is_read_and_sent_inline(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("print(1)\n")
    link = ResourceContentBlock(type="resource_link", name="a.py", uri=path.as_uri())

    request = await build_prompt_request([text("explain"), link], LocalFileSystem())

    assert request.text == "explain"
    assert request.parts == [Text("explain"), Text(f'<file path="{path}">\nprint(1)\n\n</file>')]


async def test_a_link_that_cannot_be_read_stays_a_mention(tmp_path: Path) -> None:
    missing = tmp_path / "gone.py"
    link = ResourceContentBlock(type="resource_link", name="gone.py", uri=missing.as_uri())
    web = ResourceContentBlock(type="resource_link", name="docs", uri="https://example.com/x")

    request = await build_prompt_request([link, web], LocalFileSystem())

    assert request.parts == [Text(f"@{missing}"), Text("[docs](https://example.com/x)")]


async def test_an_embedded_file_is_sent_inline_and_clipped() -> None:
    big = "x" * (MAX_ATTACHED_FILE_CHARS + 5)
    block = EmbeddedResourceContentBlock(
        type="resource", resource=TextResourceContents(uri="file:///w/big.txt", text=big)
    )

    request = await build_prompt_request([block], LocalFileSystem())

    [part] = request.parts or []
    assert isinstance(part, Text)
    assert part.text.startswith('<file path="/w/big.txt">')
    assert "[… truncated]" in part.text


async def test_images_and_binary_attachments_are_named_not_sent() -> None:
    image = ImageContentBlock(type="image", data="aGk=", mime_type="image/png")
    blob = EmbeddedResourceContentBlock(
        type="resource", resource=BlobResourceContents(uri="file:///w/x.bin", blob="aGk=")
    )

    request = await build_prompt_request([text("look"), image, blob], LocalFileSystem())

    assert request.parts is not None
    assert "image omitted" in request.parts[1].text  # type: ignore[union-attr]
    assert "binary attachment file:///w/x.bin omitted" in request.parts[2].text  # type: ignore[union-attr]
