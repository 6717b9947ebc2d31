"""Helpers shared by the memory tests: documents, files on disk and a model test double."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from cairn import telemetry
from cairn.config.settings import Settings
from cairn.llm.errors import ProviderError
from cairn.llm.types import Finished, ModelRequest, StreamEvent, TextDelta
from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
from cairn.memory.manager import MemoryManager

NOW = 1_750_000_000.0  # a fixed "now" for age calculations
DAY = 86_400.0


def make_doc(
    name: str,
    *,
    root: Path = Path("/mem/project"),
    type: MemoryType = "project",
    scope: MemoryScope = "project",
    title: str | None = None,
    description: str = "",
    body: str = "",
    mtime: float = NOW,
) -> MemoryDoc:
    relative = f"{type}/{name}.md"
    return MemoryDoc(
        path=root / relative,
        relative_path=relative,
        scope=scope,
        type=type,
        title=title or name,
        description=description,
        body=body,
        mtime=mtime,
        size=len(body),
    )


def write_memory(
    root: Path,
    name: str,
    *,
    type: MemoryType = "project",
    title: str | None = None,
    description: str = "",
    body: str = "",
    mtime: float | None = None,
) -> Path:
    """Write one memory file the way an agent would, optionally with a given mtime."""
    path = root / type / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {title or name}\ndescription: {description}\ntype: {type}\n---\n\n{body}\n",
        encoding="utf-8",
    )
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


Answer = str | Callable[[ModelRequest], str]


class ScriptedModel:
    """A Provider test double: answers every request with scripted text.

    ``gate`` holds each answer until the test sets it (a slow selector); ``error`` makes every
    request fail the way a provider does.
    """

    def __init__(
        self,
        answer: Answer = '{"selected_memories": []}',
        *,
        gate: asyncio.Event | None = None,
        error: ProviderError | None = None,
    ) -> None:
        self.answer = answer
        self.gate = gate
        self.error = error
        self.requests: list[ModelRequest] = []
        self.started = asyncio.Event()

    @property
    def model(self) -> str:
        return "main-model"

    @property
    def fast_model(self) -> str | None:
        return "fast-model"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        self.requests.append(request)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        text = self.answer(request) if callable(self.answer) else self.answer
        yield TextDelta(text)
        yield Finished("stop")

    async def aclose(self) -> None:
        return None


def user_text(request: ModelRequest) -> str:
    return "".join(content.text for content in request.contents)


def make_manager(
    tmp_path: Path,
    *,
    enabled: bool = True,
    now: float = NOW,
    local: bool = False,
    semantic: bool = False,
) -> MemoryManager:
    """A manager over a fresh project and cairn home under ``tmp_path``, its clock fixed.

    ``local`` keeps project memory in ``<project>/.cairn/memory`` (shorter paths); ``semantic``
    turns on semantic candidates (off here, so lexical candidate tests see lexical ones only).
    """
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    settings = Settings.model_validate(
        {"memory": {"enableManagedAutoMemory": enabled, "semanticCandidates": semantic}}
    )
    environ = {"CAIRN_HOME": str(tmp_path / "home")}
    if local:
        environ["CAIRN_MEMORY_LOCAL"] = "1"
    return MemoryManager(project, settings=settings, environ=environ, clock=lambda: now)


def project_root(manager: MemoryManager) -> Path:
    assert manager.roots.project is not None
    return manager.roots.project


Event = tuple[str, dict[str, Any]]


class Events:
    """Telemetry events recorded while a test runs."""

    def __init__(self) -> None:
        self.all: list[Event] = []
        self._unsubscribe = telemetry.subscribe(lambda name, attrs: self.all.append((name, attrs)))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [attrs for event, attrs in self.all if event == name]

    def close(self) -> None:
        self._unsubscribe()


def manifest_paths(request: ModelRequest) -> list[str]:
    """The keys (``scope:relative path``) listed in a selector request's manifest, in order."""
    paths = []
    for line in user_text(request).splitlines():
        if line.startswith("- ["):
            paths.append(line.split("] ", 1)[1].split(" (", 1)[0])
    return paths


def key_of(path: Path) -> str:
    """The manifest key of the memory file at ``path`` (under a root's type folder)."""
    scope = "user" if "memories" in path.parts else "project"
    return f"{scope}:{path.parent.name}/{path.name}"


def pick(*names: str) -> Callable[[ModelRequest], str]:
    """A selector answer choosing the manifest entries whose file is ``<name>.md``."""

    def answer(request: ModelRequest) -> str:
        chosen = [p for name in names for p in manifest_paths(request) if p.endswith(f"/{name}.md")]
        return json.dumps({"selected_memories": chosen})

    return answer


def unstamped(text: str) -> str:
    """A memory file's text without the ``provenance`` block cairn stamps on every write."""
    from cairn.memory.trust.provenance import without_provenance

    return without_provenance(text)


def scan_workers(parent: int) -> list[int]:
    """The first scan's worker processes (``python -m cairn.memory.store.bulk``) of process
    ``parent``, found in ``/proc``: a test pauses them (SIGSTOP) to hold an indexing under way
    for as long as it needs, however fast the machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # (the name may hold spaces)
        if ppid == parent and b"cairn.memory.store.bulk" in command:
            found.append(int(entry.name))
    return found


def fill_memories(root: Path, count: int) -> None:
    """``count`` small project memories under ``root`` (a memory large enough for the first
    scan's worker processes when ``count`` is 2,000 or more)."""
    folder = root / "project"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (folder / f"service-{n}.md").write_text(
            f"---\nname: Deploying service {n}\ndescription: how service {n} goes to the "
            f"staging cluster\ntype: project\n---\n\nService {n}: `make deploy-{n}`.\n"
        )
