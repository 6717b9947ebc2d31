"""The one attachment builder: what a prompt attaches, read and shaped for the model.

Every front end builds its prompt here. A prompt is a list of content blocks in ACP's shape
(``{"type": "text", "text"}``, ``resource_link``, ``resource``, ``image``, ``audio``): the ACP
agent passes the editor's blocks, the daemon the blocks of its request body, and the terminal UI
and ``cairn -p`` one text block. In every block of text, ``@path`` mentions attach files too.

- Files (``@path`` mentions and ``file://`` resource links) are resolved inside the workspace and
  read through the session's :class:`~cairn.tools.base.FileSystem` (an editor's unsaved buffer
  wins). A path outside the workspace, a folder, a file a ``Read`` deny rule covers, a binary or
  a special file (a FIFO, a device) is not attached; the prompt says so in a warning.
- Embedded resources carry their own text; a binary one is named, not sent.
- Images (image blocks, embedded image resources, ``@picture.png``) are passed through as
  :class:`~cairn.content.Image` parts, checked and size-capped by :mod:`cairn.images` as every
  image is (one that cannot be sent is left out with a warning).
- Every attached text is cut at :data:`MAX_ATTACHED_CHARS`, with a note saying so.
- Lone surrogates in any text (valid JSON, not UTF-8) become U+FFFD
  (:func:`cairn.content.scrub_surrogates`), so one can never poison the history or the recording.

The model gets the prompt text, then one "referenced files" block holding every attached text
(the reference system's format), then the images. What Recall, hooks and the slash-command check
see is only the prompt's own text (the text blocks joined with a space).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cairn.content import Image, Part, Text, scrub_surrogates
from cairn.images import ImageError, image_from_bytes, is_image_path, load_image
from cairn.tools.base import FileSystem, ToolError, resolve_in_roots
from cairn.values import Value

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "MAX_ATTACHED_CHARS",
    "MAX_ATTACHED_FILES",
    "MAX_PROMPT_BLOCKS",
    "AttachmentError",
    "Attachments",
    "build_attachments",
    "find_mentions",
]

MAX_ATTACHED_CHARS = 200_000  # of one attached text; the rest is cut, with a note
MAX_ATTACHED_FILES = 20  # files one prompt attaches (mentions and links together)
MAX_PROMPT_BLOCKS = 256  # content blocks in one prompt
BLOCK_START = "--- Content from referenced files ---"
BLOCK_END = "--- End of content ---"
_MENTION = re.compile(r"(?:^|(?<=\s))@((?:\\ |[^\s])+)")
_TRAILING_PUNCTUATION = ",.;:!?)]}'\""
_BINARY_SNIFF_CHARS = 8192  # a NUL byte this early means the file is not text
_BYTES_PER_CHAR = 4  # the most bytes UTF-8 needs for one character


class AttachmentError(ValueError):
    """A content block that is not one (a front end answers it as a bad request)."""


Denied = Callable[[Path], bool]  # a deny rule covers reading this path


class Attachments(Value, frozen=False):
    """A built prompt: its text, the parts the model gets, and what happened on the way."""

    text: str  # the prompt's own text (text blocks joined with a space)
    parts: list[Part]  # what the model gets
    attached: list[str] = field(default_factory=list)  # what was attached, as the user named it
    warnings: list[str] = field(default_factory=list)  # what could not be attached, and why

    @property
    def plain(self) -> bool:
        """Nothing was attached: the text alone is the prompt."""
        return self.parts == [Text(self.text)]

    @property
    def empty(self) -> bool:
        """Nothing to send: no text (or only blanks) and nothing attached."""
        return all(isinstance(p, Text) and not p.text.strip() for p in self.parts)


def find_mentions(text: str) -> list[str]:
    """The paths of ``@path`` tokens (``\\ `` is an escaped space), in order, without repeats."""
    found: list[str] = []
    for match in _MENTION.finditer(text):
        raw = match.group(1).replace("\\ ", " ").rstrip(_TRAILING_PUNCTUATION)
        if raw and raw not in found:
            found.append(raw)
    return found


async def build_attachments(
    blocks: Sequence[Any],
    *,
    workspace: Path,
    fs: FileSystem,
    denied: Denied | None = None,
) -> Attachments:
    """Read what ``blocks`` attach; :class:`AttachmentError` names a malformed block."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str | bytes):
        raise AttachmentError("the prompt must be a list of content blocks")
    if len(blocks) > MAX_PROMPT_BLOCKS:
        raise AttachmentError(f"a prompt holds at most {MAX_PROMPT_BLOCKS} content blocks")
    builder = _Builder(workspace, fs, denied or _nothing_denied)
    for index, block in enumerate(blocks):
        await builder.add(index, block)
    await builder.attach_mentions()
    return builder.result()


