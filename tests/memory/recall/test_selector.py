from __future__ import annotations

import asyncio
import json

import pytest

from cairn.abort import AbortController, Aborted
from cairn.llm.errors import ProviderError
from cairn.memory.recall.selector import (
    MAX_MODEL_MANIFEST_BYTES,
    SELECTOR_PURPOSE,
    SelectorError,
    build_manifest,
    manifest_line,
    parse_selection,
    sanitize_manifest_text,
    select_memories,
)

from ..memory_helpers import NOW, ScriptedModel, make_doc, user_text


def _answer(*paths: object) -> str:
    return json.dumps({"selected_memories": list(paths)})


def test_manifest_line_has_type_absolute_path_iso_time_and_description() -> None:
    doc = make_doc("uv", type="feedback", description="Install with uv", mtime=0.25)
    assert manifest_line(doc) == (
        f"- [feedback] {doc.path} (1970-01-01T00:00:00.250Z): Install with uv"
    )


def test_sanitize_collapses_controls_drops_format_characters_and_normalises() -> None:
    assert sanitize_manifest_text("ＡＢ\x00c\u200bd\n\n e ") == "AB cd e"


def test_sanitize_cuts_a_description_at_512_characters() -> None:
    assert len(sanitize_manifest_text("z" * 2_000)) == 512


def test_manifest_with_multibyte_text_stays_within_the_byte_budget() -> None:
    docs = [make_doc(f"d{i}", description="記憶" * 300) for i in range(100)]
    manifest = build_manifest(docs)
    assert 0 < len(manifest.docs) < 100
    assert len(manifest.text.encode("utf-8")) <= MAX_MODEL_MANIFEST_BYTES


def test_a_line_that_does_not_fit_is_skipped_and_later_lines_still_fit() -> None:
    filler = [make_doc(f"f{i}", description="x" * 500) for i in range(47)]
    too_long = make_doc("long", description="漢" * 512)
    short = make_doc("short", description="s")
    manifest = build_manifest([*filler, too_long, short])
    assert str(too_long.path) not in manifest.docs
    assert str(short.path) in manifest.docs


def test_parse_selection_maps_paths_back_to_documents_in_answer_order() -> None:
    a, b = make_doc("a"), make_doc("b")
    manifest = build_manifest([a, b])
    data = {"selected_memories": [str(b.path), str(a.path), str(b.path)]}
    assert parse_selection(data, manifest, 5) == [b, a]


@pytest.mark.parametrize(
    "data",
    [
        {"selected_memories": ["/elsewhere/unknown.md"]},
        {"selected_memories": "not a list"},
        {"selected_memories": [7]},
        {"picked": []},
        ["not", "an", "object"],
    ],
)
def test_parse_selection_rejects_answers_outside_the_manifest_or_schema(data: object) -> None:
    manifest = build_manifest([make_doc("a")])
    with pytest.raises(SelectorError):
        parse_selection(data, manifest, 5)


def test_parse_selection_rejects_more_than_the_limit() -> None:
    docs = [make_doc(f"d{i}") for i in range(6)]
    data = {"selected_memories": [str(d.path) for d in docs]}
    with pytest.raises(SelectorError, match="at most 5"):
        parse_selection(data, build_manifest(docs), 5)


async def test_selector_asks_the_fast_model_in_json_mode_with_query_and_manifest() -> None:
    doc = make_doc("deploy", description="How releases are cut", mtime=NOW)
    model = ScriptedModel(_answer(str(doc.path)))
    chosen = await select_memories(model, "  how do we release?  ", [doc], recent_tools=["grep"])
    assert chosen == [doc]
    (request,) = model.requests
    assert request.purpose == SELECTOR_PURPOSE
    assert request.model == "fast-model"
    assert request.json_mode
    assert user_text(request) == (
        f"Query: how do we release?\n\nAvailable memories:\n{manifest_line(doc)}"
        "\n\nRecently used tools: grep"
    )


async def test_selector_without_candidates_sends_no_request() -> None:
    model = ScriptedModel()
    assert await select_memories(model, "anything", []) == []
    assert model.requests == []


async def test_an_empty_answer_is_returned_as_is() -> None:
    assert await select_memories(ScriptedModel(_answer()), "q", [make_doc("a")]) == []


async def test_a_provider_failure_is_a_selector_error() -> None:
    model = ScriptedModel(error=ProviderError("HTTP 500", status=500))
    with pytest.raises(SelectorError, match="HTTP 500"):
        await select_memories(model, "q", [make_doc("a")])


async def test_an_answer_that_is_not_json_is_a_selector_error() -> None:
    with pytest.raises(SelectorError):
        await select_memories(ScriptedModel("I think a.md"), "q", [make_doc("a")])


async def test_a_selector_slower_than_the_timeout_is_a_selector_error() -> None:
    model = ScriptedModel(gate=asyncio.Event())
    with pytest.raises(SelectorError, match="within"):
        await select_memories(model, "q", [make_doc("a")], timeout=0.05)


async def test_an_abort_stops_the_selector_with_aborted() -> None:
    model = ScriptedModel(gate=asyncio.Event())
    controller = AbortController()
    task = asyncio.create_task(
        select_memories(model, "q", [make_doc("a")], abort=controller.signal)
    )
    await asyncio.wait_for(model.started.wait(), 10)
    controller.abort("user")
    with pytest.raises(Aborted):
        await task
