"""ScriptedFrontend: the scripted person at the front end."""

from __future__ import annotations

import asyncio

import pytest

from cairn.testing import NEVER, ScriptedFrontend, UnexpectedRequest
from cairn.vocabulary import PermissionRequest, Question, ToolKind


def request(title: str = "Edit a.py") -> PermissionRequest:
    return PermissionRequest("c1", "edit", title, ToolKind.EDIT, "edit", {"file_path": "a.py"})


QUESTION = Question("Which database?", ["Postgres", "SQLite"])


async def test_scripted_answers_come_in_order_then_the_defaults() -> None:
    user = ScriptedFrontend(permissions=["reject", "allow_always"], answers=[["SQLite"], None])

    outcomes = [await user.request_permission(request()) for _ in range(3)]
    answers = [await user.ask_user([QUESTION]) for _ in range(3)]

    assert outcomes == ["reject", "allow_always", "allow_once"]
    assert answers == [["SQLite"], None, ["Postgres"]]  # the default: the first option
    assert user.asked == 6 and len(user.permission_requests) == 3 and len(user.questions) == 3


async def test_without_defaults_an_unscripted_request_fails_the_test_naming_it() -> None:
    user = ScriptedFrontend(default_permission=None, default_answer=None)

    with pytest.raises(UnexpectedRequest, match=r"Edit b\.py"):
        await user.request_permission(request("Edit b.py"))
    with pytest.raises(UnexpectedRequest, match="Which database"):
        await user.ask_user([QUESTION])


async def test_never_is_an_answer_that_waits_until_cancelled() -> None:
    user = ScriptedFrontend(permissions=[NEVER, "reject"])

    waiting = asyncio.ensure_future(user.request_permission(request()))
    await user.wait_until_asked()
    # The next request gets the next answer: the first took NEVER and is still waiting.
    assert await user.request_permission(request()) == "reject"
    assert not waiting.done()
    waiting.cancel()

    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_non_interactive_person_says_so() -> None:
    assert ScriptedFrontend(interactive=False).interactive is False
    assert ScriptedFrontend().interactive is True


async def test_waiting_for_a_request_that_never_comes_times_out() -> None:
    with pytest.raises(TimeoutError):
        await ScriptedFrontend().wait_until_asked(timeout=0.05)
