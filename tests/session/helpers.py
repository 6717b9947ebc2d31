"""A world for session tests: a Runtime on a project, its sessions, and what they emitted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.llm.types import ModelRequest
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import ScriptedProvider
from cairn.vocabulary.events import SessionEvent, TurnResult

ANSWER = "Noted."  # what the scripted model says unless a test scripts more


@dataclass
class World:
    """A runtime over ``project`` and everything its sessions emitted."""

    project: Path
    runtime: Runtime
    provider: ScriptedProvider
    events: list[SessionEvent] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)

    def session(self, **kwargs: Any) -> Session:
        session = self.runtime.new_session(**kwargs)
        self.sessions.append(session)
        return session

    def load(self, session_id: str) -> Session:
        session = self.runtime.load_session(session_id)
        self.sessions.append(session)
        return session

    async def prompt(self, session: Session, text: str) -> TurnResult:
        async def sink(event: SessionEvent) -> None:
            self.events.append(event)

        return await session.prompt(PromptRequest(text), sink)

    def main_requests(self) -> list[ModelRequest]:
        return self.provider.requests_for("main")

    def last_main(self) -> ModelRequest:
        return self.main_requests()[-1]

    async def settle(self) -> None:
        """Let the memory work a fresh turn scheduled finish (nothing to wait for when off)."""
        if self.runtime.settings.memory.enable_managed_auto_memory:
            await self.runtime.memory_manager().drain(timeout=10)

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()
        await self.runtime.aclose()


MakeWorld = Callable[..., World]


def write_memory(project: Path, name: str, description: str, body: str) -> Path:
    """A project memory file in ``<project>/.cairn/memory/project/``."""
    path = project / ".cairn" / "memory" / "project" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n\n{body}\n"
    )
    return path
