"""One Dream: the dreamer's changes, the manifest applied, what it may touch."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from cairn.memory.background.dream.manifest import OPERATIONS_FILE_NAME
from cairn.memory.background.dream.run import DreamReport
from cairn.memory.forget.trash import MANIFEST_NAME, TRASH_FOLDER
from cairn.memory.store.history import read_history
from cairn.testing import RecordedRequest, Reply, ToolCallSpec, reply, tool_call, tool_calls

from ...task_helpers import (
    ProjectFactory,
    agent_script,
    conversation,
    memory_file,
    new_project,
    tool_messages,
    write_memory,
    writes,
)

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

SESSION = "11111111-2222-3333-4444-555555555555"
DREAM_EVENT = "memory.dream"
MERGE_TABS = {  # a manifest merging the two tab memories into feedback/indentation.md
    "version": 1,
    "delete": ["feedback/tabs.md", "feedback/tabs-again.md"],
    "operations": [
        {"type": "dedupe", "sources": ["feedback/tabs.md", "feedback/tabs-again.md"],
         "target": "feedback/indentation.md"},
    ],
}  # fmt: skip


# --- what the dreamer does -------------------------------------------------------------------


async def test_a_dream_merges_duplicates_and_applies_the_manifest(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
    write_memory(project.memory, "feedback/tabs-again.md", "Tabs again", "Use tabs.")
    merged = project.memory / "feedback" / "indentation.md"
    project.server.handler = agent_script(
        "dream",
        writes(
            (str(merged), memory_file("Indentation", "Indent with tabs, never spaces.")),
            (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(MERGE_TABS)),
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


async def test_with_no_project_memories_a_dream_skips_without_asking_the_model(
    new_project: ProjectFactory,
) -> None:
    """Regression: `/dream` in a project with no memories yet ran the dreamer (a model call with
    nothing to consolidate) and printed its raw last answer, "Summary: {}"."""
    project = new_project()

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert (report.status, report.skipped_reason) == ("skipped", "no_memories")
    assert str(report) == "There are no project memories to consolidate yet."
    assert project.server.requests == []


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
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
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


async def test_a_fact_extract_adds_while_the_dreamer_thinks_is_never_deleted(
    new_project: ProjectFactory,
) -> None:
    """Regression (#18): Dream read two memories; while its model call ran, Extract added a fact
    to one; Dream then deleted both, and the new fact was in no file and not in the trash."""
    project = new_project()
    tabs = write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
    again = write_memory(project.memory, "feedback/tabs-again.md", "Tabs again", "Use tabs.")
    merged = project.memory / "feedback" / "indentation.md"
    extracted = threading.Event()

    async def handle(request: RecordedRequest) -> Reply | None:
        answered = len(tool_messages(request))
        if request.purpose == "extract":
            if answered:
                return reply("Saved.")
            edit = {"file_path": str(again), "old_string": "Use tabs.",
                    "new_string": "Use tabs. They are 4 columns wide (FACT-4417)."}  # fmt: skip
            return tool_call("edit", edit)
        if request.purpose != "dream":
            return None
        if answered == 0:
            return tool_calls(
                ToolCallSpec("read_file", {"file_path": str(tabs)}),
                ToolCallSpec("read_file", {"file_path": str(again)}),
            )
        if answered == 2:  # the dreamer's model call: Extract writes meanwhile
            while not extracted.is_set():
                await asyncio.sleep(0.01)
            return writes(
                (str(merged), memory_file("Indentation", "Indent with tabs, never spaces.")),
                (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(MERGE_TABS)),
            )
        return reply("Merged two tab memories.")

    project.server.handler = handle
    dream = asyncio.ensure_future(
        project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)
    )
    await project.server.async_wait_for_requests(2, purpose="dream")
    project.manager.schedule_extract(
        project_root=project.workspace,
        session_id=SESSION,
        history=conversation("Tabs are 4 columns wide here.", "Noted."),
        runtime=project.runtime,
    )
    assert await project.manager.drain(10, extract_only=True)
    assert "FACT-4417" in again.read_text()
    extracted.set()
    report = await dream

    assert "FACT-4417" in again.read_text()  # changed after the dreamer read it: kept
    assert not tabs.exists()
    assert report.deleted == ["feedback/tabs.md"]
    assert report.kept == ["feedback/tabs-again.md"]
    assert "kept feedback/tabs-again.md" in str(report)
    restored = project.manager.restore_last_forget()
    assert restored.ok, restored.message
    assert tabs.read_text() == memory_file("Tabs", "Indent with tabs.")
    assert "FACT-4417" in again.read_text()
    assert not merged.exists()  # the restore undoes the whole Dream, the merge it made too
    assert restored.removed == ["project:feedback/indentation.md"]


async def test_dream_deletions_go_to_the_trash_and_restore_brings_them_back(
    new_project: ProjectFactory,
) -> None:
    project = new_project()
    old = write_memory(project.memory, "project/old-deploy.md", "Old deploy", "Use make.")
    original = old.read_bytes()
    manifest = {"version": 1, "delete": ["project/old-deploy.md"]}
    project.server.handler = agent_script(
        "dream", writes((str(project.memory / OPERATIONS_FILE_NAME), json.dumps(manifest)))
    )
    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)
    assert report.deleted == ["project/old-deploy.md"] and not old.exists()
    [trashed] = (project.memory / TRASH_FOLDER).glob("*/project/old-deploy.md")
    assert trashed.read_bytes() == original
    manifest_json = json.loads((trashed.parent.parent / MANIFEST_NAME).read_text())
    assert manifest_json["operation"] == "dream"
    assert "old-deploy.md" not in (project.memory / "MEMORY.md").read_text()

    restored = project.manager.restore_last_forget()

    assert restored.ok and old.read_bytes() == original
    assert "old-deploy.md" in (project.memory / "MEMORY.md").read_text()


async def test_a_dream_never_re_derives_a_fact_the_user_asked_to_forget(
    new_project: ProjectFactory,
) -> None:
    from cairn.memory.forget.tombstones import Statement, Tombstone, add_tombstones

    project = new_project()
    write_memory(project.memory, "feedback/style.md", "Style", "Keep lines short.")
    forgotten = Statement("Tabs", "Tabs", "Indent with tabs, never spaces.")
    add_tombstones(
        project.user_memory,
        [Tombstone.of(forgotten, id="t", forgotten_at=0, scope="user", relative_path="x")],
    )
    derived = project.memory / "feedback" / "indentation.md"
    project.server.handler = agent_script(
        "dream", writes((str(derived), memory_file("Tabs", "Indent with tabs, never spaces.")))
    )

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert not derived.exists() and report.created == []
    [first, follow_up] = project.requests("dream")
    assert "## Forgotten at the user's request" in (first.system or "")
    assert any("asked to forget this" in message for message in tool_messages(follow_up))


async def test_a_merge_keeps_the_evidence_of_its_sources(new_project: ProjectFactory) -> None:
    from cairn.memory.trust.provenance import Author, provenance_of_text, stamp

    project = new_project()
    (project.workspace / "Makefile").write_text("check:\n\tpytest\n")
    source = project.memory / "project" / "tests.md"
    source.parent.mkdir(parents=True)
    learned = memory_file("Tests", "Run make check.", type="project").replace(
        "type: project\n", "type: project\nevidence: [Makefile]\n"
    )
    author = Author("extract", "s-0", 1, project.workspace, project.memory)
    source.write_text(stamp(learned, previous=None, author=author, path=source).content)
    block = source.read_text().split("---\n")[1].split("provenance:\n", 1)[1]
    merged = project.memory / "project" / "testing.md"
    merged_text = memory_file("Testing", "Run make check; CI runs it too.", type="project")
    merged_text = merged_text.replace("type: project\n", f"type: project\nprovenance:\n{block}")
    dedupe = {"type": "dedupe", "sources": ["project/tests.md"], "target": "project/testing.md"}
    manifest = {"version": 1, "delete": ["project/tests.md"], "operations": [dedupe]}
    project.server.handler = agent_script(
        "dream",
        writes(
            (str(merged), merged_text),
            (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(manifest)),
        ),
    )

    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)

    assert report.deleted == ["project/tests.md"]
    [trashed] = list((project.memory / TRASH_FOLDER).glob("*/project/tests.md"))
    before = provenance_of_text(trashed.read_text())
    after = provenance_of_text(merged.read_text())
    assert before is not None and after is not None
    assert after.evidence == before.evidence and after.by == "dream" and after.session == SESSION


async def test_every_change_of_a_dream_is_restorable_and_said_in_the_version_logs(
    new_project: ProjectFactory,
) -> None:
    from cairn.memory.background.dream.manifest import memory_digests
    from cairn.memory.trust.versions import read_versions

    project = new_project()
    write_memory(project.memory, "feedback/tabs.md", "Tabs", "Indent with tabs.")
    write_memory(project.memory, "feedback/tabs-again.md", "Tabs again", "Use tabs.")
    style = write_memory(project.memory, "feedback/style.md", "Style", "Keep lines short.")
    before = {p: (project.memory / p).read_bytes() for p in memory_digests(project.memory)}
    merged = project.memory / "feedback" / "indentation.md"

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose != "dream":
            return None
        done = len(tool_messages(request))
        if done == 0:
            return tool_call("read_file", {"file_path": str(style)})
        if done == 1:
            return writes(
                (str(merged), memory_file("Indentation", "Indent with tabs, never spaces.")),
                (str(style), memory_file("Style", "Keep lines under 100 characters.")),
                (str(project.memory / OPERATIONS_FILE_NAME), json.dumps(MERGE_TABS)),
            )
        return reply("Merged the tab memories; made the style rule specific.")

    project.server.handler = handle
    report = await project.manager.run_dream_now(session_id=SESSION, runtime=project.runtime)
    assert (report.created, report.updated) == (["feedback/indentation.md"], ["feedback/style.md"])
    assert sorted(report.deleted) == ["feedback/tabs-again.md", "feedback/tabs.md"]
    [deleted] = read_versions(project.memory, "feedback/tabs.md")[-1:]
    assert deleted.deleted and deleted.operation == "dream"
    assert deleted.why == "merged into feedback/indentation.md by Dream"
    style_versions = read_versions(project.memory, "feedback/style.md")
    assert [v.operation for v in style_versions] == ["earlier", "dream"]
    assert style_versions[-1].why == (
        "rewritten by Dream (Merged the tab memories; made the style rule specific.)"
    )
    [made] = read_versions(project.memory, "feedback/indentation.md")
    assert made.why.startswith(
        "feedback/tabs.md, feedback/tabs-again.md merged into this memory by Dream"
    )

    restored = project.manager.restore_last_forget(session_id=SESSION)

    assert restored.ok, restored.message
    after = {p: (project.memory / p).read_bytes() for p in memory_digests(project.memory)}
    assert after == before  # every change of the Dream undone, byte for byte
    assert [v.operation for v in read_versions(project.memory, "feedback/indentation.md")] == [
        "dream", "restore",
    ]  # fmt: skip
