"""AgentClient.send and its gates, against the in-process scripted provider.

What is observed: the events ``send`` yields, the requests the scripted provider received, and
the client's history afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from cairn.abort import AbortController, Aborted, AbortSignal
from cairn.agent.client import (
    INTERRUPTED_CALL_ERROR,
    MAX_RECENT_TOOL_NAMES,
    AgentClient,
    AgentCompressed,
    AgentEvent,
    AgentFinished,
    AgentLimit,
    AgentLoop,
    AgentToolCall,
    SendKind,
)
from cairn.agent.compression import SUMMARY_ACK, CompressionStatus
from cairn.config.settings import Settings
from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text
from cairn.llm.errors import ContextOverflowError
from cairn.llm.types import ModelRequest, ToolDeclaration, Usage
from cairn.testing import Reply, ScriptedProvider, ToolCallSpec, error_reply, reply, tool_calls
from cairn.vocabulary.events import AssistantText, StreamReset

from ..polling import eventually_async
from ..recall_helpers import RecordingRecall

SUMMARY = "<state_snapshot>the user wants a calculator</state_snapshot>"
TOOLS = [ToolDeclaration("read_file", "Read a file", {"type": "object", "properties": {}})]


# ----- helpers -----


def _settings(**model: Any) -> Settings:
    return Settings.model_validate({"model": model})


def _client(
    provider: ScriptedProvider,
    *,
    settings: Settings | None = None,
    history: Sequence[Content] = (),
    recall: RecordingRecall | None = None,
    **kwargs: Any,
) -> AgentClient:
    return AgentClient(
        provider=provider,
        settings=settings or _settings(),
        session_id="session-1",
        system_prompt="You are a test agent.",
        tools=lambda: TOOLS,
        history=history,
        recall=recall,
        **kwargs,
    )


async def _send(
    client: AgentClient,
    parts: Sequence[Part],
    kind: SendKind = SendKind.USER_QUERY,
    abort: AbortSignal | None = None,
) -> list[AgentEvent]:
    signal = abort or AbortController().signal
    return [event async for event in client.send(parts, kind=kind, abort=signal)]


def _main_requests(provider: ScriptedProvider) -> list[ModelRequest]:
    return provider.requests_for("main")


def _last_user_parts(request: ModelRequest) -> list[Part]:
    last = request.contents[-1]
    assert last.role == "user"
    return last.parts


def _usage(prompt_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": 5}


def _conversation(turns: int) -> list[Content]:
    """A finished conversation of ``turns`` exchanges (enough text to be worth compressing)."""
    entries: list[Content] = []
    for i in range(turns):
        entries.append(Content.user(f"question {i}: " + "words " * 40))
        entries.append(Content.model(f"answer {i}: " + "more words " * 40))
    return entries


# ----- the basic exchange -----


async def test_the_request_carries_system_prompt_tools_and_history() -> None:
    provider = ScriptedProvider(reply("Hello!"))
    client = _client(provider, history=[Content.user("earlier"), Content.model("ok")])

    await _send(client, [Text("hi")])

    [request] = provider.requests
    assert request.system == "You are a test agent."
    assert [t.name for t in request.tools] == ["read_file"]
    assert request.session_id == "session-1"
    assert request.purpose == "main"
    assert [c.text for c in request.contents] == ["earlier", "ok", "hi"]


async def test_the_answer_joins_the_history_and_is_reported() -> None:
    provider = ScriptedProvider(reply("Hello!", usage=_usage(42)))
    reported: list[tuple[Content, str, Usage]] = []
    client = _client(provider, on_assistant=lambda c, m, u: reported.append((c, m, u)))

    events = await _send(client, [Text("hi")])

    assert events[0] == AssistantText("Hello!")
    finished = events[-1]
    assert isinstance(finished, AgentFinished)
    assert (finished.reason, finished.text, finished.calls) == ("stop", "Hello!", ())
    assert client.history.shallow() == [Content.user("hi"), Content.model("Hello!")]
    [(content, model, usage)] = reported
    assert content == Content.model("Hello!")
    assert model == "scripted-model"
    assert usage.input_tokens == 42
    assert client.last_prompt_tokens == 42


async def test_tool_calls_are_streamed_and_kept_with_the_answer() -> None:
    provider = ScriptedProvider(
        tool_calls(ToolCallSpec("read_file", {"file_path": "a.txt"}, "c1"), text="Reading.")
    )
    client = _client(provider)

    events = await _send(client, [Text("read a.txt")])

    call = FunctionCall("c1", "read_file", {"file_path": "a.txt"})
    assert AgentToolCall(call) in events
    finished = events[-1]
    assert isinstance(finished, AgentFinished)
    assert finished.calls == (call,)
    assert finished.reason == "tool_calls"
    assert client.history.last() == Content("model", [Text("Reading."), call])


async def test_an_aborted_signal_stops_before_any_request() -> None:
    provider = ScriptedProvider(reply("never"))
    client = _client(provider)
    controller = AbortController()
    controller.abort("user_cancel")

    with pytest.raises(Aborted):
        await _send(client, [Text("hi")], abort=controller.signal)

    assert provider.requests == []
    assert len(client.history) == 0


# ----- max session turns -----


async def test_max_session_turns_yields_a_limit_before_any_request() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, settings=_settings(maxSessionTurns=1))
    await _send(client, [Text("first")])

    events = await _send(client, [Text("second")], SendKind.CONTINUATION)

    [limit] = events
    assert isinstance(limit, AgentLimit)
    assert limit.kind == "max_session_turns"
    assert "Reached the session limit of 1 model requests" in limit.message
    assert len(provider.requests) == 1
    assert [c.text for c in client.history.shallow()] == ["first", "ok"]


async def test_a_retry_does_not_count_as_a_session_turn() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, settings=_settings(maxSessionTurns=1))
    await _send(client, [Text("first")])
    client.history.truncate(0)

    events = await _send(client, [Text("first")], SendKind.RETRY)

    assert isinstance(events[-1], AgentFinished)
    assert len(provider.requests) == 2


async def test_a_negative_max_session_turns_means_no_limit() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, settings=_settings(maxSessionTurns=-1))

    for i in range(3):
        events = await _send(client, [Text(f"prompt {i}")])
        assert isinstance(events[-1], AgentFinished)

    assert len(provider.requests) == 3


# ----- session token limit -----


async def test_the_session_token_limit_refuses_once_the_last_prompt_exceeds_it() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(501)))
    client = _client(provider, settings=_settings(sessionTokenLimit=500))
    await _send(client, [Text("first")])

    events = await _send(client, [Text("second")])

    [limit] = events
    assert isinstance(limit, AgentLimit)
    assert limit.kind == "session_token_limit"
    assert "501 tokens > 500 limit" in limit.message
    assert len(provider.requests) == 1
    assert [c.text for c in client.history.shallow()] == ["first", "ok"]


async def test_a_prompt_exactly_at_the_session_token_limit_is_sent() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(500)))
    client = _client(provider, settings=_settings(sessionTokenLimit=500))
    await _send(client, [Text("first")])

    events = await _send(client, [Text("second")])

    assert isinstance(events[-1], AgentFinished)
    assert len(provider.requests) == 2


# ----- dangling calls -----


def _interrupted_history() -> list[Content]:
    return [
        Content.user("read both files"),
        Content(
            "model",
            [
                FunctionCall("c1", "read_file", {"file_path": "a.txt"}),
                FunctionCall("c2", "read_file", {"file_path": "b.txt"}),
            ],
        ),
    ]


async def test_dangling_calls_are_answered_with_errors_before_the_other_parts() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, history=_interrupted_history())

    await _send(client, [Text("go on")], SendKind.CONTINUATION)

    assert _last_user_parts(provider.requests[0]) == [
        FunctionResponse("c1", "read_file", {"error": INTERRUPTED_CALL_ERROR}),
        FunctionResponse("c2", "read_file", {"error": INTERRUPTED_CALL_ERROR}),
        Text("go on"),
    ]


async def test_only_the_unanswered_calls_get_an_error_after_the_given_responses() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, history=_interrupted_history())
    answered = FunctionResponse("c1", "read_file", {"output": "A"})

    await _send(client, [answered, Text("note")], SendKind.TOOL_RESULT)

    assert _last_user_parts(provider.requests[0]) == [
        answered,
        FunctionResponse("c2", "read_file", {"error": INTERRUPTED_CALL_ERROR}),
        Text("note"),
    ]


# ----- the final send point (where the session's turn adds recalled memory) -----


async def test_the_parts_at_the_send_point_are_the_ones_sent() -> None:
    """Moved here from the Recall tests: Recall's tool-result delivery is the turn's
    (tests/session/test_turn.py); the client gives it the parts at the final send point."""
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider, history=_interrupted_history()[:1])
    response = FunctionResponse("c1", "read_file", {"output": "A"})
    seen: list[list[Part]] = []

    async def at_send_point(parts: list[Part]) -> list[Part]:
        seen.append(list(parts))
        return [*parts, Text("added at the send point")]

    signal = AbortController().signal
    send = client.send(
        [response], kind=SendKind.TOOL_RESULT, abort=signal, at_send_point=at_send_point
    )
    events = [event async for event in send]

    assert isinstance(events[-1], AgentFinished)
    assert seen == [[response]]
    assert _last_user_parts(provider.requests[0]) == [response, Text("added at the send point")]


async def test_the_send_point_is_not_reached_when_a_gate_refuses_the_request() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(900)))
    client = _client(provider, settings=_settings(sessionTokenLimit=500))
    await _send(client, [Text("first")])
    reached: list[list[Part]] = []

    async def at_send_point(parts: list[Part]) -> list[Part]:
        reached.append(parts)
        return parts

    response = FunctionResponse("c1", "read_file", {"output": "x"})
    signal = AbortController().signal
    send = client.send(
        [response], kind=SendKind.TOOL_RESULT, abort=signal, at_send_point=at_send_point
    )
    events = [event async for event in send]

    assert isinstance(events[0], AgentLimit)
    assert reached == []


async def test_a_failing_recall_is_no_delivery() -> None:
    client = _client(ScriptedProvider(), recall=RecordingRecall(fail=True))

    assert await client.consume_recall("tool_result") is None


async def test_begin_recall_passes_the_query_and_the_recent_tools() -> None:
    recall = RecordingRecall()
    client = _client(ScriptedProvider(), recall=recall)
    client.record_completed_tool_call("read_file")

    client.begin_recall("how do we deploy?", AbortController().signal)

    assert recall.begun == [("how do we deploy?", ["read_file"])]


async def test_begin_recall_does_nothing_while_recall_is_disabled() -> None:
    recall = RecordingRecall()
    client = _client(ScriptedProvider(), recall=recall, recall_enabled=lambda: False)

    client.begin_recall("how do we deploy?", AbortController().signal)

    assert recall.begun == []


async def test_attach_recall_gives_a_client_without_recall_its_handle() -> None:
    provider = ScriptedProvider(reply("ok"))
    client = _client(provider)
    recall = RecordingRecall()

    client.attach_recall(lambda: recall)
    client.attach_recall(lambda: RecordingRecall(prompt="another"))  # the first one stays
    delivery = await client.consume_recall("tool_result")

    assert recall.consumed == ["tool_result"]
    assert delivery is not None and delivery.prompt == recall.prompt


# ----- recent tools -----


def test_recent_tools_keep_the_last_twenty_distinct_names_most_recent_last() -> None:
    client = _client(ScriptedProvider())
    names = [f"tool_{i}" for i in range(MAX_RECENT_TOOL_NAMES + 5)]

    for name in names:
        client.record_completed_tool_call(name)
    client.record_completed_tool_call("tool_10")  # again: moves to the end, no duplicate

    expected = [n for n in names[-MAX_RECENT_TOOL_NAMES:] if n != "tool_10"] + ["tool_10"]
    assert MAX_RECENT_TOOL_NAMES == 20
    assert client.recent_tools == expected
    assert client.stats.tool_call_count == len(names) + 1


def test_blank_tool_names_are_not_recorded() -> None:
    client = _client(ScriptedProvider())

    client.record_completed_tool_call("  ")
    client.record_completed_tool_call(" grep_search ")

    assert client.recent_tools == ["grep_search"]


def test_recent_tools_are_seeded_from_the_answered_calls_of_a_resumed_history() -> None:
    history = [
        Content.user("look around"),
        Content("model", [FunctionCall("c1", "list_directory"), FunctionCall("c2", "glob")]),
        Content(
            "user",
            [
                FunctionResponse("c1", "list_directory", {"output": "a"}),
                FunctionResponse("c2", "glob", {"error": "bad pattern"}),
            ],
        ),
        Content("model", [FunctionCall("c3", "read_file"), FunctionCall("c4", "list_directory")]),
        Content("user", [FunctionResponse("c4", "list_directory", {"output": "b"})]),
        Content("model", [FunctionCall("c5", "edit")]),  # interrupted: never answered
    ]

    client = _client(ScriptedProvider(), history=history)

    assert client.recent_tools == ["glob", "list_directory"]
    assert client.stats.tool_call_count == 0


# ----- retries -----


async def test_a_stream_retry_discards_the_partial_text() -> None:
    provider = ScriptedProvider()
    provider.enqueue(
        reply(chunks=["partial ", "answer"], drop_after_chunks=1),
        reply(chunks=["final ", "answer"]),
    )
    client = _client(provider)

    events = await _send(client, [Text("hi")])

    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "AssistantText",
        "StreamReset",
        "AssistantText",
        "AssistantText",
        "AgentFinished",
    ]
    assert isinstance(events[1], StreamReset) and events[1].attempt == 2
    finished = events[-1]
    assert isinstance(finished, AgentFinished) and finished.text == "final answer"
    assert client.history.last() == Content.model("final answer")
    assert len(provider.requests) == 2


# ----- loop detection -----


async def test_repeated_identical_tool_calls_report_a_loop_and_keep_the_model_entry() -> None:
    same = [ToolCallSpec("read_file", {"file_path": "a.txt"}, f"c{i}") for i in range(6)]
    provider = ScriptedProvider(tool_calls(*same))
    client = _client(provider)

    events = await _send(client, [Text("read it")])

    loop = events[-1]
    assert isinstance(loop, AgentLoop)
    assert loop.info.loop_type == "consecutive_identical_tool_calls"
    assert not any(isinstance(e, AgentFinished) for e in events)
    last = client.history.last()
    assert last is not None and last.role == "model"
    assert [p.id for p in last.parts if isinstance(p, FunctionCall)] == [
        "c0",
        "c1",
        "c2",
        "c3",
        "c4",
    ]


async def test_chanting_the_same_text_reports_a_loop_and_keeps_what_was_said() -> None:
    sentence = "I will now check the file again to be really sure. "
    provider = ScriptedProvider(reply(chunks=[sentence] * 30))
    client = _client(provider)

    events = await _send(client, [Text("check")])

    loop = events[-1]
    assert isinstance(loop, AgentLoop)
    assert loop.info.loop_type == "chanting_identical_sentences"
    streamed = "".join(e.text for e in events if isinstance(e, AssistantText))
    assert client.history.last() == Content.model(streamed)
    assert len(streamed) < len(sentence) * 30  # the stream was cut at the loop


async def test_two_edits_alternating_across_answers_report_a_cycle() -> None:
    """Issue 33: A, B, A in one answer and B, A, B in the next ran on until the context
    overflowed; the cycle is a loop once it came round three times."""
    a = ToolCallSpec("edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})
    b = ToolCallSpec("edit", {"file_path": "a.py", "old_string": "x = 2", "new_string": "x = 1"})
    provider = ScriptedProvider()
    provider.enqueue(tool_calls(a, b, a), tool_calls(b, a, b))
    client = _client(provider)

    first = await _send(client, [Text("fix it")])
    calls = [p for p in client.history.last().parts if isinstance(p, FunctionCall)]  # type: ignore[union-attr]
    answers: list[Part] = [FunctionResponse(c.id, c.name, {"error": "no match"}) for c in calls]
    second = await _send(client, answers, SendKind.TOOL_RESULT)

    assert isinstance(first[-1], AgentFinished)
    loop = second[-1]
    assert isinstance(loop, AgentLoop)
    assert loop.info.loop_type == "repeated_tool_call_cycle"


async def test_a_tool_failing_the_same_way_again_and_again_stops_before_the_next_request() -> None:
    provider = ScriptedProvider()
    for i in range(10):
        provider.enqueue(tool_calls(ToolCallSpec("edit", {"old_string": f"try {i}"}, f"c{i}")))
    client = _client(provider)
    error = {"error": "old_string was not found in a.py"}

    events = await _send(client, [Text("fix it")])
    sends = 1
    while isinstance(events[-1], AgentFinished):
        [call] = events[-1].calls
        events = await _send(
            client, [FunctionResponse(call.id, call.name, error)], SendKind.TOOL_RESULT
        )
        sends += 1

    loop = events[-1]
    assert isinstance(loop, AgentLoop)
    assert loop.info.loop_type == "repeated_tool_failure"
    assert "old_string was not found" in loop.info.detail
    assert len(provider.requests) == sends - 1  # the last failures were not sent on
    last = client.history.last()
    assert last is not None and last.role == "user"  # the results are kept, answered
    assert client.history.dangling_calls() == []


async def test_a_tool_call_loop_still_counts_the_answers_usage() -> None:
    """Issue 33: usage was 0 after a loop stop, although the server processed the prompt."""
    same = [ToolCallSpec("read_file", {"file_path": "a.txt"}, f"c{i}") for i in range(6)]
    provider = ScriptedProvider(
        Reply(tool_calls=same, usage={"prompt_tokens": 900, "completion_tokens": 60})
    )
    client = _client(provider)

    events = await _send(client, [Text("read it")])

    loop = events[-1]
    assert isinstance(loop, AgentLoop)
    assert (loop.usage.input_tokens, loop.usage.output_tokens) == (900, 60)
    assert client.stats.usage.input_tokens == 900


async def test_a_text_loop_cut_mid_stream_counts_an_estimate_of_its_usage() -> None:
    sentence = "I will now check the file again to be really sure. "
    provider = ScriptedProvider(reply(chunks=[sentence] * 60))
    client = _client(provider)

    events = await _send(client, [Text("check " * 200)])

    loop = events[-1]
    assert isinstance(loop, AgentLoop)
    streamed = "".join(e.text for e in events if isinstance(e, AssistantText))
    assert loop.usage.output_tokens == len(streamed) // 4
    assert loop.usage.input_tokens >= len("check " * 200) // 4
    assert client.stats.usage.output_tokens == loop.usage.output_tokens


async def test_a_cancelled_answer_counts_an_estimate_of_its_usage() -> None:
    gate = threading.Event()
    provider = ScriptedProvider(reply(chunks=["Paris ", "is ", "the ", "capital."], hold=gate))
    client = _client(provider)
    controller = AbortController()

    async def cancel_soon() -> None:
        await provider_asked(provider)
        controller.abort("user_cancel")
        gate.set()

    canceller = asyncio.ensure_future(cancel_soon())
    with pytest.raises(Aborted):
        await _send(client, [Text("capital of France? " * 50)], abort=controller.signal)
    await canceller

    usage = client.take_unfinished_usage()
    assert usage.input_tokens >= len("capital of France? " * 50) // 4
    assert client.take_unfinished_usage() == Usage()  # taken once


async def provider_asked(provider: ScriptedProvider) -> None:
    for _ in range(1000):
        if provider.requests:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the provider was never asked")


async def test_skip_loop_detection_lets_repetition_through() -> None:
    same = [ToolCallSpec("read_file", {"file_path": "a.txt"}, f"c{i}") for i in range(6)]
    provider = ScriptedProvider(tool_calls(*same))
    client = _client(provider, settings=_settings(skipLoopDetection=True))

    events = await _send(client, [Text("read it")])

    finished = events[-1]
    assert isinstance(finished, AgentFinished)
    assert len(finished.calls) == 6


# ----- automatic compression -----


def _compressing_settings() -> Settings:
    return Settings.model_validate(
        {
            "model": {
                "generationConfig": {"contextWindowSize": 1000},
                "chatCompression": {"contextPercentageThreshold": 0.5},
            }
        }
    )


async def test_compression_starts_in_the_background_and_never_blocks_a_request_that_fits() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(600)))
    held = threading.Event()
    provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 1400, "completion_tokens": 50}, hold=held),
        purpose="compress",
    )
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))
    await _send(client, [Text("one more question")])  # 600 of 1000 tokens: past 50 %
    assert await eventually_async(lambda: len(provider.requests_for("compress")) == 1)

    while_compressing = await _send(client, [Text("and another")])  # fits: not waiting

    assert not any(isinstance(e, AgentCompressed) for e in while_compressing)
    assert isinstance(while_compressing[-1], AgentFinished)
    held.set()
    assert await eventually_async(lambda: client.background_compression == "ready")
    events = await _send(client, [Text("and a third")])

    compressed = events[0]
    assert isinstance(compressed, AgentCompressed)
    assert compressed.result.status is CompressionStatus.COMPRESSED
    assert compressed.result.original_tokens == 600
    assert len(provider.requests_for("compress")) == 1
    main = _main_requests(provider)[-1]
    assert main.contents[0].text == SUMMARY
    assert main.contents[1].text == SUMMARY_ACK
    sent = [c.text for c in main.contents]
    assert sent[-3:] == ["and another", "ok", "and a third"]  # said while it ran: kept
    assert "question 0" not in "".join(sent)
    assert len(main.contents) < len(_conversation(6)) + 6


async def test_a_request_that_would_not_fit_waits_for_the_background_compression() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(800)))  # 800 of 1000: no room left
    provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 1400, "completion_tokens": 50}), purpose="compress"
    )
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))
    await _send(client, [Text("one more question")])

    events = await _send(client, [Text("and another")])

    assert isinstance(events[0], AgentCompressed)
    assert events[0].result.status is CompressionStatus.COMPRESSED
    assert _main_requests(provider)[-1].contents[0].text == SUMMARY


async def test_a_compression_that_frees_too_little_is_not_tried_again_in_a_loop() -> None:
    """A compression that leaves the prompt past the threshold is not run again at every
    request (each one a side query), only once the conversation has grown again."""
    provider = ScriptedProvider(reply("ok", usage=_usage(600)))
    provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 1400, "completion_tokens": 50}),
        reply(SUMMARY, usage={"prompt_tokens": 1400, "completion_tokens": 50}),
        purpose="compress",
    )
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))
    await _send(client, [Text("first")])
    assert await eventually_async(lambda: client.background_compression == "ready")
    await _send(client, [Text("second")])  # compressed; its answer still says 600 tokens

    for number in range(5):
        await _send(client, [Text(f"more {number}")])
        assert client.background_compression is None

    assert len(provider.requests_for("compress")) == 1
    provider.default = reply("ok", usage=_usage(700))  # grown by a tenth of the window
    await _send(client, [Text("much more")])
    assert await eventually_async(lambda: len(provider.requests_for("compress")) == 2)


OVERFLOW = "request (5000 tokens) exceeds the available context size (4096 tokens)"


async def test_a_prompt_too_long_for_the_window_is_compressed_and_sent_again_once() -> None:
    """Issue 33: llama.cpp's 400 exceed_context_size_error ended the turn; it names the window,
    and compressing the conversation makes the prompt fit."""
    provider = ScriptedProvider()
    provider.enqueue(error_reply(400, OVERFLOW), reply("the answer"), purpose="main")
    provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 4000, "completion_tokens": 50}), purpose="compress"
    )
    client = _client(provider, history=_conversation(6))

    events = await _send(client, [Text("and now?")])

    compressed = [e for e in events if isinstance(e, AgentCompressed)]
    assert len(compressed) == 1 and compressed[0].result.status is CompressionStatus.COMPRESSED
    assert compressed[0].result.original_tokens == 5000
    finished = events[-1]
    assert isinstance(finished, AgentFinished) and finished.text == "the answer"
    assert [r.purpose for r in provider.requests] == ["main", "compress", "main"]
    assert _last_user_parts(provider.requests[-1]) == [Text("and now?")]


async def test_a_prompt_compression_cannot_make_fit_is_a_clear_error() -> None:
    provider = ScriptedProvider()
    provider.enqueue(error_reply(400, OVERFLOW), purpose="main")
    client = _client(provider)  # nothing to compress: the fixed prompt alone is too long

    with pytest.raises(ContextOverflowError) as caught:
        await _send(client, [Text("hello")])

    message = str(caught.value)
    assert message.startswith(
        "The prompt (5000 tokens) does not fit the model's context window of 4096 tokens"
    )
    assert "cairn's fixed prompt" in message and "llama-server -c" in message
    assert [r.purpose for r in provider.requests] == ["main"]


async def test_an_overflow_after_compressing_is_not_retried_again() -> None:
    provider = ScriptedProvider()
    provider.enqueue(error_reply(400, OVERFLOW), error_reply(400, OVERFLOW), purpose="main")
    provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 4000, "completion_tokens": 50}), purpose="compress"
    )
    client = _client(provider, history=_conversation(6))

    with pytest.raises(ContextOverflowError, match="4096 tokens"):
        await _send(client, [Text("and now?")])

    assert [r.purpose for r in provider.requests] == ["main", "compress", "main"]


async def test_the_servers_window_counts_when_it_is_smaller_than_the_setting() -> None:
    provider = ScriptedProvider(context_window=8192)
    configured = _client(provider, settings=_settings(generationConfig={"contextWindowSize": 4096}))
    larger = _client(provider, settings=_settings(generationConfig={"contextWindowSize": 65536}))
    unset = _client(provider)

    assert (configured.context_window, larger.context_window) == (4096, 8192)
    assert unset.context_window == 8192
    assert _client(ScriptedProvider()).context_window == 131_072


async def test_compression_stays_off_below_the_threshold() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(499)))
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))

    await _send(client, [Text("first")])
    events = await _send(client, [Text("second")])

    assert not any(isinstance(e, AgentCompressed) for e in events)
    assert provider.requests_for("compress") == []


async def test_a_failed_compression_is_not_retried_on_every_request() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(600)))
    provider.enqueue(error_reply(400, "bad request"), purpose="compress")
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))
    await _send(client, [Text("first")])
    assert await eventually_async(lambda: client.background_compression == "ready")

    failed = await _send(client, [Text("second")])
    later = await _send(client, [Text("third")])

    assert isinstance(failed[0], AgentCompressed)
    assert failed[0].result.status is CompressionStatus.FAILED_ERROR
    assert isinstance(failed[-1], AgentFinished)
    assert not any(isinstance(e, AgentCompressed) for e in later)
    assert isinstance(later[-1], AgentFinished)
    assert client.background_compression is None
    assert len(provider.requests_for("compress")) == 1
    assert len(_main_requests(provider)) == 3


async def test_reset_lifts_the_compression_failure_latch() -> None:
    provider = ScriptedProvider(reply("ok", usage=_usage(600)))
    provider.enqueue(error_reply(400), error_reply(400), purpose="compress")
    client = _client(provider, settings=_compressing_settings(), history=_conversation(6))
    await _send(client, [Text("first")])
    assert await eventually_async(lambda: client.background_compression == "ready")
    await _send(client, [Text("second")])  # compression failed and latches

    client.reset(_conversation(6))
    await _send(client, [Text("third")])  # the answer reports 600 prompt tokens again
    assert await eventually_async(lambda: client.background_compression == "ready")
    events = await _send(client, [Text("fourth")])

    assert isinstance(events[0], AgentCompressed)
    assert len(provider.requests_for("compress")) == 2
