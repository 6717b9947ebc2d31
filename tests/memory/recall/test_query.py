from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.llm.errors import ProviderError
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.candidates import (
    LEXICAL_CANDIDATE_LIMIT,
    MAX_MODEL_CANDIDATE_DOCS,
    RECENT_MODEL_CANDIDATE_RESERVE,
)
from cairn.memory.recall.query import RecallResult, recall_memories
from cairn.memory.telemetry import RECALL_EVENT

from ...polling import DEADLINE_SECONDS, eventually_async
from ..memory_helpers import (
    DAY,
    NOW,
    Events,
    ScriptedModel,
    key_of,
    make_manager,
    manifest_paths,
    pick,
    project_root,
    user_text,
    write_memory,
)


@pytest.fixture
def events() -> Iterator[Events]:
    recorder = Events()
    yield recorder
    recorder.close()


@pytest.fixture
def manager(tmp_path: Path) -> MemoryManager:
    return make_manager(tmp_path)


@pytest.fixture
def root(manager: MemoryManager) -> Path:
    return project_root(manager)


@pytest.fixture
def short_manager() -> Iterator[MemoryManager]:
    """A manager whose paths are short enough for 200 manifest lines within 25,000 bytes."""
    with tempfile.TemporaryDirectory(prefix="cm", dir="/tmp") as folder:
        yield make_manager(Path(folder), local=True)


async def _recall(
    manager: MemoryManager,
    query: str,
    *,
    provider: ScriptedModel | None = None,
    excluded: frozenset[str] = frozenset(),
    recent_tools: tuple[str, ...] = (),
    abort: AbortController | None = None,
    fast: list[RecallResult] | None = None,
) -> RecallResult:
    return await recall_memories(
        manager.store,
        query,
        provider=provider,
        excluded=excluded,
        recent_tools=recent_tools,
        abort=(abort or AbortController()).signal,
        now=manager.clock,
        on_fast_result=fast.append if fast is not None else None,
    )


def _release_notes(root: Path) -> None:
    write_memory(root, "release", description="How to cut a release", body="Tag then push.")
    write_memory(root, "release-train", description="Release train schedule", mtime=NOW - DAY)
    write_memory(root, "release-owner", description="Who signs off a release", mtime=NOW - 2 * DAY)
    write_memory(root, "lunch", description="Team lunch on Fridays")


async def test_an_empty_query_recalls_nothing_and_records_strategy_none(
    manager: MemoryManager, root: Path, events: Events
) -> None:
    _release_notes(root)
    model = ScriptedModel()
    result = await _recall(manager, "   ", provider=model)
    assert result == RecallResult()
    assert model.requests == []
    assert [e["strategy"] for e in events.named(RECALL_EVENT)] == ["none"]


async def test_an_empty_store_recalls_nothing(manager: MemoryManager) -> None:
    model = ScriptedModel()
    assert (await _recall(manager, "release", provider=model)).strategy == "none"
    assert model.requests == []


async def test_the_fast_result_is_the_lexical_top_two_published_before_the_selector_starts(
    manager: MemoryManager, root: Path
) -> None:
    _release_notes(root)
    model = ScriptedModel(pick("release"))
    requests_when_published: list[int] = []
    fast: list[RecallResult] = []

    def on_fast(result: RecallResult) -> None:
        requests_when_published.append(len(model.requests))
        fast.append(result)

    await recall_memories(
        manager.store, "release", provider=model, excluded=frozenset(), recent_tools=(),
        abort=AbortController().signal, now=manager.clock, on_fast_result=on_fast,
    )  # fmt: skip
    assert requests_when_published == [0]
    (published,) = fast
    assert published.strategy == "heuristic"
    assert len(published.docs) == 2
    assert published.prompt.startswith("## Relevant memory")
    assert len(model.requests) == 1


async def test_the_selector_choice_is_the_result(manager: MemoryManager, root: Path) -> None:
    _release_notes(root)
    result = await _recall(manager, "release", provider=ScriptedModel(pick("release-owner")))
    assert result.strategy == "model"
    assert [doc.path.name for doc in result.docs] == ["release-owner.md"]
    assert "### release-owner (project/release-owner.md)" in result.prompt


async def test_an_empty_selector_answer_is_authoritative(
    manager: MemoryManager, root: Path
) -> None:
    _release_notes(root)
    result = await _recall(manager, "release", provider=ScriptedModel(pick()))
    assert result == RecallResult(strategy="none")


