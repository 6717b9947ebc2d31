"""Staleness at Recall: a memory whose evidence changed is delivered marked, never as fact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.memory.document import MemoryDoc
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.query import RecallResult
from cairn.memory.trust.evidence import Evidence
from cairn.memory.trust.provenance import Author, entry_check, stamp
from cairn.memory.trust.staleness import EvidenceCheck

from ...git_helpers import make_repository
from ..memory_helpers import NOW, ScriptedModel, make_manager, pick, project_root, user_text

LONG_AGO = NOW - 30 * 86_400  # file times older than the racy window


def memory(title: str, evidence: str, body: str) -> str:
    return (
        f"---\nname: {title}\ndescription: {title}\ntype: project\n"
        f"evidence: [{evidence}]\n---\n\n{body}\n"
    )


@pytest.fixture
def manager(tmp_path: Path) -> MemoryManager:
    make_repository(
        tmp_path / "project",
        {"Makefile": "check:\n\tpytest\n", "src/billing/pay.py": "def pay(): ...\n"},
    )
    for name in ("Makefile", "src/billing/pay.py"):
        os.utime(tmp_path / "project" / name, (LONG_AGO, LONG_AGO))
    return make_manager(tmp_path)


def save(manager: MemoryManager, name: str, text: str) -> Path:
    """A memory written as a memory agent writes it: provenance stamped, evidence hashed."""
    root = project_root(manager)
    path = root / "project" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    author = Author("extract", "s-1", 2, manager.workspace, root, lambda: NOW)
    path.write_text(stamp(text, previous=None, author=author, path=path).content)
    return path


def checked(manager: MemoryManager, check: EvidenceCheck, name: str) -> MemoryDoc:
    [doc] = [d for d in manager.docs() if d.relative_path == f"project/{name}.md"]
    [marked] = check.mark([doc])
    return marked


def test_a_memory_whose_evidence_is_unchanged_is_not_marked(manager: MemoryManager) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    check = EvidenceCheck(manager.workspace)
    assert checked(manager, check, "tests").staleness is None
    assert check.checked == 1 and check.hashed == 1


def test_a_changed_file_marks_the_memory_possibly_stale_with_date_and_file(
    manager: MemoryManager,
) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    (manager.workspace / "Makefile").write_text("check:\n\ttox\n")

    staleness = checked(manager, EvidenceCheck(manager.workspace), "tests").staleness

    assert staleness is not None and staleness.state == "stale"
    assert staleness.note == "learned on 2025-06-15 from Makefile, which has changed since"
    assert staleness.files == ("Makefile",)


def test_a_moved_module_marks_the_memory_as_deleted_or_moved(manager: MemoryManager) -> None:
    save(manager, "pay", memory("Payments live in billing", "src/billing/pay.py", "pay.py"))
    workspace = manager.workspace
    (workspace / "src" / "payments").mkdir()
    (workspace / "src" / "billing" / "pay.py").rename(workspace / "src" / "payments" / "pay.py")

    staleness = checked(manager, EvidenceCheck(workspace), "pay").staleness

    assert staleness is not None and staleness.state == "stale"
    assert staleness.note.endswith("src/billing/pay.py, which has been deleted or moved since")


def test_a_file_is_hashed_again_only_when_its_stat_changed(manager: MemoryManager) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    check = EvidenceCheck(manager.workspace)
    checked(manager, check, "tests")
    checked(manager, check, "tests")
    assert check.hashed == 1  # the second check was a stat

    makefile = manager.workspace / "Makefile"
    makefile.write_text(makefile.read_text())  # rewritten, same content: a new stat
    os.utime(makefile, (LONG_AGO + 60, LONG_AGO + 60))
    assert checked(manager, check, "tests").staleness is None
    assert check.hashed == 2


def test_a_file_changed_within_the_same_second_and_size_is_still_caught(
    manager: MemoryManager,
) -> None:
    """File times tick coarsely: a file modified moments ago is hashed again next time."""
    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    makefile = manager.workspace / "Makefile"
    check = EvidenceCheck(manager.workspace)
    makefile.write_text("check:\n\tpytest\n")  # now: its stat is not trusted
    assert checked(manager, check, "tests").staleness is None
    stat = makefile.stat()
    makefile.write_text("check:\n\tpytesT\n")  # same size
    os.utime(makefile, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    assert checked(manager, check, "tests").staleness is not None


def test_a_memory_without_provenance_keeps_working_unmarked(manager: MemoryManager) -> None:
    root = project_root(manager)
    (root / "project").mkdir(parents=True)
    (root / "project" / "old.md").write_text(
        "---\nname: Old\ndescription: written by Qwen Code\ntype: project\n---\n\nA fact.\n"
    )
    check = EvidenceCheck(manager.workspace)
    assert checked(manager, check, "old").staleness is None and check.checked == 0


def hand_written(manager: MemoryManager, name: str, path: str, digest: str = "a" * 40) -> None:
    entry = Evidence(path, "git", digest, 6)
    root = project_root(manager)
    (root / "project").mkdir(parents=True, exist_ok=True)
    (root / "project" / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: d\ntype: project\nprovenance:\n  by: extract\n"
        f"  at: 2025-06-15T00:00:00Z\n  evidence:\n    - path: {json.dumps(path)}\n"
        f"      git: {digest}\n      size: 6\n      check: {json.dumps(entry_check(entry))}\n"
        "---\n\nbody\n"
    )


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        ("../outside.txt", "../outside.txt is outside the workspace"),
        ("/etc/hostname", "outside the workspace"),
        ("link.txt", "link.txt is a symlink"),
        ("fifo", "fifo is not a regular file"),
    ],
)
def test_evidence_that_cannot_be_checked_is_unverifiable_never_an_error(
    manager: MemoryManager, tmp_path: Path, evidence: str, reason: str
) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    (manager.workspace / "link.txt").symlink_to(tmp_path / "outside.txt")
    os.mkfifo(manager.workspace / "fifo")
    hand_written(manager, "odd", evidence)

    staleness = checked(manager, EvidenceCheck(manager.workspace), "odd").staleness

    assert staleness is not None and staleness.state == "unverifiable"
    assert reason in staleness.note


def test_a_hash_edited_by_hand_is_unverifiable_not_stale(manager: MemoryManager) -> None:
    path = save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    text = path.read_text()
    digest = text.split("git: ", 1)[1].split("\n", 1)[0]
    path.write_text(text.replace(digest, "f" * 40))

    staleness = checked(manager, EvidenceCheck(manager.workspace), "tests").staleness

    assert staleness is not None and staleness.state == "unverifiable"
    assert "Makefile: the entry was edited by hand" in staleness.note


def test_a_deleted_repository_is_unverifiable(manager: MemoryManager) -> None:
    import shutil

    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    check = EvidenceCheck(manager.workspace)
    [doc] = manager.docs()
    shutil.rmtree(manager.workspace)

    [marked] = check.mark([doc])

    assert marked.staleness is not None and marked.staleness.state == "unverifiable"
    assert "is gone" in marked.staleness.note


# --- Recall ------------------------------------------------------------------------------------


async def recall(manager: MemoryManager, query: str, model: ScriptedModel | None = None):  # type: ignore[no-untyped-def]
    fast: list[RecallResult] = []
    result = await manager.recall(
        query,
        provider=model,
        excluded=frozenset(),
        recent_tools=(),
        abort=AbortController().signal,
        on_fast_result=fast.append,
        session_id="s-2",
    )
    return fast[0] if fast else RecallResult(), result


async def test_recall_delivers_a_stale_memory_marked_and_a_fresh_one_plain(
    manager: MemoryManager,
) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "Run make check."))
    save(manager, "pay", memory("Payments code in billing", "src/billing/pay.py", "In pay.py."))
    (manager.workspace / "Makefile").write_text("check:\n\ttox\n")

    fast, _ = await recall(manager, "how do I run the tests or the payments code")

    by_title = {doc.title: doc for doc in fast.docs}
    assert by_title["Payments code in billing"].staleness is None
    assert "### Tests run with make check (project/tests.md) [possibly stale]" in fast.prompt
    assert (
        "> POSSIBLY STALE: learned on 2025-06-15 from Makefile, which has changed since. "
        "Do not state it as fact: check Makefile first" in fast.prompt
    )
    assert "### Payments code in billing (project/pay.md)\n" in fast.prompt
    [stale_ref] = [d.ref for d in fast.docs if d.title == "Tests run with make check"]
    assert stale_ref.note.startswith("possibly stale: learned on 2025-06-15 from Makefile")


async def test_the_selector_sees_the_mark(manager: MemoryManager) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "Run make check."))
    save(manager, "pay", memory("Payments code in billing", "src/billing/pay.py", "In pay.py."))
    (manager.workspace / "Makefile").write_text("check:\n\ttox\n")
    model = ScriptedModel(pick("tests"))

    _, result = await recall(manager, "unrelated words entirely", model)

    [request] = model.requests
    [line] = [line for line in user_text(request).splitlines() if "/tests.md" in line]
    assert "[possibly stale: Makefile changed since]" in line
    [other] = [line for line in user_text(request).splitlines() if "/pay.md" in line]
    assert "possibly stale" not in other
    [chosen] = result.docs
    assert chosen.staleness is not None and "[possibly stale]" in result.prompt


def test_a_file_of_another_size_is_stale_without_being_read(manager: MemoryManager) -> None:
    save(manager, "tests", memory("Tests run with make check", "Makefile", "make check"))
    (manager.workspace / "Makefile").write_text("check:\n\tpytest --maxfail=1\n")
    check = EvidenceCheck(manager.workspace)

    staleness = checked(manager, check, "tests").staleness

    assert staleness is not None and staleness.state == "stale"
    assert check.hashed == 0


def test_a_gigabyte_evidence_file_is_unverifiable_without_being_read(
    manager: MemoryManager,
) -> None:
    big = manager.workspace / "dump.bin"
    with big.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that takes no disk
    hand_written(manager, "dump", "dump.bin")
    text = (project_root(manager) / "project" / "dump.md").read_text()
    entry = Evidence("dump.bin", "git", "a" * 40, 1 << 30)
    text = text.replace("size: 6\n", f"size: {1 << 30}\n").replace(
        text.split("check: ", 1)[1].split("\n", 1)[0], json.dumps(entry_check(entry))
    )
    (project_root(manager) / "project" / "dump.md").write_text(text)
    check = EvidenceCheck(manager.workspace)

    staleness = checked(manager, check, "dump").staleness

    assert staleness is not None and staleness.state == "unverifiable"
    assert "too large to check" in staleness.note


_IMPORT_PROBE = """
import dataclasses, sys
import cairn.memory.trust.staleness
from cairn.memory.trust import provenance
classes = [
    f"{name}.{value.__qualname__}"
    for name, module in list(sys.modules.items())
    if name.startswith("cairn.memory.trust")
    for value in vars(module).values()
    if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == name
]
print(classes, provenance._writing.cache_info().currsize)
"""


def test_the_evidence_check_imports_without_dataclasses_or_write_patterns() -> None:
    """Regression (issue 32): Recall imports these modules before a turn's first request once
    it has a memory to deliver; their six dataclasses and the write-time patterns were ~9 ms
    of that start-up."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[] 0"
