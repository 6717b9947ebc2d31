"""The SDK's result types read the daemon's JSON defensively."""

from __future__ import annotations

from cairn.sdk import Capabilities, DaemonEvent, SessionInfo


def test_capabilities_ignore_features_that_are_not_strings() -> None:
    capabilities = Capabilities.from_json({"v": 1, "mode": "m", "features": ["a", 3, None]})

    assert capabilities.features == frozenset({"a"})
    assert not capabilities.supports("b")


def test_capabilities_without_features_support_nothing() -> None:
    assert Capabilities.from_json({}).features == frozenset()


def test_session_info_reads_the_session_body() -> None:
    info = SessionInfo.from_json(
        {"sessionId": "s", "workspaceCwd": "/w", "attached": True, "lastEventId": 4}
    )

    assert (info.session_id, info.workspace_cwd, info.attached, info.last_event_id) == (
        "s",
        "/w",
        True,
        4,
    )


def test_event_helpers_read_text_kind_and_prompt_id() -> None:
    chunk = DaemonEvent(
        1,
        "session_update",
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
    )
    done = DaemonEvent(2, "turn_complete", {"promptId": "p", "text": "final"})

    assert (chunk.update_kind, chunk.text, chunk.prompt_id) == ("agent_message_chunk", "hi", None)
    assert (done.update_kind, done.text, done.prompt_id, done.final_text) == (
        None,
        "",
        "p",
        "final",
    )
    assert chunk.final_text == ""
