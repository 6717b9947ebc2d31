from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from cairn.abort import AbortController
from cairn.llm.errors import ProviderError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.types import ModelRequest
from cairn.memory.manager import MemoryManager
from cairn.memory.recall import lifecycle as lifecycle_module
from cairn.memory.recall.lifecycle import RecallDelivery, RecallLifecycle
from cairn.memory.telemetry import RECALL_DELIVERY_EVENT
from cairn.testing import RecordedRequest, Reply, ScriptedServer

from ...polling import DEADLINE_SECONDS, eventually_async
from ..memory_helpers import (
    DAY,
    NOW,
    Events,
    ScriptedModel,
    make_manager,
    pick,
    project_root,
    write_memory,
)

LONG_WAIT_MS = 60_000  # a ceiling no test reaches: a wait that ends did so for a reason
GUARD_SECONDS = 10  # fails a test whose wait did not end early instead of hanging


@pytest.fixture
def events() -> Iterator[Events]:
    recorder = Events()
    yield recorder
    recorder.close()


@pytest.fixture
def manager(tmp_path: Path) -> MemoryManager:
    manager = make_manager(tmp_path)
    root = project_root(manager)
    write_memory(root, "release", description="How to cut a release", body="Tag, then push.")
    write_memory(root, "release-train", description="Release train schedule", mtime=NOW - DAY)
    write_memory(
        root, "release-owner", description="The person who signs off a release", mtime=NOW - 2 * DAY
    )
    write_memory(root, "lunch", description="Team lunch on Fridays")
    return manager


def _lifecycle(
    manager: MemoryManager, model: ScriptedModel | None, *, wait_ms: float = LONG_WAIT_MS
) -> RecallLifecycle:
    return RecallLifecycle(manager, model, session_id="s1", initial_wait_ms=wait_ms)


def _names(delivery: RecallDelivery | None) -> list[str]:
    assert delivery is not None
    return [Path(path).stem for path in delivery.paths]


def _terminal(events: Events) -> list[dict[str, object]]:
    return [e for e in events.named(RECALL_DELIVERY_EVENT) if e["phase"] == "refined"]


def _fast(events: Events) -> list[dict[str, object]]:
    return [e for e in events.named(RECALL_DELIVERY_EVENT) if e["phase"] == "fast"]


async def _consume(
    lifecycle: RecallLifecycle, point: Literal["initial", "tool_result"]
) -> RecallDelivery | None:
    return await asyncio.wait_for(lifecycle.consume(point), GUARD_SECONDS)


async def test_initial_consume_returns_the_fast_result_while_the_selector_still_runs(
    manager: MemoryManager, events: Events
) -> None:
    model = ScriptedModel(pick("release"), gate=asyncio.Event())
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", AbortController().signal, [])
    delivery = await _consume(lifecycle, "initial")
    assert delivery is not None and delivery.phase == "fast"
    assert delivery.strategy == "heuristic"
    assert len(delivery.paths) == 2
    assert delivery.prompt.startswith("## Relevant memory")
    assert model.gate is not None and not model.gate.is_set()
    assert lifecycle.pending
    assert [e["delivery_point"] for e in _fast(events)] == ["initial"]


async def test_initial_consume_waits_no_longer_than_the_ceiling_when_nothing_comes(
    manager: MemoryManager,
) -> None:
    model = ScriptedModel(gate=asyncio.Event())
    lifecycle = _lifecycle(manager, model, wait_ms=20)
    lifecycle.begin("zebra crossing", AbortController().signal, [])
    assert await _consume(lifecycle, "initial") is None
    assert lifecycle.pending


async def test_a_result_settled_before_the_first_request_is_delivered_refined_at_initial(
    manager: MemoryManager, events: Events
) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(pick("release-owner")))
    lifecycle.begin("release", AbortController().signal, [])
    await lifecycle.wait_settled()
    delivery = await _consume(lifecycle, "initial")
    assert delivery is not None and delivery.phase == "refined" and delivery.strategy == "model"
    assert _names(delivery) == ["release-owner"]
    assert not lifecycle.pending
    assert [e["delivery_point"] for e in _terminal(events)] == ["initial"]


async def test_a_tool_result_consume_never_waits_for_an_unsettled_recall(
    manager: MemoryManager,
) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()))
    lifecycle.begin("release", AbortController().signal, [])
    assert await _consume(lifecycle, "tool_result") is None
    assert lifecycle.pending


