"""What the daemon SDK returns: small frozen dataclasses over the daemon's JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Capabilities", "DaemonEvent", "PromptAdmission", "SessionInfo"]


@dataclass(frozen=True)
class Capabilities:
    v: int
    mode: str
    features: frozenset[str]
    workspace_cwd: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def supports(self, feature: str) -> bool:
        return feature in self.features

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capabilities:
        features = data.get("features")
        return cls(
            v=int(data.get("v", 0)),
            mode=str(data.get("mode", "")),
            features=frozenset(f for f in features if isinstance(f, str))
            if isinstance(features, list)
            else frozenset(),
            workspace_cwd=str(data.get("workspaceCwd", "")),
            raw=dict(data),
        )


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    workspace_cwd: str
    attached: bool
    last_event_id: int
    approval_mode: str | None = None
    created_at: int | None = None  # milliseconds since the epoch
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    model: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionInfo:
        return cls(
            session_id=str(data["sessionId"]),
            workspace_cwd=str(data.get("workspaceCwd", "")),
            attached=bool(data.get("attached", False)),
            last_event_id=int(data.get("lastEventId", 0)),
            approval_mode=data.get("approvalMode"),
            created_at=data.get("createdAt"),
            raw=dict(data),
            model=data.get("model"),
        )


@dataclass(frozen=True)
class AvailableModel:
    model_id: str
    name: str
    description: str = ""


@dataclass(frozen=True)
class ModelList:
    """A session's model and the models it may switch to (``GET /session/{id}/model``)."""

    current: str
    available: tuple[AvailableModel, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelList:
        return cls(
            current=str(data["currentModelId"]),
            available=tuple(
                AvailableModel(
                    str(m["modelId"]), str(m.get("name") or m["modelId"]), m.get("description", "")
                )
                for m in data.get("availableModels", [])
            ),
        )


@dataclass(frozen=True)
class PromptAdmission:
    """The daemon accepted a prompt: its id, and the event id to stream its turn from.
    ``replayed``: it had been admitted already under the same ``Idempotency-Key`` (a retry);
    ``state`` says how far it got, where the daemon knows (``queued``, ``running``, ``done``,
    ``interrupted`` ...). ``replica_id``: which replica admitted it (``--database``)."""

    prompt_id: str
    last_event_id: int
    replayed: bool = False
    state: str | None = None
    replica_id: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PromptAdmission:
        state, replica = data.get("state"), data.get("replicaId")
        return cls(
            prompt_id=str(data["promptId"]),
            last_event_id=int(data.get("lastEventId", 0)),
            replayed=data.get("replayed") is True,
            state=state if isinstance(state, str) else None,
            replica_id=replica if isinstance(replica, str) else None,
        )


@dataclass(frozen=True)
class DaemonEvent:
    """One event-stream envelope. ``id`` is ``None`` for per-connection frames
    (``replay_complete``, ``slow_client_warning``, ``client_evicted`` ...)."""

    id: int | None
    type: str
    data: Mapping[str, Any]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def update_kind(self) -> str | None:
        """For ``session_update`` events: ``agent_message_chunk``, ``tool_call``, ``plan`` ..."""
        if self.type != "session_update":
            return None
        kind = self.data.get("sessionUpdate")
        return kind if isinstance(kind, str) else None

    @property
    def text(self) -> str:
        """The text of a message or thought chunk (empty for other events)."""
        content = self.data.get("content")
        if isinstance(content, Mapping) and isinstance(content.get("text"), str):
            return str(content["text"])
        return ""

    @property
    def final_text(self) -> str:
        """For ``turn_complete``: the turn's final assistant text (or a command's answer)."""
        value = self.data.get("text")
        return value if isinstance(value, str) and self.type == "turn_complete" else ""

    @property
    def prompt_id(self) -> str | None:
        value = self.data.get("promptId")
        return value if isinstance(value, str) else None
