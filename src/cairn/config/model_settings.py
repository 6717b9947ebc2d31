"""The ``model`` section of the settings: the model, its endpoints, sampling, output bounds,
request limits and compression."""

# Annotations are evaluated here, not postponed: a section reads its fields' types from them.
from typing import Any, Literal, Self

from cairn.config.schema_fields import section
from cairn.config.sections import Field, InvalidSetting, Section, model_validator

__all__ = [
    "ChatCompressionSettings",
    "GenerationConfig",
    "ModelChoice",
    "ModelPrice",
    "ModelSettings",
    "OutputBounds",
    "SamplingParams",
]


class ModelPrice(Section):
    """What a model costs, in US dollars per million tokens (for `/usage`'s cost column)."""

    input: float = Field(..., ge=0, description="Per million input tokens.")
    output: float = Field(..., ge=0, description="Per million output tokens.")
    cached_input: float | None = Field(
        None, ge=0, description="Per million input tokens read from the prompt cache (default: "
        "`input`)."
    )

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        """The price of one answer's usage (``input_tokens`` include ``cached_tokens``)."""
        cached = min(cached_tokens, input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        fresh = (input_tokens - cached) * self.input + cached * cached_price
        return (fresh + output_tokens * self.output) / 1_000_000


class SamplingParams(Section):
    temperature: float | None = Field(None, description="Sampling temperature.")
    top_p: float | None = Field(None, alias="top_p", description="Nucleus sampling.")
    max_tokens: int | None = Field(
        None,
        alias="max_tokens",
        description="Output token budget of a main request (default 8192; "
        "`maxOutputTokens.main` wins).",
    )


def _bound(default: int, what: str) -> Any:
    return Field(None, gt=0, description=f"{what} (default {default}).")


class OutputBounds(Section):
    """The output bound of each kind of request (its ``X-Cairn-Purpose``); ``None``: the kind's
    default (:data:`cairn.llm.limits.OUTPUT_TOKEN_LIMITS`)."""

    main: int | None = _bound(8192, "The conversation (`samplingParams.max_tokens` sets it too)")
    subagent: int | None = _bound(8192, "An `agent` tool call's own conversation")
    extract: int | None = _bound(4096, "The memory extraction agent")
    dream: int | None = _bound(8192, "The memory consolidation agent")
    compress: int | None = _bound(8192, "The summary that replaces older history")
    recap: int | None = _bound(300, "The session recap")
    title: int | None = _bound(64, "The session title")
    recall_selector: int | None = Field(
        None, gt=0, alias="recall-selector", description="Recall's selector (default 1024)."
    )
    forget: int | None = _bound(2048, "Forget's selector")
    task_checkpoint: int | None = Field(
        None, gt=0, alias="task-checkpoint", description="The task checkpoint (default 2048)."
    )
    web_fetch: int | None = Field(
        None, gt=0, alias="web-fetch", description="The answer `web_fetch` writes (default 4096)."
    )

    def by_kind(self) -> dict[str, int]:
        """The bounds set, by request kind (``recall-selector``, ``web-fetch`` ...)."""
        return {
            info.alias or name: value
            for name, info in type(self).model_fields.items()
            if (value := getattr(self, name)) is not None
        }


class GenerationConfig(Section):
    timeout: float = Field(
        120,
        description="Seconds to wait for the provider's response headers and for each event "
        "of the stream (keep-alive comments do not count); a stream idle that long is retried.",
    )
    request_deadline: float = Field(
        1800,
        description="Seconds one request may take from sending to the end of the answer; "
        "a request past it fails and is not retried.",
    )
    max_retries: int = Field(
        7,
        description="Attempts for a request that fails with HTTP 429 or 5xx (at least 1). "
        "`Retry-After` is honoured up to 60 s, and no retry starts 5 minutes after the first "
        "attempt. A refused connection or an unknown host is retried once.",
    )
    sampling_params: SamplingParams = section(
        SamplingParams, "Sampling parameters sent with main requests."
    )
    max_output_tokens: OutputBounds = section(
        OutputBounds,
        "Output bounds (`max_tokens`) by request kind; an answer cut at its bound is reported "
        "as cut.",
    )
    context_window_size: int | None = Field(
        None,
        description="The model's context window in tokens (default: what the server says, "
        "else 131072; the smaller of this and the server's).",
    )
    thinking_budget: int | None = Field(
        None,
        description="Extended thinking for Anthropic models: the tokens the model may think "
        "before answering (at least 1024; null: off). Side queries never think.",
    )


class ChatCompressionSettings(Section):
    context_percentage_threshold: float = Field(
        0.7,
        description="Compress the conversation when the last prompt used more than this "
        "fraction of the context window (0 turns automatic compression off).",
    )


StructuredOutput = Literal["auto", "json_schema", "json_object", "tool", "prompt"]
PromptCaching = Literal["auto", "on", "off"]


class ModelChoice(Section):
    """One entry of ``model.available``: a model, and where it is served if not at the main
    endpoint (the shape of Qwen Code's ``modelProviders`` entries)."""

    id: str = Field(description="The model's name on its endpoint (sent as `model`).")
    name: str | None = Field(None, description="The label menus show (default: `id`).")
    description: str | None = Field(None, description="One line menus show under the label.")
    auth_type: Literal["openai", "anthropic"] | None = Field(
        None,
        description="The wire of the model's endpoint (default: the main endpoint's; with "
        "neither this nor `baseUrl`, the model is served by the main endpoint).",
    )
    base_url: str | None = Field(
        None,
        description="The model's endpoint (default: the main endpoint's URL on the same wire, "
        "`https://api.anthropic.com` for `anthropic`).",
    )
    env_key: str | None = Field(
        None,
        description="The environment variable holding the key for `baseUrl` (default: the "
        "main endpoint's key on the same wire, else `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).",
    )

    @model_validator(mode="after")
    def _id_not_blank(self) -> Self:
        if not self.id.strip():
            raise InvalidSetting("blank_model", "an entry with a non-blank `id`")
        return self


class ModelSettings(Section):
    name: str | None = Field(None, description="The main model (e.g. `gpt-4.1`, `qwen3-coder`).")
    available: list[str | ModelChoice] | Literal["auto"] = Field(
        default_factory=list,
        description="The models `/model`, the ACP model menu and the daemon offer: names, "
        "entries `{id, name, description, authType, baseUrl, envKey}` (a model served "
        "elsewhere), or `auto` (the endpoint's `GET /models`, read once per process). "
        "Empty: only the main model.",
    )
    structured_output: StructuredOutput = Field(
        "auto",
        description="How side queries that need JSON ask for it: `json_schema` "
        "(`response_format` carrying the schema), `json_object` (`response_format` asking for "
        "any JSON object), `tool` (a forced `respond_in_schema` tool call), `prompt` (the "
        "schema in the prompt only), or `auto` (`json_schema`, falling back per endpoint when "
        "it is refused).",
    )
    supports_images: bool = Field(
        True,
        description="The model takes images. Off (a text-only model): each image is sent as a "
        "one-line note naming it instead.",
    )
    prompt_caching: PromptCaching = Field(
        "auto",
        description="Mark the stable prefix of each request for the endpoint to cache "
        "(`cache_control`): `auto` for endpoints known to honour it (DashScope, Anthropic "
        "models through OpenRouter, the Anthropic API), `on` everywhere, `off` nowhere.",
    )
    max_session_turns: int = Field(
        -1, description="Stop after this many model requests in a session (-1: no limit)."
    )
    session_token_limit: int | None = Field(
        None, description="Refuse to send a request whose prompt exceeds this many tokens."
    )
    skip_loop_detection: bool = Field(
        False, description="Turn off loop detection (repeated tool calls or repeated text)."
    )
    skip_startup_context: bool = Field(
        False, description="Do not start the conversation with the environment summary."
    )
    chat_compression: ChatCompressionSettings = section(
        ChatCompressionSettings, "Automatic compression."
    )
    generation_config: GenerationConfig = section(GenerationConfig, "Request settings.")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="What models cost, by model name, in US dollars per million tokens "
        '(`{"gpt-4.1": {"input": 2, "output": 8, "cachedInput": 0.5}}`): `/usage`, `/context` '
        "and `cairn -p -o json` then say the cost by purpose.",
    )
