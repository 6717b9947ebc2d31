"""The scripted server as a local model server with a fixed context window.

``ScriptedServer(context_window=4096, flavour="llama.cpp")`` behaves as ``llama-server -c 4096``
does: ``GET /props`` says ``n_ctx``, a prompt that does not fit is refused with llama.cpp's 400
``exceed_context_size_error``, and a model that never stops is cut when the window is full.
``flavour="vllm"`` lists ``max_model_len`` in ``GET /v1/models`` and refuses as vLLM does (the
prompt, or the prompt plus ``max_tokens``); ``flavour="ollama"`` answers ``GET /api/ps`` and
``POST /api/show`` and refuses nothing (Ollama cuts an overlong prompt without a word).

A request's size in tokens is estimated as the scripted replies' usage is: four characters a
token, over the messages' text and the tool declarations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from cairn.testing.request import RecordedRequest, message_text
from cairn.testing.script import CHARS_PER_TOKEN

__all__ = ["FLAVOURS", "Flavour", "LocalServer", "request_tokens"]

Flavour: TypeAlias = Literal["llama.cpp", "vllm", "ollama"]
FLAVOURS: tuple[Flavour, ...] = ("llama.cpp", "vllm", "ollama")


def request_tokens(request: RecordedRequest) -> int:
    """The prompt's size as the server counts it: its messages' text and its tools."""
    chars = sum(len(message_text(m)) for m in request.messages)
    chars += len(request.system or "") if request.wire == "anthropic" else 0
    chars += len(json.dumps(request.tools)) if request.tools else 0
    return max(1, chars // CHARS_PER_TOKEN)


class LocalServer:
    """What a local server of ``flavour`` serving with a ``window``-token context says."""

    def __init__(self, window: int, flavour: Flavour = "llama.cpp") -> None:
        if window < 1:
            raise ValueError(f"the context window must be a positive token count, not {window}")
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {flavour!r}; use one of {', '.join(FLAVOURS)}")
        self.window = window
        self.flavour = flavour

    def model_fields(self) -> dict[str, Any]:
        """What its ``GET /v1/models`` entries carry besides the id."""
        if self.flavour == "llama.cpp":  # the trained window, not the served one
            return {"owned_by": "llamacpp", "meta": {"n_ctx_train": 131072, "n_vocab": 262144}}
        if self.flavour == "vllm":
            return {"owned_by": "vllm", "max_model_len": self.window}
        return {"owned_by": "library"}

    def answer(self, method: str, route: str, models: list[str], body: Any) -> Any | None:
        """Its answer to a request about the server (``None``: it has no such route)."""
        if self.flavour == "llama.cpp" and method == "GET" and route.endswith("/props"):
            return self._props(models)
        if self.flavour != "ollama":
            return None
        if method == "GET" and route.endswith("/api/ps"):
            return {"models": [self._loaded(model) for model in models]}
        if method == "POST" and route.endswith("/api/show"):
            return {
                "parameters": f"num_ctx                        {self.window}",
                "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072},
            }
        return None

    def _props(self, models: list[str]) -> dict[str, Any]:
        model = models[0] if models else "model"
        return {
            "default_generation_settings": {"n_ctx": self.window, "params": {"n_predict": -1}},
            "total_slots": 1,
            "model_path": f"/models/{model}.gguf",
            "chat_template": "{{ messages }}",
            "build_info": "b0000-scripted",
        }

    def _loaded(self, model: str) -> dict[str, Any]:
        return {
            "name": model,
            "model": model,
            "size": 0,
            "digest": "",
            "details": {"format": "gguf"},
            "expires_at": "2100-01-01T00:00:00Z",
            "size_vram": 0,
            "context_length": self.window,
        }

    def refusal(self, prompt: int, max_tokens: int | None) -> Mapping[str, Any] | None:
        """The 400 body refusing a ``prompt``-token request asking for ``max_tokens``."""
        if self.flavour == "llama.cpp" and prompt >= self.window:
            return {
                "error": {
                    "code": 400,
                    "message": f"request ({prompt} tokens) exceeds the available context size "
                    f"({self.window} tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": prompt,
                    "n_ctx": self.window,
                }
            }
        if self.flavour != "vllm":
            return None
        if prompt >= self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your "
                f"request has {prompt} input tokens. Please reduce the length of the input "
                "messages."
            )
        elif max_tokens is not None and prompt + max_tokens > self.window:
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This "
                f"model's maximum context length is {self.window} tokens and your request has "
                f"{prompt} input tokens ({max_tokens} > {self.window} - {prompt})."
            )
        else:
            return None
        error = {"message": message, "type": "BadRequestError", "param": None, "code": 400}
        return {"error": error}

    def room(self, prompt: int) -> int:
        """How many tokens a model may generate after a ``prompt``-token prompt."""
        return max(0, self.window - prompt)
