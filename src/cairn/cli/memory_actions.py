"""What ``cairn memory list``, ``show``, ``search`` and ``forget`` do and print, without typer.

The typer commands (:mod:`cairn.cli.memory_cmd`) and the quick path that reads these command
lines itself (:mod:`cairn.cli.memory_argv`) both call these functions, so their output, exit
codes and messages are the same by construction. rich is imported only for a table (search,
forget's plan) or a terminal (:func:`cairn.cli.memory_console.say`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from cairn.cli import memory_console as console
from cairn.exit_codes import ExitCode

if TYPE_CHECKING:
    from cairn.memory.document import MemoryDoc
    from cairn.memory.forget.selection import ForgetPlan
    from cairn.memory.forget.trash import ForgetReport
    from cairn.memory.manager import MemoryManager

__all__ = ["LIST_LIMIT", "SEARCH_LIMIT", "forget", "list_newest", "print_report", "search", "show"]

LIST_LIMIT = 0  # memories `cairn memory list` shows without --limit (0: every one)
SEARCH_LIMIT = 10  # results `cairn memory search` shows without --limit


def list_newest(manager: MemoryManager, limit: int) -> None:
    """``cairn memory list [--limit N]``: every memory (or the newest ``limit``), newest first."""
    total, docs = manager.iter_docs()
    if not total:
        roots = ", ".join(str(root) for root in manager.root_map().values())
        console.out().print(f"No memories yet. They are kept in: {roots}")
        return
    from cairn.cli.memory_listing import print_memories  # (shutil: not for search and show)

    print_memories(docs, now=manager.clock(), total=total, limit=max(limit, 0))
    console.close(manager)  # saves the memories it read again (changed on disk) before its end


def show(reference: str) -> None:
    """``cairn memory show REFERENCE``: one memory, by path or title."""
    manager = console.manager(check_postings=False, trust_saved=True)
    found = manager.find(reference)
    if not found:
        console.fail(f"no memory matches {reference!r} (see `cairn memory list`)")
    if len(found) > 1:
        names = "; ".join(f"{doc.scope}:{doc.relative_path}" for doc in found[:10])
        console.fail(f"{len(found)} memories match {reference!r}: {names}. Name one by its path.")
    doc = found[0]
    console.say(f"{doc.title}", style="bold")
    console.say(f"{doc.type} · {doc.scope} · saved {console.age(manager, doc)} · {doc.path}")
    if doc.description:
        console.say(doc.description, style="italic")
    _print_provenance(manager, doc)
    console.say()
    console.say(doc.body or "(no body)")


def _print_provenance(manager: MemoryManager, doc: MemoryDoc) -> None:
    provenance = manager.provenance(doc)
    if provenance is None:
        return
    where = f" in session {provenance.session[:8]}" if provenance.session else ""
    turn = f", turn {provenance.turn}" if provenance.turn is not None else ""
    by = provenance.by or "an unknown writer"
    console.say(f"learned by {by}{where}{turn} on {provenance.date}")
    if provenance.verified_by:
        console.say(f"verified by: {provenance.verified_by}")
    for entry in provenance.evidence:
        console.say(f"evidence: {entry.path} ({entry.kind} {entry.digest[:12]})")
    [checked] = manager.staleness([doc])
    if checked.staleness is not None:
        console.say(f"{checked.staleness.label}: {checked.staleness.note}")


def search(query: str, limit: int) -> None:
    """``cairn memory search QUERY``: the fast scorer's best ``limit``, with their scores."""
    manager = console.manager(check_postings=False, trust_saved=True)
    hits = manager.search(query, limit=limit)
    if not hits:
        console.say(f"No memory matches: {query}")
        raise SystemExit(ExitCode.ERROR)
    from rich.table import Table

    table = Table("Score", "Type", "Scope", "Title", "Path")
    for hit in hits:
        doc = hit.doc
        table.add_row(f"{hit.score:.3f}", doc.type, doc.scope, doc.title, doc.relative_path)
    console.out().print(table)


def forget(text: str, *, yes: bool) -> None:
    """``cairn memory forget TEXT``: the entries TEXT describes go to the trash, after a
    confirmation on a terminal unless ``yes``."""
    if not text.strip():
        console.fail("Usage: cairn memory forget <memory text to remove>", ExitCode.BAD_INPUT)
    # (a forget reads no posting list: it notes the removal of its memories' terms, and a
    # compaction checks every list before it rewrites them)
    manager = console.manager(check_postings=False, trust_saved=True)
    import asyncio  # (here: search and show never load it)

    plan = asyncio.run(_select(manager, text))
    if not plan.matches:
        console.fail(f"No memory entries matched: {text}")
    _show_plan(plan)
    if not yes:
        if not sys.stdin.isatty():
            console.fail("not forgetting without confirmation: stdin is not a terminal; add --yes")
        count = len(plan.matches)
        question = f"Forget {count} {'entry' if count == 1 else 'entries'}?"
        import typer  # (only to ask: a terminal's user is typing the answer anyway)

        if not typer.confirm(question, default=False):
            console.fail("Nothing was forgotten.")
    print_report(manager.apply_forget(plan))


async def _select(manager: MemoryManager, text: str) -> ForgetPlan:
    provider = console.provider(manager)
    try:
        return await manager.select_forget(text, provider=provider)
    finally:
        if provider is not None:
            await provider.aclose()


def _show_plan(plan: ForgetPlan) -> None:
    from rich.table import Table

    table = Table("Entry", "Type", "Summary", title=f"To forget ({plan.strategy} match)")
    for match in plan.matches:
        label = match.id + (" (pinned)" if match.pinned else "")
        table.add_row(label, match.type, match.summary or match.title)
    console.out().print(table)


def print_report(report: ForgetReport) -> None:
    """A forget's or a restore's outcome (a failure exits nonzero), and what it skipped."""
    if not report.ok:
        console.fail(report.message)
    console.say(report.message)
    for problem in report.problems:
        console.say(f"skipped: {problem}")