@pytest.mark.parametrize(
    "model",
    [
        ScriptedModel(error=ProviderError("HTTP 503", status=503)),
        ScriptedModel(json.dumps({"selected_memories": ["/not/in/the/manifest.md"]})),
        ScriptedModel("no json here"),
    ],
    ids=["provider-error", "unknown-path", "not-json"],
)
async def test_a_failed_selector_falls_back_to_the_lexical_result(
    manager: MemoryManager, root: Path, model: ScriptedModel
) -> None:
    _release_notes(root)
    result = await _recall(manager, "release", provider=model)
    assert result.strategy == "heuristic"
    assert {doc.path.name for doc in result.docs} == {
        "release.md", "release-train.md", "release-owner.md"
    }  # fmt: skip


async def test_a_selector_choosing_more_than_five_falls_back(
    manager: MemoryManager, root: Path
) -> None:
    for i in range(7):
        write_memory(root, f"deploy{i}", description="deploy steps")
    result = await _recall(
        manager, "deploy", provider=ScriptedModel(pick(*(f"deploy{i}" for i in range(7))))
    )
    assert result.strategy == "heuristic"
    assert len(result.docs) == 5


async def test_without_a_provider_the_lexical_top_five_is_the_result(
    manager: MemoryManager, root: Path
) -> None:
    for i in range(7):
        write_memory(root, f"deploy{i}", description="deploy steps", mtime=NOW - i)
    result = await _recall(manager, "deploy")
    assert result.strategy == "heuristic"
    assert [doc.path.name for doc in result.docs] == [f"deploy{i}.md" for i in range(5)]


async def test_excluded_paths_are_never_recalled(manager: MemoryManager, root: Path) -> None:
    _release_notes(root)
    surfaced = str(root / "project" / "release.md")
    fast: list[RecallResult] = []
    model = ScriptedModel(pick())
    await _recall(manager, "release", provider=model, excluded=frozenset({surfaced}), fast=fast)
    assert surfaced not in fast[0].paths
    assert key_of(Path(surfaced)) not in manifest_paths(model.requests[0])


async def test_a_user_abort_during_the_selector_returns_nothing_and_records_nothing(
    manager: MemoryManager, root: Path, events: Events
) -> None:
    _release_notes(root)
    model = ScriptedModel(gate=asyncio.Event())
    controller = AbortController()
    task = asyncio.create_task(_recall(manager, "release", provider=model, abort=controller))
    await asyncio.wait_for(model.started.wait(), DEADLINE_SECONDS)
    controller.abort("user")
    assert await task == RecallResult()
    assert events.named(RECALL_EVENT) == []


async def test_tool_noise_is_kept_out_of_the_fast_result_and_the_manifest(
    manager: MemoryManager, root: Path
) -> None:
    noise = write_memory(
        root, "jira-schema", description="jira_search parameter schema for release"
    )
    keep = write_memory(root, "jira-owner", description="jira_search owner for release questions")
    model = ScriptedModel(pick())
    fast: list[RecallResult] = []
    await _recall(manager, "release", provider=model, recent_tools=("jira_search",), fast=fast)
    assert fast[0].paths == [str(keep)]
    assert manifest_paths(model.requests[0]) == [key_of(keep)]
    assert "Recently used tools: jira_search" in user_text(model.requests[0])
    assert str(noise) not in user_text(model.requests[0])


async def test_an_old_match_behind_two_hundred_newer_memories_is_a_candidate(
    short_manager: MemoryManager,
) -> None:
    manager, root = short_manager, project_root(short_manager)
    old = write_memory(root, "kafka", description="kafka rebalance runbook", mtime=NOW - 900 * DAY)
    for i in range(250):
        write_memory(root, f"note{i}", description=f"unrelated note {i}", mtime=NOW - i)
    model = ScriptedModel(pick())
    await _recall(manager, "kafka", provider=model)
    paths = manifest_paths(model.requests[0])
    assert len(paths) == MAX_MODEL_CANDIDATE_DOCS
    assert paths[0] == key_of(old)
    assert paths[1] == key_of(root / "project" / "note0.md")


async def test_many_matches_leave_twenty_seats_to_the_newest_memories(
    short_manager: MemoryManager,
) -> None:
    manager, root = short_manager, project_root(short_manager)
    for i in range(190):
        write_memory(root, f"match{i}", description="kafka topic", mtime=NOW - 100 * DAY - i)
    for i in range(30):
        write_memory(root, f"new{i}", description="something else", mtime=NOW - i)
    model = ScriptedModel(pick())
    await _recall(manager, "kafka", provider=model)
    paths = manifest_paths(model.requests[0])
    assert len(paths) == MAX_MODEL_CANDIDATE_DOCS
    new = [p for p in paths if "/new" in p]
    assert new == [
        key_of(root / "project" / f"new{i}.md") for i in range(RECENT_MODEL_CANDIDATE_RESERVE)
    ]


