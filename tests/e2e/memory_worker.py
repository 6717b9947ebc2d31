"""A process that extracts into a shared memory root, round after round.

Used by the multi-process tests and ``benchmarks/memory_bench.py``::

    python tests/e2e/memory_worker.py <project> <worker> <rounds> [files|postgres]

Each round schedules one extraction whose scripted model writes a new memory
(``project/w<worker>-r<round>.md``) and inserts a line into the shared
``project/shared-log.md`` with ``edit``, then waits for it. The process prints one JSON line:
how many extractions completed, and the status of the others. With ``postgres`` the memory is
the database's (``CAIRN_MEMORY_DSN``, namespace ``team``), read through this process's mirror.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from pathlib import Path

from cairn.config.settings import Settings
from cairn.content import Content, FunctionResponse
from cairn.llm.types import ModelRequest
from cairn.session.runtime import Runtime
from cairn.testing import Reply, ScriptedProvider, ToolCallSpec, reply, tool_calls

ANCHOR = "<!-- end -->"
SHARED_LOG = "project/shared-log.md"
_ROUND = re.compile(r"WR-(\d+)-(\d+)")


def memory_text(worker: int, round_: int) -> str:
    front = f"name: Fact w{worker} r{round_}\ndescription: fact {round_} of worker {worker}"
    body = f"Worker {worker} learned fact {round_}. " + "x" * 400
    return f"---\n{front}\ntype: project\n---\n\n{body}\n"


def handler(root: Path) -> object:
    def handle(request: ModelRequest) -> Reply:
        if request.purpose != "extract":
            return reply("ok")
        if any(isinstance(p, FunctionResponse) for p in request.contents[-1].parts):
            return reply("Saved.")
        found = _ROUND.search(" ".join(c.text for c in request.contents))
        assert found is not None
        worker, round_ = int(found.group(1)), int(found.group(2))
        return tool_calls(
            ToolCallSpec(
                "write_file",
                {"file_path": str(root / f"project/w{worker}-r{round_}.md"),
                 "content": memory_text(worker, round_)},
            ),
            ToolCallSpec(
                "edit",
                {"file_path": str(root / SHARED_LOG), "old_string": ANCHOR,
                 "new_string": f"- w{worker} r{round_}\n{ANCHOR}"},
            ),
        )  # fmt: skip

    return handle


async def run(project: Path, worker: int, rounds: int, backend: str = "files") -> dict[str, object]:
    memory: dict[str, object] = {"minAvailableMemoryMb": 0, "backend": backend}
    if backend == "postgres":
        memory["postgres"] = {"namespace": "team"}
    settings = Settings.model_validate({"memory": memory})
    probe = Runtime(cwd=project, settings=settings, provider=ScriptedProvider(), record_chats=False)
    root = probe.memory_manager().roots.project
    assert root is not None
    await probe.aclose()
    provider = ScriptedProvider(handler=handler(root))  # type: ignore[arg-type]
    runtime = Runtime(cwd=project, settings=settings, provider=provider, record_chats=False)
    manager = runtime.memory_manager()
    started = time.monotonic()
    for round_ in range(rounds):
        history = [Content.user(f"Remember this: WR-{worker}-{round_}."), Content.model("Noted.")]
        manager.schedule_extract(
            project_root=runtime.project_root,
            session_id=str(uuid.uuid4()),
            history=history,
            runtime=runtime,
        )
        await manager.drain(120)
    elapsed = time.monotonic() - started
    tasks = manager.recent_tasks()
    await runtime.aclose()
    return {
        "worker": worker,
        "completed": sum(1 for t in tasks if t.status == "completed" and len(t.files) == 2),
        "other": [f"{t.status}:{t.skipped_reason}:{t.detail}" for t in tasks if len(t.files) != 2],
        "seconds": elapsed,
    }


def shared_log_text() -> str:
    """The shared memory every worker inserts its lines into (create it before the workers)."""
    front = "name: Shared log\ndescription: one line per extraction\ntype: project"
    return f"---\n{front}\n---\n\n{ANCHOR}\n"


def audit(root: Path, workers: int, rounds: int) -> dict[str, int]:
    """What was lost or torn in ``root`` after the workers ran (every count should be 0)."""
    from cairn.memory.store.parse import ParseSkip, parse_memory_file
    from cairn.memory.trust.provenance import without_provenance

    expected = [(w, r) for w in range(workers) for r in range(rounds)]
    lost = corrupt = 0
    for worker, round_ in expected:
        path = root / f"project/w{worker}-r{round_}.md"
        if not path.exists():
            lost += 1
        elif without_provenance(path.read_text()) != memory_text(worker, round_) or isinstance(
            parse_memory_file(path, root, "project"), ParseSkip
        ):
            corrupt += 1
    log = (root / SHARED_LOG).read_text()
    lines = [line for line in log.splitlines() if line.startswith("- w")]
    index = (root / "MEMORY.md").read_text()
    missing_index = sum(1 for w, r in expected if f"(project/w{w}-r{r}.md)" not in index) + (
        0 if f"({SHARED_LOG})" in index else 1
    )
    return {
        "lost_files": lost,
        "corrupt_files": corrupt,
        "lost_log_lines": len(expected) - len(set(lines)),
        "duplicate_log_lines": len(lines) - len(set(lines)),
        "missing_index_lines": missing_index,
        "temp_files": len(list(root.rglob(".*.tmp"))),
    }


def main() -> None:
    project, worker, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    backend = sys.argv[4] if len(sys.argv) > 4 else "files"
    print(json.dumps(asyncio.run(run(project, worker, rounds, backend))), flush=True)


if __name__ == "__main__":
    main()
