"""Loading a recorded session: the active chain, the model history to resume with, the replay.

The active chain is found by walking ``parentUuid`` back from the last record, so records left
on a dead branch (after a rewind, or whose parent was superseded) are ignored. The model
history starts from the last ``chat_compression`` checkpoint on that chain (reference D.3).
Listing (``list_sessions``, ``latest_session``) lives in :mod:`cairn.recording.listing`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.content import Content, FunctionCall, FunctionResponse, function_calls
from cairn.debug_log import get_logger
from cairn.recording.records import (
    APPROVAL_MODE,
    ASSISTANT,
    CHAT_COMPRESSION,
    MID_TURN_USER_MESSAGE,
    SYSTEM,
    TOOL_RESULT,
    USER,
    message_of,
    mid_turn_content,
    parse_records,
    payload_of,
)
from cairn.recording.replay import ReplayItem, replay_items
from cairn.vocabulary.tool_names import ToolName

__all__ = [
    "ASK_USER_TOOL",
    "LoadedSession",
    "SessionLoadError",
    "load_session",
    "loaded_from_records",
    "pending_question",
    "recorded_approval_mode",
]

ASK_USER_TOOL = ToolName.ASK_USER_QUESTION  # its unanswered call is re-asked after a load
_MESSAGE_TYPES = (USER, ASSISTANT, TOOL_RESULT)  # record types whose message is model history

_log = get_logger("CHAT_RECORDING")


class SessionLoadError(Exception):
    """The recording cannot be read at all (missing file, no permission)."""


@dataclass
class LoadedSession:
    session_id: str
    records: list[dict[str, Any]]  # the active chain, oldest first
    history: list[Content]  # what the model sees on resume
    last_uuid: str | None  # the chain's tip: the parent of the next record
    items: list[ReplayItem] = field(default_factory=list)  # what a front end shows
    warnings: list[str] = field(default_factory=list)

    def context_tokens(self) -> int:
        """How full the context was where the chain ends, as the live status line said: the
        prompt tokens of its last answer, or what its last compression left (0: not known)."""
        for record in reversed(self.records):
            if record.get("type") == ASSISTANT:
                usage = record.get("usageMetadata")
                if isinstance(usage, Mapping):
                    tokens = usage.get("input_tokens") or usage.get("total_tokens")
                    if isinstance(tokens, int) and tokens > 0:
                        return tokens
            elif record.get("type") == SYSTEM and record.get("subtype") == CHAT_COMPRESSION:
                info = payload_of(record).get("info")
                tokens = info.get("newTokenCount") if isinstance(info, Mapping) else None
                return tokens if isinstance(tokens, int) and tokens > 0 else 0
        return 0


def recorded_approval_mode(loaded: LoadedSession) -> str | None:
    """The approval mode the session was last set to (``None``: never changed)."""
    for record in reversed(loaded.records):
        if record.get("type") == SYSTEM and record.get("subtype") == APPROVAL_MODE:
            mode = payload_of(record).get("mode")
            if isinstance(mode, str):
                return mode
    return None


def load_session(path: Path) -> LoadedSession:
    """Read ``path``; unreadable lines are skipped with a warning, never fatal."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SessionLoadError(f"no session recording at {path}") from None
    except OSError as exc:
        raise SessionLoadError(f"cannot read session recording {path}: {exc}") from exc
    records, warnings = parse_records(data)
    return loaded_from_records(path.stem, records, warnings, source=path.name)


def loaded_from_records(
    session_id: str,
    records: Sequence[dict[str, Any]],
    warnings: list[str] | None = None,
    *,
    source: str | None = None,
) -> LoadedSession:
    """A session from its records in the order they were written (any session store's)."""
    warnings = [] if warnings is None else warnings
    chain = _active_chain(records, warnings)
    history = _model_history(chain, warnings)
    for warning in warnings:
        _log.warning(f"{source or session_id}: {warning}")
    return LoadedSession(
        session_id=session_id,
        records=chain,
        history=history,
        last_uuid=chain[-1]["uuid"] if chain else None,
        items=replay_items(chain),
        warnings=warnings,
    )