async def test_a_published_fast_result_leads_the_full_set_of_selector_candidates(
    short_manager: MemoryManager,
) -> None:
    """The fast top two are ranked on their own before the 180 lexical candidates are."""
    manager, root = short_manager, project_root(short_manager)
    for i in range(190):
        write_memory(root, f"match{i}", description="kafka topic", mtime=NOW - 100 * DAY - i)
    for i in range(30):
        write_memory(root, f"new{i}", description="something else", mtime=NOW - i)
    model = ScriptedModel(pick())
    fast: list[RecallResult] = []
    await _recall(manager, "kafka", provider=model, fast=fast)
    paths = manifest_paths(model.requests[0])
    assert fast[0].paths == [str(root / "project" / f"match{i}.md") for i in range(2)]
    assert [paths[0], paths[2]] == [key_of(Path(path)) for path in fast[0].paths]
    assert len([p for p in paths if "/match" in p]) == LEXICAL_CANDIDATE_LIMIT
    assert len(paths) == MAX_MODEL_CANDIDATE_DOCS


async def test_a_single_lexical_match_is_published_and_the_newest_fill_the_candidates(
    short_manager: MemoryManager,
) -> None:
    manager, root = short_manager, project_root(short_manager)
    old = write_memory(root, "kafka", description="kafka rebalance runbook", mtime=NOW - 900 * DAY)
    for i in range(250):
        write_memory(root, f"note{i}", description=f"unrelated note {i}", mtime=NOW - i)
    model = ScriptedModel(pick())
    fast: list[RecallResult] = []
    await _recall(manager, "kafka", provider=model, fast=fast)
    assert fast[0].paths == [str(old)]
    paths = manifest_paths(model.requests[0])
    assert paths[:2] == [key_of(old), key_of(root / "project" / "note0.md")]
    assert len(paths) == MAX_MODEL_CANDIDATE_DOCS


async def test_the_recall_event_carries_counts_and_timings_but_no_text_or_paths(
    manager: MemoryManager, root: Path, events: Events
) -> None:
    _release_notes(root)
    await _recall(manager, "secret release words", provider=ScriptedModel(pick("release")))
    (event,) = events.named(RECALL_EVENT)
    assert event["strategy"] == "model"
    assert event["docs_scanned"] == 4
    assert event["docs_selected"] == 1
    assert event["query_length"] == len("secret release words")
    for key in ("duration_ms", "scan_duration_ms", "fast_duration_ms", "selector_duration_ms"):
        assert event[key] >= 0
    flat = json.dumps(event)
    assert "secret" not in flat and str(root) not in flat


async def test_user_memories_are_recalled_after_project_ones_on_equal_terms(
    manager: MemoryManager, root: Path
) -> None:
    user = write_memory(manager.roots.user, "tz", type="project", description="release timezone")
    project = write_memory(root, "tz", description="release timezone")
    model = ScriptedModel(pick())
    fast: list[RecallResult] = []
    await _recall(manager, "release timezone", provider=model, fast=fast)
    assert fast[0].paths == [str(project), str(user)]
    assert manifest_paths(model.requests[0]) == [key_of(project), key_of(user)]


async def test_semantic_candidates_and_the_selector_wait_for_the_first_request(
    manager: MemoryManager, root: Path
) -> None:
    """Issue #26: the embedding model is loaded only once the turn's first request has taken
    its memory (``before_semantic``), never while the turn is starting."""
    _release_notes(root)
    order: list[str] = []
    opened = asyncio.Event()

    async def first_request() -> None:
        order.append("waiting for the first request")
        await opened.wait()

    def selector(_request: object) -> str:
        order.append("selector")
        return json.dumps({"selected_memories": []})

    fast: list[RecallResult] = []
    recall = recall_memories(
        manager.store, "release", provider=ScriptedModel(selector), excluded=frozenset(),
        recent_tools=(), abort=AbortController().signal, now=manager.clock,
        on_fast_result=fast.append, semantic=True, before_semantic=first_request,
    )  # fmt: skip
    task = asyncio.create_task(recall)
    assert await eventually_async(lambda: bool(order))
    assert fast and order == ["waiting for the first request"]  # the fast result went first
    order.append("first request sent")
    opened.set()
    await asyncio.wait_for(task, 60)

    assert order == ["waiting for the first request", "first request sent", "selector"]
