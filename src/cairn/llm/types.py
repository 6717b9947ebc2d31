"""Provider-neutral request and stream types, and the :class:`Provider` protocol."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol, TypeAlias

from cairn.content import Content, FunctionCall
from cairn.values import Value
from cairn.vocabulary.retries import describe_retry
from cairn.vocabulary.usage import Usage

__all__ = [
    "INVALID_ARGUMENTS_KEY",
    "Finished",
    "ListedModel",
    "ModelRequest",
    "Provider",
    "StreamEvent",
    "StreamRetry",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallDelta",
    "ToolDeclaration",
    "Usage",
]

# A tool call whose arguments were not a JSON object carries them under this key, raw, so the
# scheduler can answer the call with an error the model can correct.
INVALID_ARGUMENTS_KEY = "__invalid_arguments__"


class ToolDeclaration(Value):
    name: str
    description: str
    parameters: Mapping[str, Any]


class ListedModel(Value):
    """One model an endpoint lists (``GET /models``); ``name`` is its display name, if any."""

    id: str
    name: str = ""


class ModelRequest(Value, frozen=False):
    """One request to the model. ``purpose`` names the feature that pays for it."""

    model: str
    contents: Sequence[Content]
    system: str | None = None
    tools: Sequence[ToolDeclaration] = ()
    purpose: str = "main"
    session_id: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    response_schema: Mapping[str, Any] | None = None  # answer with one JSON object of this shape
    max_attempts: int | None = None  # None: the provider's configured budget
    allow_thinking: bool = True  # extended thinking, where configured (off for side queries)
    # Called once the request is written to the endpoint (each attempt): Recall's refinement
    # waits for the turn's first request to be out before it ranks the selector's candidates.
    on_sent: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def json_mode(self) -> bool:
        """Whether the answer must be a JSON object (see :mod:`cairn.llm.structured`)."""
        return self.response_schema is not None


class TextDelta(Value):
    text: str


class ThoughtDelta(Value):
    """Reasoning text as it streams. A delta with a ``signature`` closes the current block of
    reasoning: the provider's proof of it, to be sent back with it (``redacted``: the block is
    only that encrypted form)."""

    text: str
    signature: str = ""
    redacted: bool = False


class ToolCallDelta(Value):
    """A complete tool call, emitted once the stream has finished assembling it."""

    call: FunctionCall


class Finished(Value):
    """The stream ended normally; ``reason``: ``stop``, ``tool_calls``, ``length`` or ``filter``."""

    reason: str
    usage: Usage = field(default_factory=Usage)


class StreamRetry(Value):
    """The attempt failed and will be retried: discard anything streamed so far.

    ``attempt`` is the attempt that comes next, of ``max_attempts`` in its budget.
    """

    attempt: int
    delay: float
    reason: str
    max_attempts: int = 0

    def describe(self) -> str:
        """``retrying in 4 s (attempt 3 of 7): HTTP 500: overloaded``."""
        return describe_retry(self.delay, self.attempt, self.max_attempts, self.reason)


StreamEvent: TypeAlias = TextDelta | ThoughtDelta | ToolCallDelta | Finished | StreamRetry


class Provider(Protocol):
    """A chat model endpoint. Implementations own the wire format, streaming and retries.

    ``model`` is the model new requests go to (settable: ``/model`` switches it);
    ``fast_model`` is the side-query model (``None``: the main one). Every request carries an
    output bound (:mod:`cairn.llm.limits`).
    """

    model: str
    fast_model: str | None

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one response. Raises :class:`cairn.llm.errors.ProviderError` on failure."""
        ...

    def on_usage(self, observer: Callable[[ModelRequest, Usage], None]) -> None:
        """Tell ``observer`` what every answer streamed from now on used (its
        :class:`Finished` usage; :mod:`cairn.llm.ledger`)."""
        ...

    async def warm_up(self) -> None:
        """Prepare for the first request (open a connection); best effort, never raises."""
        ...

    async def list_models(self) -> list[ListedModel]:
        """The models the endpoint lists. Raises :class:`cairn.llm.errors.ProviderError`."""
        ...

    def context_window(self, model: str) -> int | None:
        """The context window the endpoint serves ``model`` with, as far as it has said
        (asked, or named in a refusal); ``None``: not known. Never waits."""
        ...

    async def learn_context_window(self, model: str) -> int | None:
        """Ask the endpoint for ``model``'s context window (once; later calls share the
        answer). Bounded, never raises; ``None`` when it does not say."""
        ...

    async def aclose(self) -> None: ...