async def test_the_refined_delivery_drops_the_documents_the_fast_phase_delivered(
    manager: MemoryManager, events: Events
) -> None:
    gate = asyncio.Event()
    model = ScriptedModel(pick("release", "release-owner"), gate=gate)
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", AbortController().signal, [])
    fast = await _consume(lifecycle, "initial")
    assert sorted(_names(fast)) == ["release", "release-train"]
    gate.set()
    await lifecycle.wait_settled()
    refined = await _consume(lifecycle, "tool_result")
    assert refined is not None and refined.phase == "refined"
    assert _names(refined) == ["release-owner"]
    assert "### release (" not in refined.prompt
    assert [(e["delivery_point"], e["docs_selected"]) for e in _terminal(events)] == [
        ("tool_result", 1)
    ]


async def test_a_selector_choosing_only_fast_documents_is_discarded_as_already_delivered(
    manager: MemoryManager, events: Events
) -> None:
    gate = asyncio.Event()
    lifecycle = _lifecycle(manager, ScriptedModel(pick("release"), gate=gate))
    lifecycle.begin("release", AbortController().signal, [])
    await _consume(lifecycle, "initial")
    gate.set()
    await lifecycle.wait_settled()
    assert await _consume(lifecycle, "tool_result") is None
    assert [e["discard_reason"] for e in _terminal(events)] == ["already_delivered"]


async def test_all_fast_overlap_is_recorded_as_already_delivered_when_the_turn_ends(
    manager: MemoryManager, events: Events
) -> None:
    gate = asyncio.Event()
    lifecycle = _lifecycle(manager, ScriptedModel(pick("release"), gate=gate))
    lifecycle.begin("release", AbortController().signal, [])
    await _consume(lifecycle, "initial")
    gate.set()
    await lifecycle.wait_settled()
    lifecycle.finish()
    assert [e["discard_reason"] for e in _terminal(events)] == ["already_delivered"]


async def test_partial_fast_overlap_keeps_the_cancel_reason(
    manager: MemoryManager, events: Events
) -> None:
    gate = asyncio.Event()
    lifecycle = _lifecycle(manager, ScriptedModel(pick("release", "release-owner"), gate=gate))
    lifecycle.begin("release", AbortController().signal, [])
    await _consume(lifecycle, "initial")
    gate.set()
    await lifecycle.wait_settled()
    lifecycle.finish()
    assert [e["discard_reason"] for e in _terminal(events)] == ["no_safe_delivery_point"]


async def test_a_settled_empty_result_is_discarded_as_no_relevant_results(
    manager: MemoryManager, events: Events
) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(pick()))
    lifecycle.begin("release", AbortController().signal, [])
    await lifecycle.wait_settled()
    assert await _consume(lifecycle, "initial") is None
    assert [e["discard_reason"] for e in _terminal(events)] == ["no_relevant_results"]


async def test_a_new_query_discards_the_previous_handle_and_its_fast_result(
    manager: MemoryManager, events: Events
) -> None:
    model = ScriptedModel(gate=asyncio.Event())
    lifecycle = _lifecycle(manager, model, wait_ms=20)
    lifecycle.begin("release", AbortController().signal, [])
    # the first handle's fast result exists now
    await asyncio.wait_for(model.started.wait(), DEADLINE_SECONDS)
    lifecycle.begin("zebra crossing", AbortController().signal, [])
    assert await _consume(lifecycle, "initial") is None
    assert [e["discard_reason"] for e in _terminal(events)] == ["new_query"]
    assert _fast(events) == []


async def test_a_parent_abort_discards_the_handle(manager: MemoryManager, events: Events) -> None:
    turn = AbortController()
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()))
    lifecycle.begin("release", turn.signal, [])
    turn.abort("user")
    assert not lifecycle.pending
    assert await _consume(lifecycle, "initial") is None
    assert [e["discard_reason"] for e in _terminal(events)] == ["abort"]


async def test_a_turn_already_aborted_never_starts_recall(
    manager: MemoryManager, events: Events
) -> None:
    turn = AbortController()
    turn.abort()
    model = ScriptedModel()
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", turn.signal, [])
    assert await eventually_async(lambda: bool(_terminal(events)))
    assert model.requests == []
    assert [e["discard_reason"] for e in _terminal(events)] == ["abort"]


async def test_an_abort_during_the_initial_wait_ends_it_without_a_delivery(
    manager: MemoryManager,
) -> None:
    turn = AbortController()
    model = ScriptedModel(gate=asyncio.Event())
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("zebra crossing", turn.signal, [])
    waiting = asyncio.create_task(_consume(lifecycle, "initial"))
    await asyncio.wait_for(model.started.wait(), DEADLINE_SECONDS)
    turn.abort()
    assert await waiting is None


