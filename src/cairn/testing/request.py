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
        """The text of the first system message, if there is one."""
        for message in self.messages:
            if message.get("role") == "system":
                return message_text(message)
        return None

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
        """The URL of every image part of every message, in order (``data:`` URIs for inline)."""
        urls: list[str] = []
        for message in self.messages:
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                image = part.get("image_url") if isinstance(part, dict) else None
                url = image.get("url") if isinstance(image, dict) else None
                if isinstance(url, str):
                    urls.append(url)
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
    """A chat message's text, whether ``content`` is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _function_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""
