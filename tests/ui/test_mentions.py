"""@path mentions: which files are attached to the prompt, and how."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.content import Text
from cairn.tools.base import LocalFileSystem
from cairn.ui.mentions import (
    BLOCK_END,
    BLOCK_START,
    MAX_MENTION_BYTES,
    find_mentions,
    resolve_mentions,
)

FS = LocalFileSystem()


def test_mentions_are_found_in_order_without_repeats_or_trailing_punctuation():
    text = "compare @a.py and @src/b.py, then @a.py again (see @docs/x.md)."

    assert find_mentions(text) == ["a.py", "src/b.py", "docs/x.md"]


def test_escaped_spaces_are_part_of_the_path():
    assert find_mentions(r"open @my\ notes.txt now") == ["my notes.txt"]


def test_an_email_address_is_not_a_mention():
    assert find_mentions("mail me@example.com") == []


@given(st.text())
def test_finding_mentions_never_raises(text):
    find_mentions(text)


async def test_file_contents_follow_the_typed_text(tmp_path):
    (tmp_path / "notes.txt").write_text("alpha\n")
    text = "summarise @notes.txt"

    result = await resolve_mentions(text, tmp_path, FS)

    assert result.attached == ["notes.txt"]
    assert result.parts is not None
    assert result.parts[0] == Text(text)
    attached = result.parts[1]
    assert isinstance(attached, Text)
    assert attached.text == f"\n{BLOCK_START}\nContent from @notes.txt:\nalpha\n\n{BLOCK_END}"


async def test_no_existing_file_means_no_extra_parts(tmp_path):
    result = await resolve_mentions("ping @someone", tmp_path, FS)

    assert result.parts is None
    assert result.warnings == []


async def test_a_folder_is_not_attached_and_is_reported(tmp_path):
    (tmp_path / "src").mkdir()

    result = await resolve_mentions("@src", tmp_path, FS)

    assert result.parts is None
    assert result.warnings == ["@src is a folder; mention the files in it to attach them."]


async def test_a_file_outside_the_workspace_is_not_attached(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")

    result = await resolve_mentions("@../secret.txt", workspace, FS)

    assert result.parts is None
    assert "outside the workspace" in result.warnings[0]


async def test_a_binary_file_is_not_attached(tmp_path):
    (tmp_path / "img.bin").write_bytes(b"\x89PNG\x00\x01\xff\xfe")

    result = await resolve_mentions("@img.bin", tmp_path, FS)

    assert result.parts is None
    assert result.warnings == ["@img.bin is not a text file; it was not attached."]


async def test_a_large_file_is_cut_with_a_warning(tmp_path):
    (tmp_path / "big.txt").write_text("x" * (MAX_MENTION_BYTES + 10))

    result = await resolve_mentions("@big.txt", tmp_path, FS)

    assert result.parts is not None
    body = result.parts[1]
    assert isinstance(body, Text)
    assert "x" * MAX_MENTION_BYTES + "\n[... cut at" in body.text
    assert "x" * (MAX_MENTION_BYTES + 1) not in body.text
    assert "only the first" in result.warnings[0]


async def test_escaped_space_mentions_are_read(tmp_path):
    (tmp_path / "with space.txt").write_text("hello")

    result = await resolve_mentions(r"@with\ space.txt", tmp_path, FS)

    assert result.attached == ["with space.txt"]
