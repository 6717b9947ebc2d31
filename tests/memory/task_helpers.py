"""Helpers for the Extract and Dream tests: a project on a real runtime, a scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn import telemetry
from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text
from cairn.memory.manager import MemoryManager
from cairn.session.runtime import Runtime
from cairn.testing import RecordedRequest, Reply, ScriptedServer, ToolCallSpec, reply, tool_calls
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL

NOW = 1_750_000_000.0  # a fixed "now" for the Dream gates
HOUR = 3600.0


def memory_file(title: str, body: str, *, type: str = "feedback", description: str = "") -> str:
    return f"---\nname: {title}\ndescription: {description or title}\ntype: {type}\n---\n\n{body}\n"


def write_memory(root: Path, relative: str, title: str, body: str = "A fact.") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_file(title, body, type=relative.split("/", 1)[0]))
    return path


def conversation(*texts: str) -> list[Content]:
    """A history alternating user and model texts, starting with the user."""
    return [Content("user" if i % 2 == 0 else "model", [Text(t)]) for i, t in enumerate(texts)]


def is_follow_up(request: RecordedRequest) -> bool:
    """True for a memory agent's request after its own tool calls ran."""
    return bool(request.messages) and request.messages[-1].get("role") == "tool"


def agent_script(
    purpose: str,
    first: Reply | Callable[[RecordedRequest], Reply],
    then: str = "Done.",
) -> Callable[[RecordedRequest], Reply | None]:
    """A server handler for one memory agent: ``first`` for its first request, then text."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose != purpose:
            return None
        if is_follow_up(request):
            return reply(then)
        return first(request) if callable(first) else first

    return handle


def writes(*files: tuple[str, str]) -> Reply:
    """One model reply calling write_file for each (absolute path, content)."""
    return tool_calls(
        *(ToolCallSpec("write_file", {"file_path": path, "content": text}) for path, text in files)
    )


def tool_messages(request: RecordedRequest) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]


@dataclass
class Project:
    """A git project with managed memory, a runtime on the scripted server, and its manager."""

    workspace: Path
    server: ScriptedServer
    runtime: Runtime
    manager: MemoryManager
    events: list[tuple[str, dict[str, Any]]]

    @property
    def memory(self) -> Path:
        assert self.manager.roots.project is not None
        return self.manager.roots.project

    @property
    def user_memory(self) -> Path:
        return self.manager.roots.user

    @property
    def state(self) -> Path:
        return self.manager.roots.state_dir

    def named(self, event: str) -> list[dict[str, Any]]:
        return [attrs for name, attrs in self.events if name == event]

    def requests(self, purpose: str) -> list[RecordedRequest]:
        return self.server.requests_for(purpose)

    def session_files(self, count: int, *, mtime: float | None = None) -> list[Path]:
        """``count`` session recordings in the chats folder."""
        import os
        import uuid

        chats = self.runtime.chats_dir
        chats.mkdir(parents=True, exist_ok=True)
        made = []
        for _ in range(count):
            path = chats / f"{uuid.uuid4()}.jsonl"
            path.write_text("{}\n")
            if mtime is not None:
                os.utime(path, (mtime, mtime))
            made.append(path)
        return made


ProjectFactory = Callable[..., Project]


def make_factory(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleanup: list[Any]
) -> ProjectFactory:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    for name in ("CAIRN_MEMORY_LOCAL", "CAIRN_MEMORY_BASE_DIR", "CAIRN_MEMORY_PROJECT_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    server.default = reply("Nothing to save.")

    def make(
        *, clock: Callable[[], float] | None = None, memory: dict[str, Any] | None = None
    ) -> Project:
        workspace = tmp_path / "project"
        (workspace / ".git").mkdir(parents=True, exist_ok=True)
        settings = Settings.model_validate({"memory": memory or {}})
        from cairn.llm.openai import OpenAIProvider

        provider = OpenAIProvider(
            base_url=server.base_url, api_key=TEST_API_KEY, model=TEST_MODEL, fast_model=None
        )
        runtime = Runtime(
            cwd=workspace,
            settings=settings,
            provider=provider,
            endpoint=Endpoint(server.base_url, TEST_API_KEY, TEST_MODEL),
            record_chats=False,
        )
        kwargs: dict[str, Any] = {"settings": settings}
        if clock is not None:
            kwargs["clock"] = clock
        manager = MemoryManager(runtime.project_root, **kwargs)
        events: list[tuple[str, dict[str, Any]]] = []
        cleanup.append(telemetry.subscribe(lambda name, attrs: events.append((name, attrs))))
        cleanup.append(runtime)
        return Project(workspace, server, runtime, manager, events)

    return make


def wrote_memory_turn(
    path: Path, *, error: bool = False, text: str = "remember: tabs"
) -> list[Content]:
    """A turn whose own agent called write_file on ``path`` (failing when ``error``)."""
    call = FunctionCall("call_9", "write_file", {"file_path": str(path), "content": "x"})
    result: dict[str, Any] = {"error": "denied"} if error else {"output": "Created."}
    parts: list[Part] = [FunctionResponse("call_9", "write_file", result)]
    return [
        Content("user", [Text(text)]),
        Content("model", [call]),
        Content("user", parts),
        Content("model", [Text("Saved it.")]),
    ]


def manifest(data: Any) -> str:
    return json.dumps(data)


def sequence(items: Sequence[Reply]) -> Callable[[RecordedRequest], Reply]:
    """Replies in order, one per call (the last one repeats)."""
    queue = list(items)

    def next_reply(request: RecordedRequest) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return next_reply


@pytest.fixture
async def new_project(
    scripted_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """A factory of :class:`Project` (one workspace per test; each call a new runtime)."""
    cleanup: list[Any] = []
    yield make_factory(scripted_server, tmp_path, monkeypatch, cleanup)
    for item in reversed(cleanup):
        if isinstance(item, Runtime):
            await item.aclose()
        else:
            item()
