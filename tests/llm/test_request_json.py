"""A request body's JSON with its tool list encoded once: the same bytes httpx's ``json=`` sends."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cairn.content import Content
from cairn.llm.openai.format import WireOptions, build_request_body
from cairn.llm.request_json import ToolList, ToolListEncoder, request_json
from cairn.llm.types import ModelRequest, ToolDeclaration
from cairn.testing import ScriptedServer, reply

from .openai.test_provider import NO_JITTER


def httpx_json(value: Any) -> bytes:
    """What httpx sends for ``json=value`` (httpx._content.encode_json)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def plain(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its tool list as a plain list."""
    return {
        key: list(value) if isinstance(value, ToolList) else value for key, value in body.items()
    }


READ = ToolDeclaration("read_file", "Read a file — «quoted»", {"type": "object", "properties": {}})
SHELL = ToolDeclaration("shell", "Run a command", {"type": "object", "required": ["command"]})


def entry(tool: ToolDeclaration) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    before=st.dictionaries(st.text(), json_values, max_size=3),
    after=st.dictionaries(st.text(), json_values, max_size=3),
    marked=st.booleans(),
)
def test_the_body_is_the_bytes_httpx_would_send(
    before: dict[str, Any], after: dict[str, Any], marked: bool
) -> None:
    tools = ToolListEncoder(entry)(
        [READ, SHELL], {"cache_control": {"type": "x"}} if marked else None
    )
    body = {**{k: v for k, v in before.items() if k != "tools"}, "tools": tools}
    body.update({k: v for k, v in after.items() if k not in body})

    assert request_json(body) == httpx_json(plain(body))


def test_a_declaration_seen_again_is_not_encoded_again() -> None:
    made: list[str] = []

    def counted(tool: ToolDeclaration) -> dict[str, Any]:
        made.append(tool.name)
        return entry(tool)

    encoder = ToolListEncoder(counted)
    first = encoder([READ, SHELL])
    again = encoder([ToolDeclaration(READ.name, READ.description, READ.parameters), SHELL])

    assert made == ["read_file", "shell"]
    assert again.json == first.json == httpx_json([entry(READ), entry(SHELL)])


def test_changed_parameters_are_encoded_anew() -> None:
    """The same name and description with another parameters object: its own JSON."""
    encoder = ToolListEncoder(entry)
    encoder([READ])
    changed = ToolDeclaration(READ.name, READ.description, {"type": "object", "required": ["path"]})

    assert encoder([changed]).json == httpx_json([entry(changed)])


def test_a_cache_mark_leaves_the_kept_entry_unmarked() -> None:
    encoder = ToolListEncoder(entry)
    marked = encoder([READ, SHELL], {"cache_control": {"type": "ephemeral"}})
    unmarked = encoder([READ, SHELL])

    assert json.loads(marked.json)[-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in unmarked[-1]
    assert unmarked.json == httpx_json(list(unmarked))


def test_the_openai_body_with_caching_marks_is_unchanged() -> None:
    request = ModelRequest(model="m", contents=[Content.user("hi")], tools=[READ, SHELL])
    for cache in (False, True):
        body = build_request_body(request, WireOptions(cache=cache))

        assert isinstance(body["tools"], ToolList)
        assert request_json(body) == httpx_json(plain(body))
        assert ("cache_control" in body["tools"][-1]) is cache


async def test_the_model_receives_the_body_httpx_would_send(
    scripted_server: ScriptedServer,
) -> None:
    from cairn.llm.openai import OpenAIProvider

    scripted_server.default = reply("ok")
    provider = OpenAIProvider(
        base_url=scripted_server.base_url, api_key="k", model="m", retry=NO_JITTER
    )
    request = ModelRequest(model="m", contents=[Content.user("hi")], tools=[READ, SHELL])
    try:
        for _ in range(2):
            [_ async for _ in provider.stream(request)]
    finally:
        await provider.aclose()

    expected = httpx_json(plain(provider.build_body(provider.bounded(request), "json_schema")))
    assert [r.raw for r in scripted_server.requests] == [expected, expected]
    assert {r.headers["content-type"] for r in scripted_server.requests} == {"application/json"}
