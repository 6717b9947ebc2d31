"""One Dream: the dreamer's changes, the manifest applied, what it may touch."""

from __future__ import annotations

import json

import pytest

from cairn.memory.background.dream.manifest import OPERATIONS_FILE_NAME
from cairn.memory.background.dream.run import DreamReport
from cairn.memory.store.history import read_history
from cairn.testing import reply, tool_call

from ...task_helpers import (
    ProjectFactory,
    agent_script,
    memory_file,
    new_project,
    write_memory,
    writes,
)

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

SESSION = "11111111-2222-3333-4444-555555555555"
DREAM_EVENT = "memory.dream"


# --- what the dreamer does -------------------------------------------------------------------


async def test_a_dream_merges_duplicates_and_applies_the_manifest(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
    write_memory(project.memory, "feedback/tabs-again.md", "Tabs again", "Use tabs.")
    merged = project.memory / "feedback" / "indentation.md"
    operations = {
        "version": 1,
        "delete": ["feedback/tabs.md", "feedback/tabs-again.md"],
        "operations": [
            {"type": "dedupe", "sources": ["feedback/tabs.md", "feedback/tabs-again.md"],
             "target": "feedback/indentation.md"},
        ],
    }  # fmt: skip
    project.server.handler = agent_script(
        "dream",
        writes(
            (str(merged), memory_file("Indentation", "Indent with tabs, never spaces.")),
            (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(operations)),
        ),
        "Merged two tab memories.",
    )
    steps: list[str] = []

    async def progress(text: str) -> None:
        steps.append(text)

    report = await project.manager.run_dream_now(
        session_id=SESSION, runtime=project.runtime, progress=progress
    )

    assert report.status == "updated"
    assert (report.created, report.deleted, report.deduped) == (
        ["feedback/indentation.md"], ["feedback/tabs.md", "feedback/tabs-again.md"], 2,
    )  # fmt: skip
    assert sorted(p.name for p in (project.memory / "feedback").iterdir()) == ["indentation.md"]
    assert not (project.memory / OPERATIONS_FILE_NAME).exists()
    index = (project.memory / "MEMORY.md").read_text()
    assert "indentation.md" in index and "tabs.md" not in index
    assert any("Write" in step for step in steps)
    assert "1 created" in str(report) and "Merged two tab memories." in str(report)
    [entry], _ = read_history([("project", project.memory)])
    assert entry.operation == "dream" and len(entry.files) == 3


async def test_an_invalid_manifest_deletes_nothing_and_is_removed(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    keep = write_memory(project.memory, "feedback/keep.md", "Keep", "Keep me.")
    project.server.handler = agent_script(
        "dream",
        writes(
            (
                str(project.memory / OPERATIONS_FILE_NAME),
                json.dumps({"version": 1, "delete": ["feedback/keep.md", "../outside.md"]}),
            )
        ),
    )

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert keep.exists()
    assert report.manifest_error is not None and ".." in report.manifest_error
    assert not (project.memory / OPERATIONS_FILE_NAME).exists()
    assert "not applied" in str(report)


async def test_the_dreamer_reads_transcripts_but_cannot_write_user_memory(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    chats = project.runtime.chats_dir
    chats.mkdir(parents=True)
    (chats / f"{SESSION}.jsonl").write_text('{"text": "we moved to Postgres 16"}\n')
    user_file = project.user_memory / "user" / "me.md"
    replies = iter(
        [
            tool_call("read_file", {"file_path": str(chats / f"{SESSION}.jsonl")}),
            writes((str(user_file), memory_file("Me", "x", type="user"))),
            reply("Done."),
        ]
    )
    project.server.handler = lambda r: next(replies) if r.purpose == "dream" else None

    await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    second, third = project.requests("dream")[1:]
    assert "Postgres 16" in json.dumps(second.messages)
    assert not user_file.exists()
    assert "outside the allowed directories" in json.dumps(third.messages)


def test_a_report_reads_as_a_summary() -> None:
    report = DreamReport("updated", created=["a.md"], updated=["b.md"], duration_s=1.25)
    assert str(report).startswith("Dream finished: 1 created, 1 updated, 0 deleted (1.2 s).")
    assert str(DreamReport("noop")).startswith("Dream finished: no changes")
