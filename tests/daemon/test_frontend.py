"""Approvals and answers by vote: first valid vote wins; cancel, close and timeout cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.daemon.errors import ApiError
from cairn.daemon.frontend import DaemonFrontend
from cairn.tools.base import FileDiff, Question, ToolKind
from cairn.vocabulary.interaction import PermissionRequest

REQUEST = PermissionRequest(
    call_id="c1",
    tool_name="write_file",
    title="Write a.txt",
    kind=ToolKind.EDIT,
    confirmation="edit",
    args={"file_path": "a.txt", "content": "x"},
    diff=FileDiff(Path("/w/a.txt"), None, "x"),
)


class Published:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.arrived = asyncio.Event()

    def __call__(self, kind: str, data: Mapping[str, Any]) -> None:
        self.events.append((kind, dict(data)))
        self.arrived.set()

    async def next_request(self) -> dict[str, Any]:
        while not any(k == "permission_request" for k, _ in self.events):
            self.arrived.clear()
            await self.arrived.wait()
        return next(d for k, d in self.events if k == "permission_request")

    def resolved(self) -> list[dict[str, Any]]:
        return [d for k, d in self.events if k == "permission_resolved"]


def selected(option: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option}}


async def ask(timeout: float = 10) -> tuple[DaemonFrontend, Published, asyncio.Task[Any], str]:
    published = Published()
    frontend = DaemonFrontend("s1", published, timeout=timeout)
    task = asyncio.ensure_future(frontend.request_permission(REQUEST))
    request = await published.next_request()
    return frontend, published, task, request["requestId"]


async def test_a_permission_request_is_published_with_the_call_and_options() -> None:
    _, published, task, _ = await ask()

    request = await published.next_request()
    assert request["sessionId"] == "s1"
    assert request["toolCall"]["toolCallId"] == "c1"
    assert request["toolCall"]["kind"] == "edit"
    assert request["toolCall"]["content"] == [
        {"type": "diff", "path": "/w/a.txt", "newText": "x"}
    ]
    assert [o["optionId"] for o in request["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]
    assert [o["kind"] for o in request["options"]] == ["allow_once", "allow_always", "reject_once"]
    task.cancel()


@pytest.mark.parametrize(
    ("option", "outcome"),
    [("allow_once", "allow_once"), ("allow_always", "allow_always"), ("reject_once", "reject")],
)
async def test_a_vote_resolves_the_request(option: str, outcome: str) -> None:
    frontend, published, task, request_id = await ask()

    assert frontend.vote(request_id, selected(option))

    assert await task == outcome
    [resolved] = published.resolved()
    assert resolved["outcome"] == {"outcome": "selected", "optionId": option}


async def test_the_first_vote_wins_and_later_votes_are_refused() -> None:
    frontend, _, task, request_id = await ask()

    assert frontend.vote(request_id, selected("reject_once"))
    assert not frontend.vote(request_id, selected("allow_once"))
    assert await task == "reject"


async def test_a_vote_for_an_unknown_request_is_refused() -> None:
    frontend, _, task, _ = await ask()

    assert not frontend.vote("nope", selected("allow_once"))
    task.cancel()


async def test_a_cancelled_vote_cancels() -> None:
    frontend, _, task, request_id = await ask()

    frontend.vote(request_id, {"outcome": {"outcome": "cancelled"}})

    assert await task == "cancelled"


@pytest.mark.parametrize(
    "body",
    [None, [], {"outcome": "allow"}, selected("maybe"), {"outcome": {"outcome": "selected"}}],
)
async def test_a_malformed_vote_is_a_400_and_leaves_the_request_open(body: Any) -> None:
    frontend, _, task, request_id = await ask()

    with pytest.raises(ApiError) as raised:
        frontend.vote(request_id, body)

    assert raised.value.status == 400 and raised.value.code == "invalid_vote"
    assert frontend.vote(request_id, selected("allow_once"))
    assert await task == "allow_once"


async def test_an_unanswered_request_times_out_as_cancelled() -> None:
    _, published, task, _ = await ask(timeout=0.05)

    assert await task == "cancelled"
    assert published.resolved()[0]["reason"] == "timeout"


async def test_cancel_all_resolves_open_requests_with_the_reason() -> None:
    frontend, published, task, _ = await ask()

    frontend.cancel_all("session_closed")

    assert await task == "cancelled"
    assert published.resolved()[0]["reason"] == "session_closed"
    assert frontend.pending == []


async def test_a_cancelled_turn_resolves_its_request_as_agent_cancelled() -> None:
    frontend, published, task, _ = await ask()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert published.resolved()[0]["reason"] == "agent_cancelled"
    assert frontend.pending == []


async def test_open_requests_are_listed_until_resolved() -> None:
    frontend, _, task, request_id = await ask()

    assert [p["requestId"] for p in frontend.pending] == [request_id]
    frontend.vote(request_id, selected("allow_once"))
    await task
    assert frontend.pending == []


async def test_questions_are_answered_by_a_vote_with_answers() -> None:
    published = Published()
    frontend = DaemonFrontend("s1", published, timeout=10)
    questions = [Question("Which database?", ["Postgres", "SQLite"], header="DB")]
    task = asyncio.ensure_future(frontend.ask_user(questions))
    request = await published.next_request()
    assert request["kind"] == "question"
    assert request["questions"] == [
        {
            "question": "Which database?",
            "header": "DB",
            "options": ["Postgres", "SQLite"],
            "multiSelect": False,
        }
    ]

    with pytest.raises(ApiError):
        frontend.vote(request["requestId"], {"answers": ["a", "b"]})
    frontend.vote(request["requestId"], {"answers": ["SQLite"]})

    assert await task == ["SQLite"]


async def test_a_cancelled_question_has_no_answers() -> None:
    published = Published()
    frontend = DaemonFrontend("s1", published, timeout=10)
    task = asyncio.ensure_future(frontend.ask_user([Question("Q?", ["a", "b"])]))
    request = await published.next_request()

    frontend.vote(request["requestId"], {"outcome": {"outcome": "cancelled"}})

    assert await task is None
