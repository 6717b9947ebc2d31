"""Build the terminal UI on a real runtime pointed at the scripted model server."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.session.runtime import Runtime
from cairn.testing import Reply, ScriptedServer
from cairn.ui.app import CairnApp

from ..polling import DEADLINE_SECONDS

SESSION_ID = "0a1b2c3d-0000-4000-8000-000000000001"  # fixed: snapshots must not change per run
MODEL = "scripted-model"


class FakeClock:
    """The away recap's clock: tests move it instead of waiting minutes."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv("TZ", "UTC")  # times in the /resume picker: the same on every machine
    time.tzset()
    yield project
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


AppFactory = Callable[..., CairnApp]
RuntimeFactory = Callable[..., Runtime]


@pytest.fixture
def make_runtime(scripted_server: ScriptedServer, project: Path) -> RuntimeFactory:
    def make(settings: dict[str, Any] | None = None) -> Runtime:
        data: dict[str, Any] = {"memory": {"enableManagedAutoMemory": False}}
        for key, value in (settings or {}).items():
            if isinstance(value, dict):
                data.setdefault(key, {}).update(value)
            else:
                data[key] = value
        return Runtime.from_endpoint(
            cwd=project,
            settings=Settings.model_validate(data),
            endpoint=Endpoint(scripted_server.base_url, "test-key", MODEL),
        )

    return make


@pytest.fixture
def make_app(make_runtime: RuntimeFactory, clock: FakeClock) -> AppFactory:
    def make(settings: dict[str, Any] | None = None, **kwargs: Any) -> CairnApp:
        kwargs.setdefault("session_id", SESSION_ID)
        kwargs.setdefault("clock", clock)
        app = CairnApp(make_runtime(settings), **kwargs)
        # a steady cursor: a blinking one redraws the prompt twice a second however long a
        # test takes (more redraws the more loaded the machine), and no test reads the blink
        app.prompt_input.cursor_blink = False
        return app

    return make


async def record_session(
    runtime: Runtime, prompts: list[str], *, session_id: str, recap: str | None = None
) -> None:
    """A real session recorded through the runtime (the scripted server answers each prompt)."""
    from cairn.session.session import PromptRequest

    async def ignore(event: object) -> None:
        return None

    session = runtime.new_session(session_id=session_id)
    for prompt in prompts:
        await session.prompt(PromptRequest(prompt), ignore)
    if recap is not None and session.recorder is not None:
        item = {"type": "away_recap", "text": recap}
        session.recorder.record_slash_command(
            phase="result", raw_command="/recap", output_items=[item]
        )
    await session.close()
    await runtime.aclose()


def slow(answer: Reply, seconds: float) -> Reply:
    """``answer`` sent after ``seconds``: a turn that is still running while the test acts."""
    return dataclasses.replace(answer, delay=seconds)


async def send(pilot: Any, text: str) -> None:
    """Put ``text`` in the prompt box and press Enter (tests of typing itself press each key)."""
    pilot.app.prompt_input.text = text
    await pilot.pause()
    await pilot.press("enter")


async def until(pilot: Any, condition: Callable[[], bool]) -> None:
    """Let the app run until ``condition()`` holds (a dialog open, a turn running, a line drawn),
    then one more round so the screen catches up; never longer than a loaded machine needs
    (the assertions after it say what did not happen)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition() and time.monotonic() < deadline:
        await pilot.pause(0.02)
    await pilot.pause()


async def settle(pilot: Any) -> None:
    """Wait for the running turn (and an away recap) to finish and the screen to catch up."""
    await pilot.pause()
    await pilot.app.wait_until_idle()
    await pilot.pause()


async def away_for(pilot: Any, clock: FakeClock, minutes: float) -> None:
    """The terminal loses focus (focus reporting), ``minutes`` pass, and focus comes back."""
    from textual import events

    pilot.app.post_message(events.AppBlur())
    await pilot.pause()
    clock.advance(minutes)
    pilot.app.post_message(events.AppFocus())
    await pilot.pause()
    await settle(pilot)


async def user_turns(pilot: Any, count: int) -> None:
    for index in range(count):
        await send(pilot, f"prompt {index + 1}")
        await settle(pilot)
