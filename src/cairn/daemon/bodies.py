"""The JSON bodies the daemon's routes accept, and turning a prompt body into a PromptRequest.

The bodies are :class:`cairn.config.Section` classes (the settings' strict reader: ``"retry":
"yes"`` is an error, not ``true``; each field read by its camelCase key or its name) with unknown
keys refused, and their errors worded as pydantic words them. Pydantic itself (importing it and
building five models: about a third of ``cairn serve``'s start-up CPU) is not loaded.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.config import APPROVAL_MODES, Field, Section, ValidationError
from cairn.daemon.errors import ApiError
from cairn.session.attachments import AttachmentError
from cairn.session.session import PromptRequest, Session

if TYPE_CHECKING:
    from cairn.mcp.config import ServerConfig

__all__ = [
    "ApprovalModeBody",
    "CreateSessionBody",
    "LoadSessionBody",
    "ModelBody",
    "PromptBody",
    "check_approval_mode",
    "check_idempotency_key",
    "check_mcp_servers",
    "parse_body",
    "prompt_digest",
    "to_prompt_request",
]

_Model = TypeVar("_Model", bound=Section)
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as Stripe's keys

# A field's key is its name in camelCase (``session_id``: ``sessionId``) unless it says otherwise.


class CreateSessionBody(Section):
    cwd: str | None = None
    session_id: str | None = None
    approval_mode: str | None = None
    mcp_servers: list[Any] = Field(default_factory=list)  # ACP's shape


class LoadSessionBody(Section):
    cwd: str | None = None
    approval_mode: str | None = None
    mcp_servers: list[Any] = Field(default_factory=list)


def check_mcp_servers(entries: list[Any], route: str) -> list[ServerConfig]:
    """The client's MCP servers (ACP ``session/new`` shape); a bad entry is a 400 naming it."""
    if not entries:
        return []  # the MCP configuration code is imported only for a body that names servers
    from cairn.mcp.config import McpConfigError, servers_from_client

    try:
        return servers_from_client(entries, source=f"POST {route}")
    except McpConfigError as exc:
        raise ApiError(400, f"Invalid request body: {exc}", "invalid_mcp_servers") from None


class PromptBody(Section):
    prompt: str | list[dict[str, Any]] = ""  # may be empty only for retry / continueLastTurn
    retry: bool = False
    continue_last_turn: bool = False
    meta: dict[str, Any] | None = Field(None, alias="_meta")


class ApprovalModeBody(Section):
    mode: str


class ModelBody(Section):
    model_id: str


def parse_body(model: type[_Model], raw: Any) -> _Model:
    """Validate ``raw`` (parsed JSON, or ``None`` for an empty body) against ``model``; the
    first problem is a 400 naming its field (a key the body does not have is one)."""
    data = {} if raw is None else raw
    try:
        body = model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "body"
        raise _invalid(f"{where}: {error['msg']}") from None
    # A field given by both its key and its name is read by its key; the name is then unknown.
    twice = {
        name
        for name, info in model.model_fields.items()
        if info.alias != name and info.alias in data
    }
    unknown = [key for key in data if key in body.model_extra or key in twice]
    if unknown:
        raise _invalid(f"{unknown[0]}: Extra inputs are not permitted")
    return body


def _invalid(problem: str) -> ApiError:
    return ApiError(400, f"Invalid request body: {problem}", "invalid_body")


def check_approval_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in APPROVAL_MODES:
        raise ApiError(
            400,
            f"Unknown approval mode {mode!r}; use one of {', '.join(APPROVAL_MODES)}.",
            "invalid_approval_mode",
        )
    return mode


async def to_prompt_request(body: PromptBody, session: Session) -> PromptRequest:
    """ACP content blocks (or a plain string) → the session's prompt, built by the session's
    one attachment builder; a malformed block or an empty prompt is a 400."""
    if body.retry or body.continue_last_turn:
        return PromptRequest(text="", retry=body.retry, continue_turn=body.continue_last_turn)
    prompt = body.prompt
    blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt
    if not blocks:
        raise ApiError(400, "The prompt is empty.", "invalid_prompt")
    try:
        attachments = await session.attach(blocks)
    except AttachmentError as exc:
        raise ApiError(400, f"Invalid prompt: {exc}.", "invalid_prompt") from None
    if attachments.empty:
        raise ApiError(400, "The prompt is empty.", "invalid_prompt")
    return PromptRequest.attaching(attachments)


def check_idempotency_key(value: str | None) -> str | None:
    """A prompt's ``Idempotency-Key`` header: 1-255 visible ASCII characters (400 otherwise)."""
    if value is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise ApiError(
            400,
            "Idempotency-Key must be 1-255 visible ASCII characters (a UUID is a good key).",
            "invalid_idempotency_key",
        )
    return value


def prompt_digest(raw: Any) -> str:
    """What a prompt's body was, for telling a retry (same body) from a key used twice."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
