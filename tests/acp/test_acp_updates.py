"""The runtime's payloads cross the ACP edge unchanged: SDK model round trips are exact.

The daemon publishes the payloads as they are and the ACP agent sends them through the SDK's
models; if a round trip changed one (a field at its default dropped, a key renamed), an editor
and a daemon client would see different things.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp.schema import PermissionOption
from acp.utils import serialize_params
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.acp.updates import mode_state_model, tool_call_model, update_model
from cairn.config.settings import APPROVAL_MODES
from cairn.recording.replay import ReplayItem
from cairn.session.commands import COMMANDS
from cairn.session.updates import (
    UpdateMapper,
    commands_update,
    mode_state,
    permission_options,
    permission_tool_call,
)
from cairn.tools.registry import default_registry
from cairn.vocabulary import (
    AssistantText,
    AssistantThought,
    FileDiff,
    Location,
    MemoryChanged,
    MemoryRecalled,
    MemoryRef,
    ModeChanged,
    Notice,
    PermissionRequest,
    PlanUpdate,
    RecapShown,
    TodoItem,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    Usage,
    UsageUpdate,
)

text = st.text(max_size=40)
paths = st.builds(lambda p: Path("/w") / p, st.text("abc/._", min_size=1, max_size=12))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
args = st.dictionaries(text, json_values, max_size=3)
locations = st.lists(
    st.builds(Location, paths, st.none() | st.integers(1, 10_000)), max_size=3
).map(tuple)
diffs = st.none() | st.builds(FileDiff, paths, st.none() | text, text)
todos = st.builds(
    TodoItem, text, text, st.sampled_from(["pending", "in_progress", "completed", "cancelled"])
)
memories = st.lists(
    st.builds(MemoryRef, text, st.sampled_from(["project", "user"]), text, text), max_size=3
).map(tuple)
events = st.one_of(
    st.builds(AssistantText, text),
    st.builds(AssistantThought, text),
    st.builds(
        ToolCallStart, text, text, text, st.sampled_from([*ToolKind, "custom"]), args, locations
    ),
    st.builds(
        ToolCallUpdate,
        text,
        st.sampled_from(["pending", "in_progress", "completed", "failed", "cancelled"]),
        st.none() | text,
        st.none() | text,
        diffs,
        locations,
    ),
    st.builds(PlanUpdate, st.lists(todos, max_size=4).map(tuple)),
    st.builds(Notice, st.sampled_from(["info", "warning", "error"]), text, text),
    st.builds(RecapShown, text, st.booleans()),
    st.builds(MemoryRecalled, memories, st.sampled_from(["fast", "refined"])),
    st.builds(
        MemoryChanged,
        st.sampled_from(["extract", "dream", "remember", "forget", "restore"]),
        memories,
        memories,
        memories,
    ),
    st.builds(ModeChanged, st.sampled_from(APPROVAL_MODES)),
    st.builds(UsageUpdate, st.just(Usage()), st.integers(-5, 10**7), st.integers(0, 10**7)),
)
replay_items = st.one_of(
    st.builds(
        ReplayItem, st.sampled_from(["user_text", "assistant_text", "thought", "recap"]), text
    ),
    st.builds(
        lambda call_id, name, call_args, result, error: ReplayItem(
            "tool_call",
            tool_call_id=call_id,
            tool_name=name,
            args=call_args,
            result=result,
            error=error,
        ),
        st.text(min_size=1, max_size=8),
        st.sampled_from(["read_file", "edit", "run_shell_command", "unknown_tool"]),
        args,
        st.none() | text,
        st.none() | text,
    ),
)


def wire(model: Any) -> dict[str, Any]:
    """What the SDK writes on the wire for a model."""
    return serialize_params(model)


@settings(max_examples=300, deadline=None)
@given(st.lists(events, max_size=6))
def test_every_event_payload_is_sent_exactly_as_built(stream: list[Any]) -> None:
    updates = UpdateMapper(default_registry())
    for event in stream:
        for payload in updates.event(event):
            assert wire(update_model(payload)) == payload


@settings(max_examples=200, deadline=None)
@given(st.lists(replay_items, max_size=6))
def test_every_replayed_payload_is_sent_exactly_as_built(items: list[ReplayItem]) -> None:
    for payload in UpdateMapper(default_registry()).replay(items):
        assert wire(update_model(payload)) == payload


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        PermissionRequest,
        text,
        st.sampled_from(["edit", "run_shell_command"]),
        text,
        st.sampled_from(list(ToolKind)),
        st.just("edit"),
        args,
        diffs,
    )
)
def test_permission_requests_are_sent_exactly_as_built(request: PermissionRequest) -> None:
    assert wire(tool_call_model(permission_tool_call(request))) == permission_tool_call(request)
    for option in permission_options(request):
        assert wire(PermissionOption.model_validate(option)) == option


def test_commands_and_modes_are_sent_exactly_as_built() -> None:
    payload = commands_update(COMMANDS)
    state = mode_state("default", APPROVAL_MODES)

    assert wire(update_model(payload)) == payload
    assert wire(mode_state_model(state)) == state
