"""Forgetting sticks: a fact the user had forgotten is not learned again from the same
conversation, and comes back only when the user states it again.

A real Session on a Runtime, the in-process scripted model playing the user's assistant, the
extraction agent and the forget selector; what is observed is the memory folder on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.content import FunctionResponse
from cairn.llm.types import ModelRequest
from cairn.testing import Reply, reply, tool_call

from .helpers import MakeWorld, World

pytestmark = pytest.mark.timeout(60)

TABS = """---
name: Indent with tabs
description: The user always indents code with tabs
type: feedback
---

Indent with tabs, never spaces.

Why: the user said they always indent with tabs.
How to apply: every file you write or edit.
"""
TABS_AGAIN = """---
name: Tabs for indentation
description: The user indents with tabs
type: feedback
---

Always indent with tabs.
"""


class ExtractionAgent:
    """The scripted extraction agent: it saves the tabs rule whenever the conversation holds
    the user's statement of it, as a model that sees the statement in its window would."""

    def __init__(self, user_root: Path) -> None:
        self.user_root = user_root
        self.attempts = 0
        self.refusals: list[str] = []

    def __call__(self, request: ModelRequest) -> Reply | None:
        if request.purpose == "forget":
            return reply(json.dumps({"selected_ids": ["user:feedback/tabs.md"]}))
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose != "extract":
            return None
        results = [p for p in request.contents[-1].parts if isinstance(p, FunctionResponse)]
        if results:
            self.refusals.extend(p.text for p in results if p.is_error)
            return reply("Done.")
        said = " ".join(c.text for c in request.contents if c.role == "user")
        if "indent with tabs" not in said:
            return reply("Nothing to save.")
        self.attempts += 1
        content = TABS if self.attempts == 1 else TABS_AGAIN
        name = "tabs.md" if self.attempts == 1 else "tabs-again.md"
        path = self.user_root / "feedback" / name
        return tool_call("write_file", {"file_path": str(path), "content": content})


def tab_memories(world: World) -> list[str]:
    root = world.runtime.memory_manager().roots.user
    return sorted(p.name for p in (root / "feedback").glob("*.md")) if root.exists() else []


async def test_a_forgotten_preference_is_not_saved_again_from_the_same_conversation(
    make_world: MakeWorld,
) -> None:
    """Regression (#27): say "I always indent with tabs", let Extract save it, then
    `/forget the tabs rule`: on the next prompt Extract still saw the statement in its window
    of recent messages, had no record that it was forgotten, and saved it again."""
    world = make_world(memory=True)
    agent = ExtractionAgent(world.runtime.memory_manager().roots.user)
    world.provider.handler = agent
    session = world.session()

    await world.prompt(session, "I always indent with tabs.")
    await world.settle()
    assert tab_memories(world) == ["tabs.md"]

    await world.prompt(session, "/forget the tabs rule")
    assert tab_memories(world) == []

    await world.prompt(session, "Now let's look at the parser.")
    await world.settle()

    assert tab_memories(world) == []
    assert agent.attempts == 2  # the agent did try again: the memory guard refused it
    assert any("forget" in refusal for refusal in agent.refusals), agent.refusals


async def test_a_forgotten_preference_stated_again_later_is_saved_again(
    make_world: MakeWorld,
) -> None:
    world = make_world(memory=True)
    agent = ExtractionAgent(world.runtime.memory_manager().roots.user)
    world.provider.handler = agent
    session = world.session()
    await world.prompt(session, "I always indent with tabs.")
    await world.settle()
    await world.prompt(session, "/forget the tabs rule")

    await world.prompt(session, "Actually, I do always indent with tabs. Please keep that.")
    await world.settle()

    assert tab_memories(world) == ["tabs-again.md"]
    assert agent.refusals == []
