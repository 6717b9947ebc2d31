"""What the scripted server recorded about one HTTP request."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Headers", "RecordedRequest", "message_text"]

PURPOSE_HEADER = "x-cairn-purpose"
SESSION_HEADER = "x-cairn-session-id"


class Headers(Mapping[str, str]):
    """Request headers looked up case-insensitively; repeated headers are joined with ``", "``."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._names: dict[str, str] = {}
        self._values: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            if key in self._values:
                self._values[key] = f"{self._values[key]}, {value}"
            else:
                self._names[key] = name
                self._values[key] = value

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._names.values())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it, recorded before it was answered.

    ``index`` is the request's position in the list it was recorded in (``server.requests`` for
    chat completions), so a handler can script "first call → tool call, second → answer".
    ``connection`` numbers the TCP connection it arrived on (equal numbers: keep-alive reuse).
    """

    method: str
    path: str
    headers: Headers
    body: Any
    raw: bytes
    received_at: float
    index: int
    connection: int = 0

    @property
    def wire(self) -> str:
        """``anthropic`` for a Messages API request (``POST …/messages``), else ``openai``."""
        return "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"

    @property
    def purpose(self) -> str | None:
        """The ``X-Cairn-Purpose`` header: ``main``, ``recall-selector``, ``extract``, ..."""
        return self.headers.get(PURPOSE_HEADER)

    @property
    def session_id(self) -> str | None:
        return self.headers.get(SESSION_HEADER)

    @property
    def model(self) -> str | None:
        value = self._field("model")
        return value if isinstance(value, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self._field("messages")
        return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        value = self._field("tools")
        return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []

    @property
    def tool_names(self) -> list[str]:
        """The names of the declared tools, in order."""
        return [_function_name(tool) for tool in self.tools]

    @property
    def system(self) -> str | None:
        """The system prompt: the first system message, or the Anthropic ``system`` field."""
        for message in self.messages:
            if message.get("role") == "system":
                return message_text(message)
        system = self._field("system")
        if system is None:
            return None
        return message_text({"content": system})

    @property
    def stream(self) -> bool:
        return self._field("stream") is True

    @property
    def max_tokens(self) -> int | None:
        value = self._field("max_tokens")
        if value is None:
            value = self._field("max_completion_tokens")
        return value if isinstance(value, int) else None

    @property
    def temperature(self) -> float | None:
        value = self._field("temperature")
        return float(value) if isinstance(value, int | float) else None

    @property
    def images(self) -> list[str]:
        """Every image of every message as a URL, in order (``data:`` URIs for inline ones).

        OpenAI ``image_url`` parts and Anthropic ``image`` blocks (in tool results too) alike.
        """
        urls: list[str] = []
        for message in self.messages:
            for part in _parts(message.get("content")):
                urls.extend(_image_urls(part))
        return urls

    def user_texts(self) -> list[str]:
        """The text of every user message, in order."""
        return [message_text(m) for m in self.messages if m.get("role") == "user"]

    def last_user_text(self) -> str:
        """The text of the last user message (``""`` when there is none)."""
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def contains(self, text: str) -> bool:
        """Whether ``text`` occurs in the content of any message (system, user, assistant, tool)."""
        return any(text in message_text(m) for m in self.messages)

    def _field(self, name: str) -> Any:
        return self.body.get(name) if isinstance(self.body, dict) else None


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text, whether ``content`` is a string or a list of parts (an Anthropic
    ``tool_result``'s own content included)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in _parts(content):
        if part.get("type") == "tool_result":
            texts.append(message_text(part))
        else:
            texts.append(str(part.get("text", "")))
    return "".join(texts)


def _parts(content: Any) -> list[dict[str, Any]]:
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def _image_urls(part: dict[str, Any]) -> list[str]:
    if part.get("type") == "tool_result":
        return [url for inner in _parts(part.get("content")) for url in _image_urls(inner)]
    image = part.get("image_url")
    if isinstance(image, dict) and isinstance(image.get("url"), str):
        return [image["url"]]
    source = part.get("source") if part.get("type") == "image" else None
    if isinstance(source, dict) and source.get("type") == "base64":
        return [f"data:{source.get('media_type')};base64,{source.get('data')}"]
    if isinstance(source, dict) and isinstance(source.get("url"), str):
        return [source["url"]]
    return []


def _function_name(tool: Mapping[str, Any]) -> str:
    """The tool's name: ``function.name`` on the OpenAI wire, ``name`` on Anthropic's."""
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return name if isinstance(name, str) else ""
