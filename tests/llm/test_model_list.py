"""``GET /models`` on both wires (the model picker's ``model.available: "auto"``)."""

from __future__ import annotations

import uuid

import pytest

from cairn.llm.anthropic import AnthropicProvider
from cairn.llm.errors import ProviderError
from cairn.llm.http_provider import HttpProvider, parse_model_list
from cairn.llm.openai import OpenAIProvider
from cairn.llm.types import ListedModel
from cairn.testing import RecordedRequest, ScriptedServer


@pytest.mark.parametrize("wire", [OpenAIProvider, AnthropicProvider])
async def test_the_endpoint_lists_its_models_on_both_wires(wire: type[HttpProvider]) -> None:
    key = f"key-{uuid.uuid4()}"
    with ScriptedServer(models=["alpha", "beta"]) as server:
        provider = wire(base_url=server.base_url, api_key=key, model="alpha")
        try:
            listed = await provider.list_models()
        finally:
            await provider.aclose()
        # Only this provider's requests: a cairn process of another test may still be sending
        # to the port this server now has (seen once on a loaded machine).
        [request] = [r for r in server.other_requests if key in _credentials(r)]

    assert listed == [ListedModel("alpha", "alpha"), ListedModel("beta", "beta")]
    assert (request.method, request.purpose) == ("GET", "models")
    assert request.path == "/v1/models"


def _credentials(request: RecordedRequest) -> str:
    """The key a request carries on either wire (``Authorization: Bearer`` or ``x-api-key``)."""
    return f"{request.headers.get('authorization')} {request.headers.get('x-api-key')}"


async def test_an_endpoint_that_does_not_answer_is_a_provider_error() -> None:
    with ScriptedServer() as server:
        base_url = server.base_url  # nothing listens there once the server stopped
    provider = OpenAIProvider(base_url=base_url, api_key="k", model="m")
    try:
        with pytest.raises(ProviderError, match="cannot connect"):
            await provider.list_models()
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"data": "x"}', b'{"models": []}', b"null"],
)
def test_a_body_that_is_no_model_list_is_a_provider_error(body: bytes) -> None:
    with pytest.raises(ProviderError, match="did not answer with a model list"):
        parse_model_list(body, "http://host/v1/models")


def test_entries_without_an_id_are_skipped_and_display_names_kept() -> None:
    body = b'{"data": [{"id": "a", "display_name": "Model A"}, {"id": 3}, "b", {"id": "c"}]}'

    assert parse_model_list(body, "u") == [ListedModel("a", "Model A"), ListedModel("c", "")]