def _nothing_denied(path: Path) -> bool:
    return False


class _Attached(Value, frozen=False):
    label: str  # "@src/a.py", or a resource's URI
    text: str


class _Builder:
    def __init__(self, workspace: Path, fs: FileSystem, denied: Denied) -> None:
        self.workspace = workspace
        self.fs = fs
        self.denied = denied
        self.texts: list[str] = []  # the prompt's own text blocks
        self.model_text: list[str] = []  # text blocks with links shown as @mentions
        self.files: list[_Attached] = []
        self.images: list[Image] = []
        self.attached: list[str] = []
        self.warnings: list[str] = []
        self._seen: set[Path] = set()

    # ----- blocks -----

    async def add(self, index: int, block: Any) -> None:
        where = f"prompt[{index}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            text = _string(block, "text", where)
            self.texts.append(text)
            self.model_text.append(text)
        elif kind == "resource_link":
            await self._link(block, where)
        elif kind == "resource":
            self._resource(block.get("resource"), where)
        elif kind == "image":
            self._image_block(block, where)
        elif kind == "audio":
            self.model_text.append("[audio omitted: cairn reads text and images only]")
            self.warnings.append("An audio attachment was left out: cairn reads text and images.")
        else:
            raise AttachmentError(
                f"{where} must be an object whose type is text, resource_link, resource, image "
                "or audio"
            )

    async def _link(self, block: Mapping[str, Any], where: str) -> None:
        uri = _string(block, "uri", where)
        if not uri:
            raise AttachmentError(f"{where}.uri must be a non-empty string")
        path = _file_path(uri)
        if path is None:  # a web page or another scheme: named for the model, not fetched
            name = block.get("name") if isinstance(block.get("name"), str) else uri
            self.model_text.append(f"[{name}]({uri})")
            return
        mention = self._mention_text(path)
        self.model_text.append(f"@{mention}")
        await self._attach_path(mention, path)

    def _resource(self, resource: Any, where: str) -> None:
        if not isinstance(resource, Mapping):
            raise AttachmentError(f"{where}.resource must be an object with a uri")
        uri = _string(resource, "uri", f"{where}.resource")
        path = _file_path(uri)
        label = uri if path is None else self._mention_text(path)
        if isinstance(resource.get("text"), str):
            self.model_text.append(f"@{label}")
            self._add_text(f"@{label}", resource["text"], name=label)
            return
        blob = resource.get("blob")
        if not isinstance(blob, str):
            raise AttachmentError(f"{where}.resource must have a text or a blob")
        mime = resource.get("mimeType")
        if isinstance(mime, str) and mime.startswith("image/"):
            self._image(mime, blob, label, where)
        else:
            self.model_text.append(f"[binary attachment {label} omitted]")
            self.warnings.append(f"{label} is binary; it was not attached.")

    def _image_block(self, block: Mapping[str, Any], where: str) -> None:
        mime = _string(block, "mimeType", where)
        data = _string(block, "data", where)
        uri = block.get("uri")
        path = _file_path(uri) if isinstance(uri, str) else None
        label = self._mention_text(path) if path is not None else uri
        self._image(mime, data, label if isinstance(label, str) else "image", where)

    def _image(self, mime: str, data: str, label: str, where: str) -> None:
        if not mime.startswith("image/"):
            raise AttachmentError(f"{where}.mimeType must be an image type, not {mime!r}")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise AttachmentError(f"{where}: the image data is not base64") from None
        try:
            image = image_from_bytes(raw, mime_type=mime, source=label)
        except ImageError as exc:
            self.warnings.append(f"{exc}; it was not attached.")
            return
        self.images.append(image)
        self.attached.append(label)

    # ----- files -----

    async def attach_mentions(self) -> None:
        for raw in find_mentions(" ".join(self.texts)):
            if len(self._seen) >= MAX_ATTACHED_FILES:
                break
            try:
                path = resolve_in_roots(raw, self.workspace, [self.workspace])
            except ToolError:
                if (self.workspace / Path(raw).expanduser()).exists():
                    self.warnings.append(f"@{raw} is outside the workspace; it was not attached.")
                continue
            if path.exists():  # else not a path at all (an @handle, a decorator): left as text
                await self._attach_path(raw, path)

    async def _attach_path(self, label: str, path: Path) -> None:
        if path in self._seen:
            return
        if len(self._seen) >= MAX_ATTACHED_FILES:
            self.warnings.append(
                f"@{label} was not attached: a prompt attaches at most {MAX_ATTACHED_FILES} files."
            )
            return
        problem = await self._problem(label, path)
        if problem is not None:
            self.warnings.append(problem)
            return
        self._seen.add(path)
        if is_image_path(path):
            await self._image_file(label, path)
            return
        read = await self._read(label, path)
        if read is not None:
            self._add_text(f"@{label}", read, name=label)

    async def _image_file(self, label: str, path: Path) -> None:
        try:
            image = await asyncio.to_thread(load_image, path, source=label)
        except ImageError as exc:
            self.warnings.append(f"@{exc}; it was not attached.")
            return
        self.images.append(image)
        self.attached.append(label)

    async def _problem(self, label: str, path: Path) -> str | None:
        try:
            resolved = resolve_in_roots(str(path), self.workspace, [self.workspace])
        except ToolError:
            return f"@{label} is outside the workspace; it was not attached."
        if self.denied(resolved):
            return f"@{label} is covered by a Read deny rule; it was not attached."
        try:
            mode = (await asyncio.to_thread(os.stat, resolved)).st_mode
        except OSError as exc:
            return f"@{label} cannot be read ({exc.strerror or exc}); it was not attached."
        if stat.S_ISDIR(mode):
            return f"@{label} is a folder; mention the files in it to attach them."
        if not stat.S_ISREG(mode):
            return f"@{label} is not a regular file; it was not attached."
        return None

    async def _read(self, label: str, path: Path) -> str | None:
        try:
            size = (await asyncio.to_thread(path.stat)).st_size
            if size > MAX_ATTACHED_CHARS * _BYTES_PER_CHAR:  # too big to read whole: its start
                text = await asyncio.to_thread(_read_start, path)
            else:
                text = await self.fs.read_text(path)
        except UnicodeDecodeError:
            self.warnings.append(f"@{label} is not a text file; it was not attached.")
            return None
        except OSError as exc:
            self.warnings.append(
                f"@{label} cannot be read ({exc.strerror or exc}); it was not attached."
            )
            return None
        if "\x00" in text[:_BINARY_SNIFF_CHARS]:
            self.warnings.append(f"@{label} is not a text file; it was not attached.")
            return None
        return text

    def _add_text(self, label: str, text: str, *, name: str | None = None) -> None:
        text = scrub_surrogates(text)
        if len(text) > MAX_ATTACHED_CHARS:
            self.warnings.append(
                f"{label} is longer than {MAX_ATTACHED_CHARS} characters; only its start was "
                "attached."
            )
            text = f"{text[:MAX_ATTACHED_CHARS]}\n[… cut at {MAX_ATTACHED_CHARS} characters]"
        self.files.append(_Attached(label, text))
        self.attached.append(name or label)

    def _mention_text(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.workspace.resolve()))
        except (ValueError, OSError):
            return str(path)

    # ----- the result -----

    def result(self) -> Attachments:
        text = " ".join(t for t in self.texts if t)
        model_text = " ".join(t for t in self.model_text if t)
        parts: list[Part] = [Text(model_text or text)]
        if self.files:
            body = "\n\n".join(f"Content from {f.label}:\n{f.text}" for f in self.files)
            parts.append(Text(f"\n{BLOCK_START}\n{body}\n{BLOCK_END}"))
        parts.extend(self.images)
        return Attachments(text, parts, self.attached, self.warnings)


def _string(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise AttachmentError(f"{where}.{key} must be a string")
    return scrub_surrogates(value)


def _file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if not parsed.scheme and uri.startswith("/"):
        return Path(uri)
    return None


def _read_start(path: Path) -> str:
    with path.open("rb") as file:
        data = file.read(MAX_ATTACHED_CHARS * _BYTES_PER_CHAR)
    return data.decode("utf-8", errors="ignore")
