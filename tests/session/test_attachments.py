"""The one attachment builder: @mentions, resource links, embedded resources and images."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.config.settings import Settings
from cairn.content import Image, Text
from cairn.session.attachments import (
    BLOCK_END,
    BLOCK_START,
    MAX_ATTACHED_CHARS,
    MAX_ATTACHED_FILES,
    AttachmentError,
    Attachments,
    build_attachments,
    find_mentions,
)
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.testing import ScriptedProvider, reply
from cairn.tools.base import LocalFileSystem

FS = LocalFileSystem()
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF"


class EditorBuffers:
    """A file system that serves an editor's unsaved buffers (as ACP's does)."""

    def __init__(self, buffers: dict[Path, str]) -> None:
        self.buffers = buffers

    async def read_text(self, path: Path) -> str:
        return self.buffers.get(path) or await FS.read_text(path)

    async def write_text(self, path: Path, content: str) -> None:
        raise AssertionError("attaching never writes")


async def attach(workspace: Path, *blocks: Any, fs: Any = FS) -> Attachments:
    return await build_attachments(list(blocks), workspace=workspace, fs=fs)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def referenced(*files: tuple[str, str]) -> Text:
    body = "\n\n".join(f"Content from {label}:\n{content}" for label, content in files)
    return Text(f"\n{BLOCK_START}\n{body}\n{BLOCK_END}")


# ----- @mentions -----


def test_mentions_are_found_in_order_without_repeats_or_trailing_punctuation() -> None:
    found = find_mentions("compare @a.py and @src/b.py, then @a.py again (see @docs/x.md).")

    assert found == ["a.py", "src/b.py", "docs/x.md"]


def test_escaped_spaces_are_part_of_the_path_and_emails_are_not_mentions() -> None:
    assert find_mentions(r"open @my\ notes.txt now") == ["my notes.txt"]
    assert find_mentions("mail me@example.com") == []


@given(st.text())
def test_finding_mentions_never_raises(value: str) -> None:
    find_mentions(value)


async def test_file_contents_follow_the_typed_text(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")

    result = await attach(tmp_path, text("summarise @notes.txt"))

    assert result.text == "summarise @notes.txt"
    assert result.attached == ["notes.txt"]
    assert result.parts == [Text("summarise @notes.txt"), referenced(("@notes.txt", "alpha\n"))]
    assert not result.plain


async def test_a_mention_that_names_no_file_leaves_the_text_as_it_is(tmp_path: Path) -> None:
    result = await attach(tmp_path, text("ping @someone"))

    assert result.plain and result.warnings == [] and result.parts == [Text("ping @someone")]


async def test_a_folder_is_not_attached_and_is_reported(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()

    result = await attach(tmp_path, text("@src"))

    assert result.plain
    assert result.warnings == ["@src is a folder; mention the files in it to attach them."]


async def test_a_file_outside_the_workspace_is_not_attached(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")

    result = await attach(workspace, text("@../secret.txt"))

    assert result.plain
    assert result.warnings == ["@../secret.txt is outside the workspace; it was not attached."]


async def test_a_symlink_out_of_the_workspace_is_not_followed(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("s3cret")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")

    result = await attach(workspace, text("@link.txt"))

    assert "s3cret" not in str(result.parts)
    assert "outside the workspace" in result.warnings[0]


async def test_a_binary_file_is_not_attached(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01\xff\xfe")

    result = await attach(tmp_path, text("@blob.bin"))

    assert result.plain
    assert result.warnings == ["@blob.bin is not a text file; it was not attached."]


async def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    """A named pipe must never be opened: reading one blocks until a writer comes."""
    os.mkfifo(tmp_path / "pipe")

    result = await attach(tmp_path, text("@pipe"))

    assert result.plain
    assert result.warnings == ["@pipe is not a regular file; it was not attached."]


async def test_a_long_file_is_cut_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * (MAX_ATTACHED_CHARS + 10))

    result = await attach(tmp_path, text("@big.txt"))

    body = result.parts[1]
    assert isinstance(body, Text)
    assert f"{'x' * MAX_ATTACHED_CHARS}\n[… cut at {MAX_ATTACHED_CHARS} characters]" in body.text
    assert "x" * (MAX_ATTACHED_CHARS + 1) not in body.text
    assert result.warnings == [
        f"@big.txt is longer than {MAX_ATTACHED_CHARS} characters; only its start was attached."
    ]


async def test_a_huge_file_is_read_only_as_far_as_the_cap(tmp_path: Path) -> None:
    (tmp_path / "huge.log").write_bytes(b"y" * (MAX_ATTACHED_CHARS * 8))

    result = await attach(tmp_path, text("@huge.log"))

    body = result.parts[1]
    assert isinstance(body, Text)
    assert len(body.text) < MAX_ATTACHED_CHARS + 200
    assert len(result.warnings) == 1


async def test_an_editor_buffer_wins_over_the_disk(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("on disk\n")
    editor = EditorBuffers({(tmp_path / "a.py").resolve(): "unsaved\n"})

    result = await attach(tmp_path, text("@a.py"), fs=editor)

    assert result.parts[1] == referenced(("@a.py", "unsaved\n"))


async def test_at_most_the_file_limit_is_attached(tmp_path: Path) -> None:
    names = [f"f{i}.txt" for i in range(MAX_ATTACHED_FILES + 2)]
    for name in names:
        (tmp_path / name).write_text(name)

    result = await attach(tmp_path, text(" ".join(f"@{n}" for n in names)))

    assert result.attached == names[:MAX_ATTACHED_FILES]


# ----- content blocks -----


async def test_a_resource_link_in_the_workspace_is_read_and_named_as_a_mention(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    link = {"type": "resource_link", "name": "a.py", "uri": (tmp_path / "src" / "a.py").as_uri()}

    result = await attach(tmp_path, text("explain"), link, text("please"))

    assert result.text == "explain please"
    assert result.parts == [
        Text("explain @src/a.py please"),
        referenced(("@src/a.py", "print(1)\n")),
    ]


async def test_a_link_and_a_mention_of_one_file_attach_it_once(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x\n")
    link = {"type": "resource_link", "name": "a.py", "uri": (tmp_path / "a.py").as_uri()}

    result = await attach(tmp_path, text("compare @a.py with"), link)

    assert result.attached == ["a.py"]


async def test_a_link_outside_the_workspace_or_on_the_web_is_named_not_read(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "other.py").write_text("secret\n")
    outside = {"type": "resource_link", "name": "other.py", "uri": (tmp_path / "other.py").as_uri()}
    web = {"type": "resource_link", "name": "docs", "uri": "https://example.com/x"}

    result = await attach(workspace, outside, web)

    assert result.parts == [Text(f"@{tmp_path / 'other.py'} [docs](https://example.com/x)")]
    assert result.warnings == [
        f"@{tmp_path / 'other.py'} is outside the workspace; it was not attached."
    ]


async def test_an_embedded_resource_carries_its_own_text(tmp_path: Path) -> None:
    block = {"type": "resource", "resource": {"uri": (tmp_path / "n.md").as_uri(), "text": "hi"}}

    result = await attach(tmp_path, text("see"), block)

    assert result.parts == [Text("see @n.md"), referenced(("@n.md", "hi"))]


async def test_an_embedded_binary_is_named_and_an_embedded_image_is_an_image(
    tmp_path: Path,
) -> None:
    data = base64.b64encode(PNG).decode()
    blob = {"type": "resource", "resource": {"uri": "file:///w/x.bin", "blob": "aGk="}}
    image = {
        "type": "resource",
        "resource": {"uri": "file:///w/p.png", "blob": data, "mimeType": "image/png"},
    }

    result = await attach(tmp_path, text("look"), blob, image)

    assert result.parts == [
        Text("look [binary attachment /w/x.bin omitted]"),
        Image("image/png", data, "/w/p.png"),
    ]


async def test_images_pass_through_as_image_parts(tmp_path: Path) -> None:
    """Regression: images were a placeholder in ACP and a 400 in the daemon."""
    (tmp_path / "shot.png").write_bytes(PNG)
    jpeg = base64.b64encode(JPEG).decode()
    block = {"type": "image", "mimeType": "image/jpeg", "data": jpeg}

    result = await attach(tmp_path, text("what is in @shot.png and this"), block)

    assert result.parts == [
        Text("what is in @shot.png and this"),
        Image("image/jpeg", jpeg, "image"),
        Image("image/png", base64.b64encode(PNG).decode(), "shot.png"),
    ]
    assert result.attached == ["image", "shot.png"]


async def test_an_image_that_is_not_one_is_left_out_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_text("plain text")
    block = {"type": "image", "mimeType": "image/png", "data": "aGk="}

    result = await attach(tmp_path, text("see @fake.png"), block)

    assert result.parts == [Text("see @fake.png")]
    assert result.warnings == [
        "image (said to be image/png) is not a PNG, JPEG, GIF or WebP image; it was not attached.",
        "@fake.png is not a PNG, JPEG, GIF or WebP image; it was not attached.",
    ]


async def test_audio_is_named_with_a_warning(tmp_path: Path) -> None:
    result = await attach(
        tmp_path, text("listen"), {"type": "audio", "mimeType": "a/b", "data": ""}
    )

    assert result.parts == [Text("listen [audio omitted: cairn reads text and images only]")]
    assert result.warnings


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text"},
        {"type": "nope"},
        "text",
        {"type": "resource_link", "uri": ""},
        {"type": "resource", "resource": {"uri": "x"}},
        {"type": "image", "mimeType": "text/plain", "data": "aGk="},
        {"type": "image", "mimeType": "image/png", "data": "not base64!"},
    ],
)
async def test_a_malformed_block_is_an_attachment_error(tmp_path: Path, block: Any) -> None:
    with pytest.raises(AttachmentError):
        await attach(tmp_path, block)


async def test_an_empty_prompt_is_empty_and_a_link_alone_is_not(tmp_path: Path) -> None:
    link = {"type": "resource_link", "name": "d", "uri": "https://example.com"}

    assert (await attach(tmp_path, text("  "))).empty
    assert not (await attach(tmp_path, link)).empty


blocks = st.lists(
    st.one_of(
        st.dictionaries(
            st.sampled_from(["type", "text", "uri", "name", "data", "mimeType"]),
            st.one_of(st.text(max_size=20), st.integers(), st.none()),
        ),
        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)}),
        st.fixed_dictionaries(
            {"type": st.just("resource_link"), "uri": st.text(max_size=30), "name": st.text()}
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("resource"),
                "resource": st.dictionaries(
                    st.sampled_from(["uri", "text", "blob", "mimeType"]), st.text(max_size=20)
                ),
            }
        ),
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(blocks)
async def test_any_blocks_give_attachments_or_a_clear_error(
    tmp_path_factory: pytest.TempPathFactory, value: list[Any]
) -> None:
    workspace = tmp_path_factory.getbasetemp()
    try:
        result = await build_attachments(value, workspace=workspace, fs=FS)
    except AttachmentError as exc:
        assert str(exc)
        return
    assert result.parts


# ----- through a session -----


async def test_a_session_refuses_files_its_read_deny_rules_cover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("hunter2")
    settings_ = Settings.model_validate({"permissions": {"deny": ["Read(secret/**)"]}})
    runtime = Runtime(
        cwd=tmp_path, settings=settings_, provider=ScriptedProvider(reply("ok")), record_chats=False
    )
    session = runtime.new_session()

    result = await session.attach_text("read @secret/key.txt")

    assert "hunter2" not in str(result.parts)
    assert result.warnings == [
        "@secret/key.txt is covered by a Read deny rule; it was not attached."
    ]
    await session.close()
    await runtime.aclose()


async def test_a_prompt_request_keeps_the_typed_text_and_the_warnings(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "dir").mkdir()

    request = PromptRequest.attaching(await attach(tmp_path, text("@a.txt and @dir")))

    assert request.text == "@a.txt and @dir"
    assert request.display_text == "@a.txt and @dir"
    assert request.parts == [Text("@a.txt and @dir"), referenced(("@a.txt", "A"))]
    assert request.warnings == ("@dir is a folder; mention the files in it to attach them.",)
    assert request.fresh


# ----- lone surrogates (#18) -----

with_surrogates = st.lists(st.characters(categories=["Cs"]) | st.characters(), max_size=30).map(
    "".join
)


async def test_lone_surrogates_in_a_prompt_become_replacement_characters(tmp_path: Path) -> None:
    """Regression (#18): a lone surrogate in a prompt (valid JSON, not UTF-8) reached the
    history, so that turn and every later one failed writing the recording."""
    resource = {"type": "resource", "resource": {"uri": "file:///x/n.txt", "text": "b\ud800"}}

    result = await attach(tmp_path, text("look \udfff here"), resource)

    assert result.text == "look \ufffd here"
    assert result.parts == [
        Text("look \ufffd here @/x/n.txt"),
        referenced(("@/x/n.txt", "b\ufffd")),
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(with_surrogates, min_size=1, max_size=4))
async def test_every_prompt_text_can_be_recorded_as_utf8(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str]
) -> None:
    workspace = tmp_path_factory.getbasetemp()
    blocks = [text(t) for t in texts]
    blocks.append({"type": "resource", "resource": {"uri": "file:///x", "text": texts[0]}})

    result = await build_attachments(blocks, workspace=workspace, fs=FS)

    result.text.encode("utf-8")
    for part in result.parts:
        assert isinstance(part, Text)
        part.text.encode("utf-8")
