"""The chat-completions request body: images, tool-result media, notes for text-only models,
cache marks for the endpoints that honour them."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.content import Content, FunctionCall, FunctionResponse, Image, Text
from cairn.llm.caching import extra_cache_headers, marks_cache
from cairn.llm.openai.format import WireOptions, build_request_body, to_openai_messages
from cairn.llm.types import ModelRequest, ToolDeclaration

PNG = Image("image/png", "iVBORw0KGgo=", "shot.png")
GIF = Image("image/gif", "R0lGODlh", "cat.gif")
CALL = FunctionCall("call_1", "read_file", {"file_path": "cat.gif"})
CACHE = {"type": "ephemeral"}


def test_a_user_image_is_an_image_url_part_with_a_data_uri() -> None:
    messages = to_openai_messages(None, [Content("user", [Text("what is this?"), PNG])])

    assert messages == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]


def test_images_from_a_tool_follow_its_text_only_tool_message() -> None:
    history = [
        Content("user", [Text("look at cat.gif")]),
        Content("model", [CALL]),
        Content("user", [FunctionResponse("call_1", "read_file", {"output": "an image"}, (GIF,))]),
    ]

    messages = to_openai_messages(None, history)

    tool, follow_up = messages[2:]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "an image"}
    assert follow_up["role"] == "user"
    assert follow_up["content"][0] == {
        "type": "text",
        "text": "[The images below were returned by read_file.]",
    }
    assert follow_up["content"][1]["image_url"]["url"] == "data:image/gif;base64,R0lGODlh"


def test_a_text_only_model_gets_a_note_instead_of_each_image() -> None:
    history = [
        Content("user", [Text("see"), PNG]),
        Content("model", [CALL]),
        Content("user", [FunctionResponse("call_1", "read_file", {"output": "an image"}, (GIF,))]),
    ]

    messages = to_openai_messages(None, history, images=False)

    assert messages[0]["content"] == (
        "see\n\n[image shot.png (image/png, 8 B) not shown: this model takes text only "
        "(model.supportsImages is false)]"
    )
    assert messages[2]["content"].startswith("an image\n[image cat.gif (image/gif, 6 B)")
    assert len(messages) == 3  # no follow-up message with the tool's images


def ask(**fields: Any) -> ModelRequest:
    return ModelRequest(model="qwen3-coder", contents=[Content.user("hi")], system="sys", **fields)


def test_cache_marks_go_on_the_system_prompt_the_last_tool_and_the_last_message() -> None:
    tools = [ToolDeclaration("a", "", {}), ToolDeclaration("b", "", {})]

    body = build_request_body(ask(tools=tools), WireOptions(cache=True))

    system, user = body["messages"]
    assert system["content"] == [{"type": "text", "text": "sys", "cache_control": CACHE}]
    assert user["content"] == [{"type": "text", "text": "hi", "cache_control": CACHE}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == CACHE


def test_without_cache_marks_text_stays_plain_strings() -> None:
    body = build_request_body(ask(), WireOptions(cache=False))

    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]


@pytest.mark.parametrize(
    ("setting", "base_url", "model", "expected"),
    [
        ("auto", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen3-coder-plus", True),
        ("auto", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "qwen-max", True),
        ("auto", "https://token-plan.cn-beijing.maas.aliyuncs.com/v1", "qwen", True),
        ("auto", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4", True),
        ("auto", "https://openrouter.ai/api/v1", "openai/gpt-4.1", False),
        ("auto", "https://api.openai.com/v1", "gpt-4.1", False),
        ("auto", "http://127.0.0.1:8000/v1", "local", False),
        ("auto", "https://evil.example/dashscope.aliyuncs.com/v1", "qwen", False),
        ("on", "http://127.0.0.1:8000/v1", "local", True),
        ("off", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen", False),
    ],
)
def test_auto_marks_caches_for_known_hosts_only(
    setting: str, base_url: str, model: str, expected: bool
) -> None:
    assert marks_cache(setting, base_url, model) is expected


def test_dashscope_gets_its_cache_switch_header() -> None:
    assert extra_cache_headers("https://dashscope.aliyuncs.com/compatible-mode/v1") == {
        "X-DashScope-CacheControl": "enable"
    }
    assert extra_cache_headers("https://openrouter.ai/api/v1") == {}
