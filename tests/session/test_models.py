"""The model picker on the session runtime: ``model.available``, ``/model``, per-session models.

Run through real sessions on a Runtime with the in-process scripted model; what is observed is
what the session says and the model of the requests the scripted model received.
"""

from __future__ import annotations

import pytest

from cairn.session.models import ModelSwitchError
from cairn.session.updates import config_option_update, session_config_options
from cairn.testing import ScriptedProvider, reply
from cairn.vocabulary.events import ModelChanged, Notice

from .helpers import ANSWER, MakeWorld, World

pytestmark = pytest.mark.timeout(60)

AVAILABLE = [
    "scripted-model",
    {"id": "big-model", "name": "Big model", "description": "Slow and thorough"},
]


def said(world: World) -> list[str]:
    return [e.text for e in world.events if isinstance(e, Notice) and e.source == "command:model"]


async def test_model_lists_the_available_models_numbered_with_the_current_one_marked(
    make_world: MakeWorld,
) -> None:
    world = make_world(model={"available": AVAILABLE})

    await world.prompt(world.session(), "/model")

    assert said(world) == [
        "Current model: scripted-model. Switch with /model <name or number>:\n"
        "* 1. scripted-model\n"
        "  2. Big model (big-model) — Slow and thorough"
    ]
    assert world.provider.requests == []


async def test_model_by_number_switches_and_the_next_request_uses_it(
    make_world: MakeWorld,
) -> None:
    world = make_world(model={"available": AVAILABLE})
    session = world.session()

    await world.prompt(session, "/model 2")
    await world.prompt(session, "hello")

    assert said(world) == ["Model set to Big model."]
    assert world.last_main().model == "big-model"
    assert [e.model for e in world.events if isinstance(e, ModelChanged)] == ["big-model"]
    assert session.model == "big-model"


async def test_a_model_outside_the_list_is_used_with_a_note(make_world: MakeWorld) -> None:
    world = make_world(model={"available": AVAILABLE})
    session = world.session()

    await world.prompt(session, "/model tiny-model")
    await world.prompt(session, "hello")

    assert said(world) == [
        "Model set to tiny-model (not in model.available: the endpoint must know it)."
    ]
    assert world.last_main().model == "tiny-model"
    assert [o.id for o in session.model_options()] == ["scripted-model", "big-model", "tiny-model"]


async def test_switching_one_session_leaves_the_other_sessions_of_the_runtime_alone(
    make_world: MakeWorld,
) -> None:
    """Regression: /model set the runtime's shared provider, so one daemon or ACP session
    switching the model switched it for every session of the process."""
    world = make_world()
    switched, other = world.session(), world.session()

    await world.prompt(switched, "/model big-model")
    await world.prompt(other, "hello")
    await world.prompt(switched, "hello")

    first, second = world.main_requests()
    assert (first.session_id, first.model) == (other.id, "scripted-model")
    assert (second.session_id, second.model) == (switched.id, "big-model")
    assert world.runtime.provider.model == "scripted-model"


async def test_the_recorded_assistant_message_names_the_model_that_answered(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()

    await world.prompt(session, "/model big-model")
    await world.prompt(session, "hello")
    await session.close()

    loaded = world.load(session.id)
    assert loaded.loaded is not None
    models = [r.get("model") for r in loaded.loaded.records if r.get("type") == "assistant"]
    assert models == ["big-model"]


async def test_a_blank_model_is_refused_and_the_session_keeps_its_model(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    session = world.session()

    with pytest.raises(ModelSwitchError, match="empty"):
        await session.set_model("  ")

    assert session.model == "scripted-model"


async def test_an_entry_whose_key_is_missing_is_refused_in_words(
    make_world: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PICKER_TEST_KEY", raising=False)
    entry = {"id": "remote-model", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "PICKER_TEST_KEY"}
    world = make_world(model={"available": ["scripted-model", entry]})
    session = world.session()

    await world.prompt(session, "/model remote-model")

    assert said(world) == [
        "Cannot switch to remote-model: model.available entry 'remote-model' needs its key "
        "in the environment variable PICKER_TEST_KEY"
    ]
    assert session.model == "scripted-model"


async def test_auto_lists_what_the_endpoint_lists_and_asks_it_once(
    make_world: MakeWorld,
) -> None:
    calls: list[int] = []

    class Counting(ScriptedProvider):
        async def list_models(self):  # type: ignore[no-untyped-def]
            calls.append(1)
            return await super().list_models()

    provider = Counting(reply(ANSWER), models=["alpha", "beta"])
    world = make_world(provider=provider, model={"available": "auto"})
    session = world.session()

    await world.prompt(session, "/model")
    await world.prompt(session, "/model beta")
    await world.prompt(world.session(), "/model")

    assert said(world)[0].splitlines()[1:] == ["  1. alpha", "  2. beta", "* 3. scripted-model"]
    assert said(world)[1] == "Model set to beta."
    assert calls == [1]


async def test_auto_with_an_endpoint_that_cannot_list_offers_the_main_model(
    make_world: MakeWorld,
) -> None:
    class Unlisted(ScriptedProvider):
        async def list_models(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("GET /models answered 404")

    world = make_world(provider=Unlisted(reply(ANSWER)), model={"available": "auto"})

    result = await world.prompt(world.session(), "/model")

    assert result.stop_reason == "end_turn"
    assert said(world) == ["Current model: scripted-model. Switch with /model <name>."]


async def test_config_options_offer_the_models_and_the_approval_modes(
    make_world: MakeWorld,
) -> None:
    world = make_world(model={"available": AVAILABLE})
    session = world.session(approval_mode="auto-edit")
    await session.set_model("big-model")

    model, mode = session_config_options(session)

    assert model == {
        "id": "model",
        "name": "Model",
        "description": "The model this session's requests go to.",
        "category": "model",
        "type": "select",
        "currentValue": "big-model",
        "options": [
            {"value": "scripted-model", "name": "scripted-model"},
            {"value": "big-model", "name": "Big model", "description": "Slow and thorough"},
        ],
    }
    assert mode["id"] == "mode" and mode["category"] == "mode"
    assert mode["currentValue"] == "auto-edit"
    assert [o["value"] for o in mode["options"]] == ["plan", "default", "auto-edit", "yolo"]
    assert config_option_update([model, mode])["sessionUpdate"] == "config_option_update"