async def test_a_handle_swapped_during_the_initial_wait_is_refused(
    manager: MemoryManager,
) -> None:
    model = ScriptedModel(gate=asyncio.Event())
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("zebra crossing", AbortController().signal, [])
    waiting = asyncio.create_task(_consume(lifecycle, "initial"))
    await asyncio.wait_for(model.started.wait(), DEADLINE_SECONDS)
    lifecycle.begin("release", AbortController().signal, [])
    assert await waiting is None
    assert lifecycle.pending


@pytest.mark.parametrize("reason", ["shutdown", "reset", "new_query", "abort"])
async def test_cancel_records_its_reason_once(
    manager: MemoryManager, events: Events, reason: str
) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()))
    lifecycle.begin("release", AbortController().signal, [])
    lifecycle.cancel(reason)
    lifecycle.cancel(reason)
    lifecycle.finish()
    assert [e["discard_reason"] for e in _terminal(events)] == [reason]


async def test_finish_without_a_delivery_point_is_idempotent(
    manager: MemoryManager, events: Events
) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()))
    lifecycle.begin("release", AbortController().signal, [])
    lifecycle.finish()
    lifecycle.finish()
    assert [e["discard_reason"] for e in _terminal(events)] == ["no_safe_delivery_point"]


async def test_an_unknown_cancel_reason_is_refused(manager: MemoryManager) -> None:
    lifecycle = _lifecycle(manager, None)
    with pytest.raises(ValueError, match="unknown recall discard reason"):
        lifecycle.cancel("because")


async def test_a_memory_is_surfaced_at_most_once_per_session(manager: MemoryManager) -> None:
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()), wait_ms=20)
    lifecycle.begin("release", AbortController().signal, [])
    first = await _consume(lifecycle, "initial")
    lifecycle.finish()
    lifecycle.begin("release", AbortController().signal, [])
    second = await _consume(lifecycle, "initial")
    lifecycle.finish()
    lifecycle.begin("release", AbortController().signal, [])
    third = await _consume(lifecycle, "initial")
    assert sorted(_names(first)) == ["release", "release-train"]
    assert _names(second) == ["release-owner"]
    assert third is None
    assert len(lifecycle.surfaced_paths) == 3


async def test_reset_forgets_the_surfaced_memories(manager: MemoryManager, events: Events) -> None:
    lifecycle = _lifecycle(manager, None)
    lifecycle.begin("release", AbortController().signal, [])
    first = await _consume(lifecycle, "initial")
    lifecycle.begin("release", AbortController().signal, [])
    lifecycle.reset()
    assert lifecycle.surfaced_paths == set()
    lifecycle.begin("release", AbortController().signal, [])
    assert _names(await _consume(lifecycle, "initial")) == _names(first)
    assert "reset" in [e["discard_reason"] for e in _terminal(events)]


async def test_a_failing_selector_yields_the_lexical_result_and_never_raises(
    manager: MemoryManager,
) -> None:
    model = ScriptedModel(error=ProviderError("HTTP 500", status=500))
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", AbortController().signal, [])
    await lifecycle.wait_settled()
    delivery = await _consume(lifecycle, "initial")
    assert delivery is not None and delivery.strategy == "heuristic"
    assert len(delivery.paths) == 3


async def test_a_disabled_manager_begins_nothing(tmp_path: Path, events: Events) -> None:
    manager = make_manager(tmp_path, enabled=False)
    write_memory(project_root(manager), "release", description="release")
    lifecycle = _lifecycle(manager, None)
    lifecycle.begin("release", AbortController().signal, [])
    assert not lifecycle.pending
    assert await _consume(lifecycle, "initial") is None
    assert events.all == []


async def test_every_handle_records_exactly_one_terminal_event_and_at_most_one_fast(
    manager: MemoryManager, events: Events
) -> None:
    gate = asyncio.Event()
    lifecycle = _lifecycle(manager, ScriptedModel(pick("release-owner"), gate=gate), wait_ms=20)
    for _turn in range(3):
        lifecycle.begin("release", AbortController().signal, [])
        await _consume(lifecycle, "initial")
        await _consume(lifecycle, "initial")
        await _consume(lifecycle, "tool_result")
    gate.set()
    await lifecycle.wait_settled()
    await _consume(lifecycle, "tool_result")
    lifecycle.finish()
    assert len(_terminal(events)) == 3
    assert len(_fast(events)) <= 3


