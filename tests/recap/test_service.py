"""generate_session_recap, extract_recap and the /recap command, against the scripted model."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.abort import AbortController
from cairn.debug_log import bind_session, log_path
from cairn.recap.service import (
    RECAP_MAX_OUTPUT_TOKENS,
    RECAP_SYSTEM_PROMPT,
    RECAP_USER_PROMPT,
    Recap,
    extract_recap,
    generate_session_recap,
    plausible_recap,
    session_recap,
)
from cairn.session.commands import NO_RECAP_MESSAGE
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import Reply, ScriptedServer, error_reply, reply, tool_call
from cairn.testing.fixtures import TEST_MODEL
from cairn.vocabulary.events import Notice, RecapShown, SessionEvent

from .helpers import FAST_MODEL, make_runtime

RECAP = "<recap>Fixing the login bug. Next: run the auth tests.</recap>"


class Events:
    def __init__(self) -> None:
        self.items: list[SessionEvent] = []

    async def __call__(self, event: SessionEvent) -> None:
        self.items.append(event)

    def notices(self) -> list[str]:
        return [e.text for e in self.items if isinstance(e, Notice)]


async def talk(session: Session, server: ScriptedServer, *turns: tuple[str, str]) -> None:
    for prompt, answer in turns:
        server.enqueue(reply(answer), purpose="main")
        result = await session.prompt(PromptRequest(prompt), Events())
        assert result.stop_reason == "end_turn", result.error


# ----- extract_recap -----


def test_both_tags_give_the_text_inside() -> None:
    assert (
        extract_recap("thinking...\n<recap> Task. Next: step. </recap> bye") == "Task. Next: step."
    )


def test_tags_match_case_insensitively() -> None:
    assert extract_recap("<RECAP>Task.</Recap>") == "Task."


def test_the_first_pair_wins() -> None:
    assert extract_recap("<recap>one</recap><recap>two</recap>") == "one"


def test_only_an_opening_tag_gives_the_rest() -> None:
    assert extract_recap("preamble <recap>Task cut off by max tok") == "Task cut off by max tok"


def test_no_tag_gives_none() -> None:
    assert extract_recap("Here is my reasoning about the session.") is None


def test_an_empty_pair_gives_none() -> None:
    """The reference returned the literal '</recap>...' tail here; cairn shows nothing."""
    assert extract_recap("<recap></recap> trailing") is None


def test_a_blank_pair_gives_none() -> None:
    assert extract_recap("<recap>  \n </recap>") is None


@given(st.text())
def test_any_text_extracts_without_an_exception(raw: str) -> None:
    result = extract_recap(raw)

    assert result is None or (result and result == result.strip())


@given(st.text(), st.text().filter(lambda t: t.strip() and "</recap>" not in t.lower()), st.text())
def test_text_between_tags_is_returned_trimmed(before: str, inside: str, after: str) -> None:
    raw = f"{before.replace('<', '')}<recap>{inside}</recap>{after}"

    assert extract_recap(raw) == inside.strip()


@given(st.text().filter(lambda t: "<" not in t), st.text().filter(lambda t: "<" not in t))
def test_an_opening_tag_alone_returns_what_follows(before: str, rest: str) -> None:
    assert extract_recap(f"{before}<recap>{rest}") == (rest.strip() or None)


@given(st.text().filter(lambda t: "<recap>" not in t.lower()))
def test_text_without_an_opening_tag_is_none(raw: str) -> None:
    assert extract_recap(raw) is None


# ----- generate_session_recap -----


async def test_a_fresh_session_has_no_recap_and_asks_nothing(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()

    assert await generate_session_recap(session) is None
    assert scripted_server.requests_for("recap") == []


async def test_a_recap_is_one_side_query_without_tools_at_300_tokens(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "Looking at auth.py now."))
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    recap = await generate_session_recap(session)

    assert recap == "Fixing the login bug. Next: run the auth tests."
    [request] = scripted_server.requests_for("recap")
    assert request.tools == []
    assert request.max_tokens == RECAP_MAX_OUTPUT_TOKENS == 300
    assert request.temperature == pytest.approx(0.3)
    assert request.model == TEST_MODEL
    assert request.session_id == session.id
    assert request.system is not None and request.system.startswith(RECAP_SYSTEM_PROMPT)
    assert request.last_user_text() == RECAP_USER_PROMPT
    assert request.user_texts()[0] == "fix the login bug"  # the startup context is skipped


async def test_the_recap_runs_on_the_fast_model_when_one_is_set(
    scripted_server: ScriptedServer, workspace: Path, home: Path
) -> None:
    scripted_server.default = reply("ok")
    runtime = make_runtime(scripted_server, workspace, fast_model=FAST_MODEL)
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    await generate_session_recap(session)

    [request] = scripted_server.requests_for("recap")
    assert request.model == FAST_MODEL
    await runtime.aclose()


async def test_the_recap_prompt_carries_the_context_files_as_project_context(
    runtime: Runtime, scripted_server: ScriptedServer, workspace: Path
) -> None:
    (workspace / "CAIRN.md").write_text("Always use tabs in this project.\n")
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    await generate_session_recap(session)

    [request] = scripted_server.requests_for("recap")
    assert request.system is not None
    assert "Always use tabs in this project." in request.system
    assert request.system.index(RECAP_SYSTEM_PROMPT) == 0


async def test_tool_output_never_reaches_the_recap_query(
    runtime: Runtime, scripted_server: ScriptedServer, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("TOOL-OUTPUT-MARKER\n")
    session = runtime.new_session()
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": str(workspace / "notes.txt")}), purpose="main"
    )
    await talk(session, scripted_server, ("read my notes", "They mention a marker."))
    [_, second] = scripted_server.requests_for("main")
    assert second.contains("TOOL-OUTPUT-MARKER")  # the model itself did see the tool output
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    await generate_session_recap(session)

    [request] = scripted_server.requests_for("recap")
    assert not request.contains("TOOL-OUTPUT-MARKER")
    assert all(m.get("role") in ("system", "user", "assistant") for m in request.messages)


async def test_only_the_last_30_messages_are_sent_starting_at_a_user_message(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, *[(f"prompt {i}", f"answer {i}") for i in range(20)])
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    await generate_session_recap(session)

    [request] = scripted_server.requests_for("recap")
    dialog = [m for m in request.messages if m.get("role") != "system"][:-1]
    assert len(dialog) == 30
    assert request.user_texts()[0] == "prompt 5"


async def test_a_reply_without_tags_is_no_recap(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(reply("Let me think about what we did..."), purpose="recap")

    assert await generate_session_recap(session) is None


async def test_a_plausible_answer_without_tags_is_taken_as_the_recap(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    """Issue 33: a small local model answered a fine recap without the tags, and the daemon
    answered null while /recap said "Not enough conversation context"."""
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(
        reply("Fixing the login bug.\nNext: run the auth tests."), purpose="recap"
    )

    recap = await session_recap(session)

    assert recap == Recap("Fixing the login bug. Next: run the auth tests.")


async def test_an_answer_that_is_not_a_recap_says_what_the_model_wrote(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(reply("## Summary\n- fixed\n- tested"), purpose="recap")

    recap = await session_recap(session)

    assert recap.text is None
    assert recap.reason is not None
    assert recap.reason.startswith("The model did not answer with a recap (it wrote: '## Summary")


async def test_a_recap_cut_at_its_bound_says_so(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(Reply(text="We have been ", endless=True), purpose="recap")

    recap = await session_recap(session)

    assert recap.text is None
    assert recap.reason is not None and "cut at its output bound" in recap.reason
    assert scripted_server.requests_for("recap")[0].max_tokens == RECAP_MAX_OUTPUT_TOKENS


async def test_a_recap_the_model_is_too_slow_to_write_is_bounded_and_says_so(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    never = threading.Event()
    scripted_server.enqueue(Reply(text=RECAP, hold=never), purpose="recap")

    recap = await session_recap(session, timeout=0.2)

    assert recap == Recap(None, "The model did not write a recap within 0.2 s.")
    await scripted_server.async_wait_for_requests(1, purpose="recap")


async def test_a_failed_request_gives_its_reason(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(error_reply(400, "bad recap request"), purpose="recap")

    recap = await session_recap(session)

    assert recap.reason == "The recap request failed: HTTP 400: bad recap request"


@pytest.mark.parametrize(
    ("answer", "taken"),
    [
        ("Porting the parser to Rust. Next: fuzz the tokenizer.", True),
        ("正在修复登录错误。下一步：运行认证测试。", False),  # one word by whitespace: too short
        ("Let me look at what we did so far.", False),
        ("Sure! You were fixing the login bug.", False),
        ("Fixing the login bug and then", False),  # no sentence end: cut
        ("- fixed the bug\n- ran the tests.", False),
        ("We were fixing " + "the bug " * 60 + "today.", False),
        ("<recap></recap>", False),
    ],
)
def test_plausible_recap(answer: str, taken: bool) -> None:
    assert (plausible_recap(answer) is not None) is taken


async def test_a_model_error_is_no_recap_after_one_attempt(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(error_reply(503), purpose="recap")
    scripted_server.enqueue(reply(RECAP), purpose="recap")  # a retry would get this one

    assert await generate_session_recap(session) is None
    assert len(scripted_server.requests_for("recap")) == 1


async def test_the_recap_does_not_touch_the_session_history(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    before = [c.to_dict() for c in session.history]
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    await generate_session_recap(session)

    assert [c.to_dict() for c in session.history] == before


async def test_an_abort_during_the_query_gives_none_at_once(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(Reply(text=RECAP, delay=10), purpose="recap")
    controller = AbortController()
    task = asyncio.ensure_future(generate_session_recap(session, controller.signal))
    await scripted_server.async_wait_for_requests(1, purpose="recap")

    controller.abort("user_cancel")

    assert await asyncio.wait_for(task, 2) is None


async def test_an_aborted_signal_skips_the_query(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    controller = AbortController()
    controller.abort("user_cancel")

    assert await generate_session_recap(session, controller.signal) is None
    assert scripted_server.requests_for("recap") == []


async def test_cancelling_the_caller_propagates_and_stops_the_query(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(Reply(text=RECAP, delay=10), purpose="recap")
    task = asyncio.ensure_future(generate_session_recap(session))
    await scripted_server.async_wait_for_requests(1, purpose="recap")

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)


async def test_every_skip_reason_is_logged_under_session_recap(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    runtime.settings.model.skip_startup_context = True
    session = runtime.new_session()
    with bind_session(session.id):
        await generate_session_recap(session)  # nothing at all
    await talk(session, scripted_server, ("hi", "hello"))
    scripted_server.enqueue(reply("no tags"), purpose="recap")
    with bind_session(session.id):
        await generate_session_recap(session)
    scripted_server.enqueue(reply(""), purpose="recap")
    with bind_session(session.id):
        await generate_session_recap(session)
    controller = AbortController()
    controller.abort("user_cancel")
    with bind_session(session.id):
        await generate_session_recap(session, controller.signal)

    log = log_path(session.id).read_text()
    assert "[SESSION_RECAP] recap skipped: history too short (0 entries)" in log
    assert "[SESSION_RECAP] recap skipped: failed to extract <recap> tags" in log
    assert "[SESSION_RECAP] Recap generation failed:" in log  # an empty answer is an error
    assert "[SESSION_RECAP] recap skipped: aborted" in log


async def test_a_history_of_only_tool_traffic_is_skipped_as_no_dialog(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()  # the startup context alone: two entries, no dialog
    with bind_session(session.id):
        assert await generate_session_recap(session) is None

    log = log_path(session.id).read_text()
    assert "[SESSION_RECAP] recap skipped: no dialog messages after filtering" in log


# ----- the /recap command -----


async def test_recap_command_shows_the_recap_as_a_recap_not_a_notice(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(reply(RECAP), purpose="recap")
    events = Events()

    result = await session.prompt(PromptRequest("/recap"), events)

    assert result.handled_locally
    assert result.text == "Fixing the login bug. Next: run the auth tests."
    assert [e for e in events.items if isinstance(e, RecapShown)] == [RecapShown(result.text)]
    assert events.notices() == []
    assert len(scripted_server.requests_for("main")) == 1  # no model turn for the command


async def test_recap_command_says_the_real_reason_there_is_no_recap(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    """Issue 33: /recap said "Not enough conversation context" after a model answered
    something that was not a recap."""
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(reply("Let me think about what we did..."), purpose="recap")

    result = await session.prompt(PromptRequest("/recap"), Events())

    assert result.handled_locally
    assert result.text == (
        "The model did not answer with a recap (it wrote: 'Let me think about what we did...')."
    )


async def test_recap_command_without_enough_context_says_so(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()

    result = await session.prompt(PromptRequest("/recap"), Events())

    assert result.text == NO_RECAP_MESSAGE == "Not enough conversation context for a recap yet."


async def test_recap_command_is_refused_while_a_turn_runs(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    scripted_server.enqueue(Reply(text="slow answer", delay=1.0), purpose="main")
    turn = asyncio.ensure_future(session.prompt(PromptRequest("long task"), Events()))
    await scripted_server.async_wait_for_requests(1, purpose="main")
    events = Events()

    result = await asyncio.wait_for(session.prompt(PromptRequest("/recap"), events), 0.5)

    assert result.text == "Cannot run /recap while another operation is in progress."
    assert events.notices() == [result.text]
    assert scripted_server.requests_for("recap") == []
    assert (await turn).text == "slow answer"


async def test_the_recap_survives_resume_as_a_recap_item_never_a_user_line(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "On it."))
    scripted_server.enqueue(reply(RECAP), purpose="recap")
    await session.prompt(PromptRequest("/recap"), Events())
    await session.close()

    resumed = runtime.load_session(session.id)

    assert resumed.loaded is not None
    items = [(i.kind, i.text) for i in resumed.loaded.items]
    assert ("recap", "Fixing the login bug. Next: run the auth tests.") in items
    assert [t for kind, t in items if kind == "user_text"] == ["fix the login bug"]
    assert not any("/recap" in c.text for c in resumed.history)
    await resumed.close()


async def test_inline_reasoning_before_the_recap_never_becomes_the_recap(
    runtime: Runtime, scripted_server: ScriptedServer
) -> None:
    """Reasoning servers put ``<think>…</think>`` in the content; a draft recap in there must
    not be taken for the answer."""
    session = runtime.new_session()
    await talk(session, scripted_server, ("fix the login bug", "Looking at auth.py now."))
    thinking = "<think>Draft: <recap>Wrong draft.</recap> better to mention tests.</think>\n"
    scripted_server.enqueue(reply(chunks=[thinking[:9], thinking[9:], RECAP]), purpose="recap")

    recap = await generate_session_recap(session)

    assert recap == "Fixing the login bug. Next: run the auth tests."
