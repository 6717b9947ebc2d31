"""The conversation content model shared by every part of cairn.

A conversation is a list of :class:`Content` entries, each with a role (``user`` or ``model``)
and a list of parts. Parts are immutable, so a shallow copy of a history (new lists, same parts)
is as safe to hand out as a deep one, and much cheaper.

The JSON shape (``to_dict`` / ``from_dict``) follows the Gemini-style records the reference
system writes into its chat recordings, so a recording stays readable across both tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, TypeAlias

from cairn.values import Value

Role: TypeAlias = Literal["user", "model"]

__all__ = [
    "Content",
    "FunctionCall",
    "FunctionResponse",
    "Image",
    "Part",
    "Role",
    "Text",
    "Thought",
    "clip_text",
    "content_text",
    "function_calls",
    "insert_after_function_responses",
    "leading_function_responses",
    "part_from_dict",
    "scrub_surrogates",
]


class Text(Value):
    """Visible text."""

    text: str


class Thought(Value):
    """Model reasoning, never shown as an answer and never sent back as one.

    ``signature`` is the provider's proof that it wrote this reasoning (Anthropic's thinking
    blocks); it must go back unchanged with the conversation. ``redacted`` reasoning carries only
    the provider's encrypted form, in ``signature``.
    """

    text: str
    signature: str = ""
    redacted: bool = False


class Image(Value):
    """An image for the model: base64 ``data`` of ``mime_type`` (``image/png``, ``image/jpeg``...).

    ``source`` says where it came from (a path, a URI, an attachment name), for the note a
    text-only model gets instead and for people reading a recording.
    """

    mime_type: str
    data: str
    source: str = ""

    @property
    def size(self) -> int:
        """The decoded size in bytes (from the base64 length, without decoding)."""
        padding = self.data[-2:].count("=") if self.data else 0
        return max(0, len(self.data) * 3 // 4 - padding)


class FunctionCall(Value):
    """A tool call issued by the model; ``id`` pairs it with its :class:`FunctionResponse`."""

    id: str
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


class FunctionResponse(Value):
    """A tool result; ``response`` is ``{"output": str}`` on success or ``{"error": str}``.

    ``media`` holds images the tool returns to the model (``read_file`` of a picture).
    """

    id: str
    name: str
    response: Mapping[str, Any]
    media: tuple[Image, ...] = ()

    @property
    def is_error(self) -> bool:
        return "error" in self.response

    @property
    def text(self) -> str:
        value = self.response.get("output", self.response.get("error", ""))
        return value if isinstance(value, str) else str(value)

    @property
    def model_text(self) -> str:
        """What the model is sent: the output or error text, else the response as JSON."""
        for key in ("output", "error"):
            value = self.response.get(key)
            if isinstance(value, str):
                return value
        return json.dumps(dict(self.response), default=str)


Part: TypeAlias = Text | Thought | Image | FunctionCall | FunctionResponse


class Content(Value, frozen=False):
    """One history entry: a role and its parts."""

    role: Role
    parts: list[Part]

    def shallow_copy(self) -> Content:
        return Content(self.role, list(self.parts))

    @property
    def text(self) -> str:
        """The visible text of this entry (thoughts excluded)."""
        return content_text(self)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "parts": [part_to_dict(p) for p in self.parts]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Content:
        role = data.get("role")
        if role not in ("user", "model"):
            raise ValueError(f"content role must be 'user' or 'model', not {role!r}")
        raw_parts = data.get("parts") or []
        if not isinstance(raw_parts, list):
            raise ValueError("content parts must be a list")
        parts = [p for p in (part_from_dict(raw) for raw in raw_parts) if p is not None]
        return cls(role, parts)

    @classmethod
    def user(cls, *texts: str) -> Content:
        return cls("user", [Text(t) for t in texts])

    @classmethod
    def model(cls, *texts: str) -> Content:
        return cls("model", [Text(t) for t in texts])


def part_to_dict(part: Part) -> dict[str, Any]:
    match part:
        case Text(text):
            return {"text": text}
        case Thought(text, signature, redacted):
            data: dict[str, Any] = {"text": text, "thought": True}
            if signature:
                data["thoughtSignature"] = signature
            if redacted:
                data["redacted"] = True
            return data
        case Image():
            return {"inlineData": _image_to_dict(part)}
        case FunctionCall(id=call_id, name=name, args=args):
            return {"functionCall": {"id": call_id, "name": name, "args": dict(args)}}
        case FunctionResponse(id=call_id, name=name, response=response, media=media):
            body: dict[str, Any] = {"id": call_id, "name": name, "response": dict(response)}
            if media:
                body["parts"] = [{"inlineData": _image_to_dict(image)} for image in media]
            return {"functionResponse": body}
    raise TypeError(f"not a part: {part!r}")


def _image_to_dict(image: Image) -> dict[str, str]:
    data = {"mimeType": image.mime_type, "data": image.data}
    if image.source:
        data["displayName"] = image.source
    return data


def part_from_dict(data: Any) -> Part | None:
    """Read one part; parts of kinds cairn does not model (audio, files) are dropped (``None``)."""
    if not isinstance(data, Mapping):
        return None
    if "functionCall" in data:
        fc = _mapping(data["functionCall"])
        args = _mapping(fc.get("args"))
        return FunctionCall(str(fc.get("id") or ""), str(fc.get("name") or ""), dict(args))
    if "functionResponse" in data:
        fr = _mapping(data["functionResponse"])
        response = fr.get("response")
        if not isinstance(response, Mapping):
            response = {"output": "" if response is None else str(response)}
        nested = fr.get("parts")
        media = tuple(
            image
            for image in (_image_from(p) for p in (nested if isinstance(nested, list) else []))
            if image is not None
        )
        call_id, name = str(fr.get("id") or ""), str(fr.get("name") or "")
        return FunctionResponse(call_id, name, dict(response), media)
    if "inlineData" in data:
        return _image_from(data)
    text = data.get("text")
    if isinstance(text, str):
        if not data.get("thought"):
            return Text(text)
        signature = data.get("thoughtSignature")
        return Thought(
            text, signature if isinstance(signature, str) else "", data.get("redacted") is True
        )
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _image_from(part: Any) -> Image | None:
    """An ``inlineData`` part as an :class:`Image`; other media types are not modelled."""
    inline = _mapping(part.get("inlineData") if isinstance(part, Mapping) else None)
    mime, data = inline.get("mimeType"), inline.get("data")
    if not (isinstance(mime, str) and mime.startswith("image/") and isinstance(data, str)):
        return None
    source = inline.get("displayName")
    return Image(mime, data, source if isinstance(source, str) else "")


def content_text(content: Content) -> str:
    return "".join(p.text for p in content.parts if isinstance(p, Text))


def function_calls(content: Content) -> list[FunctionCall]:
    return [p for p in content.parts if isinstance(p, FunctionCall)]


def leading_function_responses(parts: Sequence[Part]) -> int:
    """How many parts at the start of ``parts`` are function responses."""
    count = 0
    for part in parts:
        if not isinstance(part, FunctionResponse):
            break
        count += 1
    return count


def insert_after_function_responses(parts: Sequence[Part], additions: Iterable[Part]) -> list[Part]:
    """Insert ``additions`` right after the leading function responses of ``parts``.

    Providers require tool results to follow the model's tool calls immediately, so anything
    cairn adds to a tool-result request (recalled memory, steering text, reminders) goes after
    them and before any other text. With no leading responses this is a prepend.
    """
    cut = leading_function_responses(parts)
    return [*parts[:cut], *additions, *parts[cut:]]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str from json.loads, only lone ones remain


def clip_text(text: str, limit: int, note: str) -> str:
    """``text`` cut to ``limit`` characters and followed by ``note``, in which ``{dropped}`` is
    how many were cut; ``text`` itself when it is no longer than ``limit``."""
    if len(text) <= limit:
        return text
    return text[:limit] + note.format(dropped=len(text) - limit)


def scrub_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (valid JSON, not UTF-8: ``"\\ud800"``) replaced by
    U+FFFD, so it can be recorded and sent; ``text`` itself when it holds none."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text