async def test_delivery_events_carry_no_paths_or_text(
    manager: MemoryManager, events: Events
) -> None:
    lifecycle = _lifecycle(manager, None)
    lifecycle.begin("release secret", AbortController().signal, [])
    await _consume(lifecycle, "initial")
    for event in events.named(RECALL_DELIVERY_EVENT):
        assert set(event) == {
            "phase", "delivery_point", "discard_reason", "strategy", "docs_selected", "latency_ms"
        }  # fmt: skip


async def test_fast_recall_is_delivered_before_a_slow_selector_over_http(
    manager: MemoryManager,
) -> None:
    """The real provider against the scripted server, the selector answering after 100 ms."""

    def selector(request: RecordedRequest) -> Reply | None:
        if request.purpose != "recall-selector":
            return None
        owner = next(
            line for line in request.last_user_text().splitlines() if "release-owner" in line
        )
        path = owner.split("] ", 1)[1].rsplit(" (", 1)[0]
        return Reply(text=json.dumps({"selected_memories": [path]}), delay=0.3)

    with ScriptedServer(handler=selector) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m", fast_model="f")
        lifecycle = RecallLifecycle(manager, provider, session_id="s1")
        lifecycle.begin("release", AbortController().signal, [])
        fast = await lifecycle.consume("initial")
        await lifecycle.wait_settled()
        refined = await lifecycle.consume("tool_result")
        await provider.aclose()
    assert fast is not None and fast.phase == "fast"
    assert sorted(_names(fast)) == ["release", "release-train"]
    assert refined is not None and refined.phase == "refined" and refined.strategy == "model"
    assert _names(refined) == ["release-owner"]
    (request,) = server.requests_for("recall-selector")
    assert request.model == "f"


async def test_the_fast_result_is_ready_after_one_loop_iteration(manager: MemoryManager) -> None:
    """The fast phase never awaits, so a busy loop cannot make the first request miss it."""
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()), wait_ms=0)
    lifecycle.begin("release", AbortController().signal, [])
    await asyncio.sleep(0)
    delivery = await _consume(lifecycle, "initial")
    assert delivery is not None and delivery.phase == "fast"


async def test_a_fast_phase_slower_than_the_initial_wait_is_still_delivered(
    manager: MemoryManager,
) -> None:
    """Robustness under load (benchmarks/recall_load_bench.py): the recall task is scheduled
    before the wait's timer, and its fast phase publishes without awaiting, so the timer cannot
    expire first however long that phase takes. Here the phase parses every file (a cold store)
    against a one-microsecond ceiling, with no yield between begin and consume."""
    lifecycle = _lifecycle(manager, ScriptedModel(gate=asyncio.Event()), wait_ms=0.001)
    lifecycle.begin("release", AbortController().signal, [])
    delivery = await _consume(lifecycle, "initial")
    assert delivery is not None and delivery.phase == "fast"
    assert sorted(_names(delivery)) == ["release", "release-train"]


async def test_the_selector_is_asked_only_once_the_first_request_is_written(
    manager: MemoryManager, events: Events
) -> None:
    """Issue #32: ranking and building the selector's candidates ran between the fast result
    and the turn's first request leaving; the refinement now waits until that request is
    written, and its result still reaches the next tool-result send."""
    written: list[bool] = []  # whether the request was out when the selector was asked
    chosen = pick("release-owner")

    def answer(request: ModelRequest) -> str:
        written.append(sent)
        return chosen(request)

    sent = False
    model = ScriptedModel(answer)
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", AbortController().signal, [])
    fast = await _consume(lifecycle, "initial")
    assert fast is not None and fast.phase == "fast"
    await asyncio.sleep(0.05)  # room for a selector that would not wait
    sent = True
    lifecycle.request_sent()
    await lifecycle.wait_settled()
    refined = await _consume(lifecycle, "tool_result")
    assert written == [True]
    assert refined is not None and refined.phase == "refined"
    assert _names(refined) == ["release-owner"]
    assert [e["delivery_point"] for e in _terminal(events)] == ["tool_result"]


async def test_a_request_that_is_never_written_delays_the_selector_only_to_its_ceiling(
    manager: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle_module, "REQUEST_SENT_WAIT_S", 0.05)
    model = ScriptedModel(pick("release-owner"))
    lifecycle = _lifecycle(manager, model)
    lifecycle.begin("release", AbortController().signal, [])
    assert await _consume(lifecycle, "initial") is not None
    await asyncio.wait_for(model.started.wait(), GUARD_SECONDS)
    assert len(model.requests) == 1