def pending_question(loaded: LoadedSession) -> FunctionCall | None:
    """The last model entry's ``ask_user_question`` call that has no response yet."""
    last_model = next(
        (i for i in range(len(loaded.history) - 1, -1, -1) if loaded.history[i].role == "model"),
        None,
    )
    if last_model is None:
        return None
    answered = {
        part.id
        for entry in loaded.history[last_model + 1 :]
        for part in entry.parts
        if isinstance(part, FunctionResponse)
    }
    for call in function_calls(loaded.history[last_model]):
        if call.name == ASK_USER_TOOL and call.id not in answered:
            return call
    return None


def _active_chain(records: Sequence[dict[str, Any]], warnings: list[str]) -> list[dict[str, Any]]:
    by_uuid: dict[str, dict[str, Any]] = {}
    for record in records:
        earlier = by_uuid.get(record["uuid"])
        by_uuid[record["uuid"]] = _merge(earlier, record) if earlier else record
    if not records:
        return []
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: dict[str, Any] | None = by_uuid[records[-1]["uuid"]]
    while current is not None:
        chain.append(current)
        seen.add(current["uuid"])
        parent = current.get("parentUuid")
        if parent is None:
            break
        if parent in seen:
            warnings.append(f"record {current['uuid']} closes a parentUuid cycle; chain cut")
            break
        current = by_uuid.get(parent)
        if current is None:
            warnings.append(f"parent {parent} is missing; earlier history is not restored")
    chain.reverse()
    return chain


def _merge(first: dict[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """Records sharing a uuid (a streamed turn written in pieces) are one record."""
    merged = {**first, **{k: v for k, v in later.items() if k not in ("parentUuid", "model")}}
    first_message, later_message = first.get("message"), later.get("message")
    if isinstance(first_message, Mapping) and isinstance(later_message, Mapping):
        parts = [*(first_message.get("parts") or []), *(later_message.get("parts") or [])]
        merged["message"] = {**first_message, "parts": parts}
    return merged


def _model_history(chain: Sequence[Mapping[str, Any]], warnings: list[str]) -> list[Content]:
    start, history = _checkpoint(chain, warnings)
    for record in chain[start:]:
        record_type = record.get("type")
        if record_type in _MESSAGE_TYPES:
            _append_message(history, record, warnings)
        elif record_type == SYSTEM and record.get("subtype") == MID_TURN_USER_MESSAGE:
            _merge_mid_turn(history, record, warnings)
    return history


def _checkpoint(
    chain: Sequence[Mapping[str, Any]], warnings: list[str]
) -> tuple[int, list[Content]]:
    """Where the model history starts: after the last compression, from its compressed copy."""
    for index in range(len(chain) - 1, -1, -1):
        record = chain[index]
        if record.get("type") != SYSTEM or record.get("subtype") != CHAT_COMPRESSION:
            continue
        compressed = payload_of(record).get("compressedHistory")
        if isinstance(compressed, list):
            return index + 1, _contents(compressed, record, warnings)
        warnings.append(f"record {record['uuid']}: compression without compressedHistory")
    return 0, []


def _contents(raw: list[Any], record: Mapping[str, Any], warnings: list[str]) -> list[Content]:
    contents: list[Content] = []
    for position, entry in enumerate(raw):
        try:
            contents.append(Content.from_dict(entry))
        except (ValueError, TypeError, AttributeError):
            warnings.append(f"record {record['uuid']}: compressed entry {position} skipped")
    return contents


def _append_message(history: list[Content], record: Mapping[str, Any], warnings: list[str]) -> None:
    message = message_of(record)
    if message is None:
        warnings.append(f"record {record['uuid']}: {record.get('type')} without a valid message")
        return
    history.append(message)


def _merge_mid_turn(history: list[Content], record: Mapping[str, Any], warnings: list[str]) -> None:
    message = mid_turn_content(record)
    if message is None:
        warnings.append(f"record {record['uuid']}: mid-turn message without content skipped")
        return
    if history and history[-1].role == "user":
        history[-1] = Content("user", [*history[-1].parts, *message.parts])
    else:
        history.append(Content("user", list(message.parts)))
