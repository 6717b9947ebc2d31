"""The JSON bodies the daemon's routes accept, and turning a prompt body into a PromptRequest."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cairn.config.settings import APPROVAL_MODES
from cairn.content import Part, Text
from cairn.daemon.errors import ApiError
from cairn.session.session import PromptRequest

__all__ = [
    "ApprovalModeBody",
    "CreateSessionBody",
    "LoadSessionBody",
    "PromptBody",
    "check_approval_mode",
    "parse_body",
    "to_prompt_request",
]

MAX_PROMPT_BLOCKS = 256  # content blocks in one prompt
_Model = TypeVar("_Model", bound=BaseModel)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CreateSessionBody(_Body):
    cwd: str | None = None
    session_id: str | None = Field(default=None, alias="sessionId")
    approval_mode: str | None = Field(default=None, alias="approvalMode")


class LoadSessionBody(_Body):
    cwd: str | None = None
    approval_mode: str | None = Field(default=None, alias="approvalMode")


class PromptBody(_Body):
    prompt: str | list[dict[str, Any]] = ""  # may be empty only for retry / continueLastTurn
    retry: bool = False
    continue_last_turn: bool = Field(default=False, alias="continueLastTurn")
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ApprovalModeBody(_Body):
    mode: str


def parse_body(model: type[_Model], raw: Any) -> _Model:
    """Validate ``raw`` (parsed JSON, or ``None`` for an empty body) against ``model``."""
    try:
        return model.model_validate({} if raw is None else raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "body"
        raise ApiError(
            400, f"Invalid request body: {where}: {error['msg']}", "invalid_body"
        ) from None


def check_approval_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in APPROVAL_MODES:
        raise ApiError(
            400,
            f"Unknown approval mode {mode!r}; use one of {', '.join(APPROVAL_MODES)}.",
            "invalid_approval_mode",
        )
    return mode


def to_prompt_request(body: PromptBody) -> PromptRequest:
    """ACP content blocks (or a plain string) → the session's prompt.

    ``text`` blocks are the prompt; an embedded ``resource`` with text is added as context; a
    ``resource_link`` is mentioned by its URI. Images and audio are refused (400).
    """
    if body.retry or body.continue_last_turn:
        return PromptRequest(text="", retry=body.retry, continue_turn=body.continue_last_turn)
    if isinstance(body.prompt, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": body.prompt}]
    else:
        blocks = body.prompt
    if not blocks or len(blocks) > MAX_PROMPT_BLOCKS:
        raise ApiError(
            400, f"prompt must hold 1 to {MAX_PROMPT_BLOCKS} content blocks.", "invalid_prompt"
        )
    texts: list[str] = []
    parts: list[Part] = []
    for index, block in enumerate(blocks):
        text, part = _block(index, block)
        if text is not None:
            texts.append(text)
        parts.append(part)
    prompt_text = " ".join(t for t in texts if t)
    if not prompt_text.strip() and len(parts) == len(texts):
        raise ApiError(400, "The prompt is empty.", "invalid_prompt")
    if len(parts) == 1 and texts:
        return PromptRequest(text=prompt_text)
    return PromptRequest(text=prompt_text, parts=parts)


def _block(index: int, block: Any) -> tuple[str | None, Part]:
    where = f"prompt[{index}]"
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise ApiError(400, f"{where}.text must be a string.", "invalid_prompt")
        return text, Text(text)
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, dict) or not isinstance(resource.get("text"), str):
            raise ApiError(400, f"{where}.resource must have a uri and a text.", "invalid_prompt")
        uri = str(resource.get("uri", ""))
        return None, Text(f'<resource uri="{uri}">\n{resource["text"]}\n</resource>')
    if kind == "resource_link":
        uri = block.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ApiError(400, f"{where}.uri must be a non-empty string.", "invalid_prompt")
        return None, Text(f"@{_path_of(uri)}")
    if kind in ("image", "audio"):
        raise ApiError(400, f"{where}: {kind} blocks are not supported.", "unsupported_content")
    raise ApiError(
        400,
        f"{where} must be an object with type text, resource or resource_link.",
        "invalid_prompt",
    )


def _path_of(uri: str) -> str:
    return uri.removeprefix("file://")
