"""The scripted server as a local model server: a fixed window, and a model that never stops.

Driven by a plain HTTP client, as any agent pointed at it would drive it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cairn.testing import Reply, ScriptedServer, reply
from cairn.testing.local_server import LocalServer

from ..polling import eventually

CHAT = "/chat/completions"
_CLIENT = httpx.Client(trust_env=False)


def chat(server: ScriptedServer, text: str = "hi", **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": True, **extra}
    return _CLIENT.post(server.base_url + CHAT, json=body)


def payloads(response: httpx.Response) -> list[dict[str, Any]]:
    lines = [line[len("data: ") :] for line in response.text.split("\n")]
    return [json.loads(line) for line in lines if line.startswith("{")]


def streamed_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )


def test_llama_cpp_props_say_the_window() -> None:
    with ScriptedServer(models=["gemma"], context_window=8192) as server:
        props = _CLIENT.get(f"http://127.0.0.1:{server.port}/props").json()
        listed = _CLIENT.get(server.base_url + "/models").json()

    assert props["default_generation_settings"]["n_ctx"] == 8192
    assert listed["data"][0]["owned_by"] == "llamacpp"
    assert "max_model_len" not in listed["data"][0]


def test_vllm_lists_max_model_len_and_has_no_props() -> None:
    with ScriptedServer(models=["qwen"], context_window=32768, flavour="vllm") as server:
        listed = _CLIENT.get(server.base_url + "/models").json()
        props = _CLIENT.get(f"http://127.0.0.1:{server.port}/props")

    assert listed["data"][0]["max_model_len"] == 32768
    assert props.status_code == 404


def test_ollama_answers_ps_and_show() -> None:
    with ScriptedServer(models=["llama3"], context_window=4096, flavour="ollama") as server:
        root = f"http://127.0.0.1:{server.port}"
        running = _CLIENT.get(root + "/api/ps").json()
        shown = _CLIENT.post(root + "/api/show", json={"model": "llama3"}).json()

    assert running["models"][0]["name"] == "llama3"
    assert running["models"][0]["context_length"] == 4096
    assert "num_ctx" in shown["parameters"]


def test_a_prompt_longer_than_the_window_gets_llama_cpps_400() -> None:
    with ScriptedServer(context_window=100) as server:
        response = chat(server, "word " * 200)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == 100 and error["n_prompt_tokens"] > 100
    assert len(server.requests) == 1  # recorded, as every request is


def test_vllm_refuses_a_bound_its_window_cannot_hold() -> None:
    with ScriptedServer(context_window=1000, flavour="vllm") as server:
        server.default = reply("ok")
        refused = chat(server, "hi", max_tokens=2000)
        answered = chat(server, "hi", max_tokens=500)

    assert refused.status_code == 400
    assert "'max_tokens' or 'max_completion_tokens' is too large: 2000" in refused.text
    assert answered.status_code == 200


def test_ollama_refuses_nothing() -> None:
    with ScriptedServer(context_window=100, flavour="ollama") as server:
        server.enqueue(reply("ok"))
        response = chat(server, "word " * 200)

    assert response.status_code == 200


def test_an_endless_reply_stops_at_max_tokens_with_length() -> None:
    with ScriptedServer() as server:
        server.enqueue(Reply(text="Paris is ", endless=True))
        chunks = payloads(chat(server, max_tokens=40))

    text = streamed_text(chunks)
    assert text.startswith("Paris is ")
    assert len(text) == len("Paris is ") + 40 * 4
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"]["completion_tokens"] == 40 + len("Paris is ") // 4


def test_an_endless_reply_stops_when_the_window_is_full() -> None:
    with ScriptedServer(context_window=200) as server:
        server.enqueue(Reply(endless=True))
        chunks = payloads(chat(server, "x" * 400))  # about 100 tokens of prompt

    generated = len(streamed_text(chunks)) // 4
    assert 90 <= generated <= 110
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_an_endless_reply_never_repeats_itself_enough_to_look_like_a_loop() -> None:
    with ScriptedServer() as server:
        server.enqueue(Reply(endless=True))
        text = streamed_text(payloads(chat(server, max_tokens=2000)))

    pieces = [text[i : i + 50] for i in range(0, len(text) - 50, 50)]
    assert len(set(pieces)) == len(pieces)


def test_an_unbounded_endless_reply_streams_until_the_client_hangs_up() -> None:
    with ScriptedServer() as server:
        server.enqueue(Reply(endless=True))
        received = 0
        with _CLIENT.stream("POST", server.base_url + CHAT, json={"stream": True}) as response:
            for piece in response.iter_bytes():
                received += len(piece)
                if received > 200_000:
                    break

    assert received > 200_000
    assert eventually(lambda: bool(server.dropped))
    assert len(server.dropped) == 1


def test_a_window_must_be_positive_and_the_flavour_known() -> None:
    with pytest.raises(ValueError, match="positive"):
        LocalServer(0)
    with pytest.raises(ValueError, match="unknown flavour"):
        LocalServer(100, "tgi")  # type: ignore[arg-type]
