"""The SDK's models for the session runtime's payloads (:mod:`cairn.session.updates`).

The payloads are built once, in the runtime, for the ACP agent and the daemon alike; here they
only become the SDK's pydantic models the connection sends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Annotated, Any, TypeAlias

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionInfoUpdate,
    SessionModeState,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
)
from pydantic import Field, TypeAdapter

__all__ = [
    "SessionUpdate",
    "config_options_model",
    "mode_state_model",
    "tool_call_model",
    "update_model",
]

SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | SessionInfoUpdate
    | ConfigOptionUpdate
    | UsageUpdate
)
ConfigOption: TypeAlias = SessionConfigOptionSelect | SessionConfigOptionBoolean


@cache
def _updates() -> TypeAdapter[SessionUpdate]:
    return TypeAdapter(Annotated[SessionUpdate, Field(discriminator="session_update")])


def update_model(payload: Mapping[str, Any]) -> SessionUpdate:
    """A ``session/update`` payload as the SDK model of its ``sessionUpdate`` kind."""
    return _updates().validate_python(payload)


def tool_call_model(payload: Mapping[str, Any]) -> ToolCallUpdate:
    """The ``toolCall`` of ``session/request_permission``."""
    return ToolCallUpdate.model_validate(payload)


def mode_state_model(payload: Mapping[str, Any]) -> SessionModeState:
    return SessionModeState.model_validate(payload)


@cache
def _config_options() -> TypeAdapter[list[ConfigOption]]:
    return TypeAdapter(list[Annotated[ConfigOption, Field(discriminator="type")]])


def config_options_model(payloads: Sequence[Mapping[str, Any]]) -> list[ConfigOption]:
    """``configOptions`` (``session/new``, ``session/load``, ``session/set_config_option``)."""
    return _config_options().validate_python(payloads)
