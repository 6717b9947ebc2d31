from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cairn.abort import AbortController, Aborted
from cairn.llm.errors import ProviderError
from cairn.memory.recall.selector import (
    MAX_MODEL_MANIFEST_BYTES,
    SELECTOR_PURPOSE,
    SelectorError,
    build_manifest,
    manifest_key,
    manifest_line,
    manifest_text,
    parse_selection,
    sanitize_manifest_text,
    select_memories,
)

from ...polling import DEADLINE_SECONDS
from ..memory_helpers import NOW, ScriptedModel, make_doc, user_text


def _answer(*paths: object) -> str:
    return json.dumps({"selected_memories": list(paths)})


def test_manifest_line_has_type_key_day_name_and_description() -> None:
    description = "Installs packages with uv"
    doc = make_doc("uv", type="feedback", title="Prefers uv", description=description, mtime=0.25)
    assert manifest_line(doc) == (
        "- [feedback] project:feedback/uv.md (1970-01-01) Prefers uv: Installs packages with uv"
    )


def test_a_thin_description_is_followed_by_the_start_of_the_body() -> None:
    doc = make_doc("tabs", description="Go style", body="Tabs,\n\nnever spaces, in Go files.")
    assert manifest_text(doc) == "tabs: Go style | Tabs, never spaces, in Go files."


def test_a_memory_without_description_shows_its_name_and_body() -> None:
    doc = make_doc("tabs", description="", body="Tabs in Go files.")
    assert manifest_text(doc) == "tabs | Tabs in Go files."


def test_a_user_and_a_project_memory_with_one_relative_path_have_distinct_keys() -> None:
    project = make_doc("tz", scope="project")
    user = make_doc("tz", root=Path("/mem/user"), scope="user")
    keys = set(build_manifest([project, user]).docs)
    assert keys == {"project:project/tz.md", "user:project/tz.md"}


def test_sanitize_collapses_controls_drops_format_characters_and_normalises() -> None:
    assert sanitize_manifest_text("ＡＢ\x00c\u200bd\n\n e ") == "AB cd e"


def test_sanitize_cuts_a_description_at_512_characters() -> None:
    assert len(sanitize_manifest_text("z" * 2_000)) == 512


def test_two_hundred_candidates_with_long_texts_all_fit_the_byte_budget() -> None:
    """Issue #26: the manifest used to hold 92-101 of 200 candidates; long texts now give way."""
    docs = [make_doc(f"memory-{i:03d}", description="記憶" * 300) for i in range(200)]
    manifest = build_manifest(docs)
    assert list(manifest.docs) == [f"project:project/memory-{i:03d}.md" for i in range(200)]
    assert len(manifest.text.encode("utf-8")) <= MAX_MODEL_MANIFEST_BYTES
    assert all(line.endswith("…") for line in manifest.text.splitlines())


def test_short_texts_keep_their_full_length_when_long_ones_are_cut() -> None:
    long = [make_doc(f"l{i}", description="x" * 500) for i in range(100)]
    short = make_doc("short", description="exactly this description, whole")
    manifest = build_manifest([*long, short])
    assert manifest.text.endswith("short: exactly this description, whole")
    assert len(manifest.text.encode("utf-8")) <= MAX_MODEL_MANIFEST_BYTES


def test_a_manifest_never_lists_more_than_two_hundred_candidates() -> None:
    docs = [make_doc(f"d{i}") for i in range(260)]
    assert len(build_manifest(docs).docs) == 200


def test_huge_titles_and_binary_text_stay_on_one_line_within_the_budget() -> None:
    docs = [
        make_doc("huge", title="t" * 200_000, description=""),
        make_doc("binary", description="\x00\x01\ufffe\x7f", body="\x00" * 1000),
        make_doc("empty"),
    ]
    manifest = build_manifest(docs)
    assert len(manifest.text.splitlines()) == 3
    assert len(manifest.text.encode("utf-8")) <= MAX_MODEL_MANIFEST_BYTES
    assert "\x00" not in manifest.text


def test_parse_selection_maps_paths_back_to_documents_in_answer_order() -> None:
    a, b = make_doc("a"), make_doc("b")
    manifest = build_manifest([a, b])
    data = {"selected_memories": [manifest_key(b), manifest_key(a), manifest_key(b)]}
    assert parse_selection(data, manifest, 5) == [b, a]


@pytest.mark.parametrize(
    "data",
    [
        {"selected_memories": ["/elsewhere/unknown.md"]},
        {"selected_memories": ["/mem/project/project/a.md"]},  # the file, not its key
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
    data = {"selected_memories": [manifest_key(d) for d in docs]}
    with pytest.raises(SelectorError, match="at most 5"):
        parse_selection(data, build_manifest(docs), 5)


async def test_selector_asks_the_fast_model_in_json_mode_with_query_and_manifest() -> None:
    doc = make_doc("deploy", description="How releases are cut", mtime=NOW)
    model = ScriptedModel(_answer(manifest_key(doc)))
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
    await asyncio.wait_for(model.started.wait(), DEADLINE_SECONDS)
    controller.abort("user")
    with pytest.raises(Aborted):
        await task
