"""``cairn memory``: list, show, search, recall, forget, restore, reindex, dream, log, path.

Argument parsing and output only; the work is done by :class:`cairn.memory.MemoryManager`.
``list``, ``show``, ``search`` and ``forget`` are :mod:`cairn.cli.memory_actions`', which
:mod:`cairn.cli.memory_argv` also runs without typer for their plain command lines.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import uuid
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from cairn.abort import AbortController
from cairn.cli import memory_actions as actions
from cairn.cli import memory_console as console
from cairn.cli.app import group_app
from cairn.config.loader import NoAuthError, resolve_endpoint
from cairn.config.paths import project_root
from cairn.config.settings import Settings
from cairn.exit_codes import ExitCode
from cairn.memory.document import MemoryScope
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.query import RecallResult

if TYPE_CHECKING:
    from cairn.config.loader import Endpoint
    from cairn.llm.types import Provider
    from cairn.memory.background.dream.run import DreamReport
    from cairn.memory.store.history import HistoryEntry
    from cairn.memory.trust.versions import Version

__all__ = ["memory_app"]

MAX_LOG_FILES_SHOWN = 3  # file names per audit line in `cairn memory log`
MAX_LOG_FILE_WIDTH = 48  # columns a file name keeps before it is folded


class MigrationTarget(StrEnum):
    postgres = "postgres"
    files = "files"


memory_app = group_app("memory")


@memory_app.callback()
def _options(
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            envvar="CAIRN_MEMORY_TENANT",
            help="Act on this daemon tenant's memory (`cairn serve --tenant-header`).",
        ),
    ] = None,
) -> None:
    console.use_tenant(tenant or None)


@memory_app.command("list")
def list_memories(
    forgotten: Annotated[
        bool,
        typer.Option(
            "--forgotten",
            help="List what you asked to forget (Extract and Dream never re-learn it).",
        ),
    ] = False,
    stale: Annotated[
        bool,
        typer.Option(
            "--stale", help="Only memories whose evidence changed or cannot be verified, and why."
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", help="Only the N most recently changed (0: every one)."),
    ] = actions.LIST_LIMIT,
) -> None:
    """List every memory, newest first: type, scope, age, title and path."""

    def command() -> None:
        manager = console.manager()
        if forgotten:
            _list_forgotten(manager)
            return
        if stale:
            _list_stale(manager)
            return
        actions.list_newest(manager, limit)

    console.run(command)


def _list_stale(manager: MemoryManager) -> None:
    docs = [doc for doc in manager.staleness(manager.docs()) if doc.staleness is not None]
    if not docs:
        console.out().print(
            "No memory is stale: the evidence of every memory that has some is unchanged."
        )
        return
    table = Table("Status", "Scope", "Title", "Path", "Why")
    for doc in docs:
        assert doc.staleness is not None
        table.add_row(
            doc.staleness.label, doc.scope, doc.title, doc.relative_path, doc.staleness.note
        )
    console.out().print(table)


@memory_app.command("verify")
def verify() -> None:
    """Check every memory's evidence against the workspace files now."""

    def command() -> None:
        manager = console.manager()
        checked = [
            (doc, provenance)
            for doc in manager.staleness(manager.docs())
            if (provenance := manager.provenance(doc)) is not None
            and (provenance.evidence or provenance.problems)
        ]
        out = console.out()
        if not checked:
            out.print("No memory records evidence: there is nothing to verify.")
            return
        table = Table("Status", "Title", "Path", "Evidence", "Why")
        counts = {"current": 0, "possibly stale": 0, "cannot verify": 0}
        for doc, provenance in checked:
            status = doc.staleness.label if doc.staleness else "current"
            counts[status] += 1
            why = doc.staleness.note if doc.staleness else ""
            files = "\n".join(entry.path for entry in provenance.evidence)
            table.add_row(status, doc.title, doc.relative_path, files, why)
        out.print(table)
        noun = "memory" if len(checked) == 1 else "memories"
        out.print(
            f"{len(checked)} {noun} with evidence: {counts['current']} current, "
            f"{counts['possibly stale']} possibly stale, {counts['cannot verify']} cannot be "
            "verified.",
            markup=False,
        )

    console.run(command)


def _list_forgotten(manager: MemoryManager) -> None:
    tombstones = manager.forgotten()
    if not tombstones:
        console.out().print("Nothing is forgotten: no tombstones are recorded.")
        return
    table = Table("Forgotten", "Scope", "Title", "Fact", "Was at", "Request")
    for tombstone in tombstones:
        table.add_row(
            tombstone.date,
            tombstone.scope,
            tombstone.title,
            tombstone.summary or tombstone.description,
            tombstone.relative_path,
            tombstone.query,
        )
    console.out().print(table)
    console.out().print(
        "A forgotten fact is saved again only when you state it again; "
        "`cairn memory restore` undoes the last forget.",
        markup=False,
    )


@memory_app.command("show")
def show(reference: Annotated[str, typer.Argument(help="A path or a title.")]) -> None:
    """Show one memory, found by path (absolute or relative to its root) or by title."""
    console.run(lambda: actions.show(reference))


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Results shown.")
    ] = actions.SEARCH_LIMIT,
) -> None:
    """Rank memories with Recall's fast scorer and show the scores."""
    console.run(lambda: actions.search(query, limit))


def _print_result(title: str, result: RecallResult) -> None:
    out = console.out()
    out.rule(title)
    if result.docs:
        out.print(result.prompt.rstrip(), markup=False, highlight=False)
    else:
        out.print("(nothing)")


@memory_app.command("recall")
def recall(
    query: Annotated[str, typer.Argument(help="A prompt, as a user would type it.")],
) -> None:
    """Show what a turn would receive for QUERY: the fast result, then the refined one."""

    def command() -> None:
        manager = console.manager()
        if not manager.enabled:
            console.out().print(
                "Managed memory is off (memory.enableManagedAutoMemory): a turn gets nothing."
            )
            return
        provider = console.provider(manager)
        fast, refined = asyncio.run(_recall_both(manager, query, provider))
        _print_result("fast phase (first request of the turn)", fast)
        if provider is None:
            console.out().print(
                "\nThe refined phase needs a model endpoint: set OPENAI_BASE_URL, OPENAI_API_KEY "
                "and OPENAI_MODEL (or security.auth in settings.json)."
            )
            return
        _print_result(f"refined phase ({refined.strategy}; after the next tool result)", refined)

    console.run(command)


async def _recall_both(
    manager: MemoryManager, query: str, provider: Provider | None
) -> tuple[RecallResult, RecallResult]:
    published: list[RecallResult] = []
    try:
        result = await manager.recall(
            query,
            provider=provider,
            excluded=frozenset(),
            recent_tools=(),
            abort=AbortController().signal,
            on_fast_result=published.append,
        )
    finally:
        if provider is not None:
            await provider.aclose()
    fast = published[0] if published else RecallResult()
    fresh = [doc for doc in result.docs if str(doc.path) not in fast.paths]
    refined = RecallResult(manager.render(fresh), fresh, result.strategy)
    return fast, refined


@memory_app.command("forget")
def forget(
    text: Annotated[str, typer.Argument(help="The memory to forget, in your own words.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Forget the memory entries TEXT describes (up to 5). They go to a trash folder."""
    console.run(lambda: actions.forget(text, yes=yes))


@memory_app.command("restore")
def restore(
    memory: Annotated[
        str | None,
        typer.Argument(help="A memory (path or title): restore one of its versions instead."),
    ] = None,
    version: Annotated[
        int | None,
        typer.Option(
            "--version", min=1, help="The version to restore (default: the one before the last)."
        ),
    ] = None,
) -> None:
    """Undo the last forget (its tombstones go too), the last Dream or the last import; or
    write an earlier version of one MEMORY back (see `cairn memory log MEMORY`)."""
    if memory is None:
        if version is not None:
            console.fail("--version needs a memory: cairn memory restore <memory> --version N")
        console.run(lambda: actions.print_report(console.manager().restore_last_forget()))
        return

    def command() -> None:
        manager = console.manager()
        scope, relative, versions = _one_log(manager, memory)
        numbers = [v.number for v in versions if v.content is not None]
        wanted = version if version is not None else _previous(versions)
        if wanted is None or wanted not in numbers:
            which = f"version {wanted}" if wanted is not None else "earlier version"
            console.fail(f"{scope}:{relative} has no {which} to restore (see `cairn memory log`)")
        try:
            restored = manager.restore_version(scope, relative, wanted)
        except ValueError as error:
            console.fail(str(error))
        console.out().print(
            f"Restored version {wanted} of {scope}:{relative} (recorded as version "
            f"{restored.number}).",
            markup=False,
        )

    console.run(command)


def _previous(versions: list[Version]) -> int | None:
    """The version before the newest one that has content."""
    kept = [v.number for v in versions[:-1] if v.content is not None]
    return kept[-1] if kept else None


def _one_log(manager: MemoryManager, reference: str) -> tuple[MemoryScope, str, list[Version]]:
    found = manager.versions(reference)
    if not found:
        console.fail(
            f"no memory and no version log matches {reference!r} (see `cairn memory list`)"
        )
    if len(found) > 1:
        names = "; ".join(f"{scope}:{relative}" for scope, relative, _ in found[:10])
        console.fail(f"{len(found)} memories match {reference!r}: {names}. Name one by its path.")
    return found[0]


@memory_app.command("reindex")
def reindex() -> None:
    """Re-read every memory, regenerate the MEMORY.md indexes and save the search index."""

    def command() -> None:
        manager = console.manager()
        out = console.out()
        with out.status("Reading memory files…") as status:
            report = manager.reindex(on_step=lambda step: status.update(f"{step}…"))
        for warning in report.warnings:
            out.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
        noun = "memory" if report.docs == 1 else "memories"
        roots = [str(root) for root in manager.root_map().values() if root.is_dir()]
        written = f"; rebuilt MEMORY.md in {', '.join(roots)}" if roots else ""
        out.print(
            f"Indexed {report.docs} {noun} ({report.reparsed} read again){written}.", markup=False
        )

    console.run(command)


@memory_app.command("dream")
def dream() -> None:
    """Consolidate project memory now: merge duplicates, fix stale facts, prune (uses the model)."""

    def command() -> None:
        cwd = Path.cwd()
        settings = console.settings(cwd)
        try:
            endpoint = resolve_endpoint(settings)
        except NoAuthError:
            console.fail(
                "Dream needs a model endpoint: set OPENAI_BASE_URL, OPENAI_API_KEY and "
                "OPENAI_MODEL (or security.auth in settings.json).",
                ExitCode.NO_AUTH,
            )
        report = asyncio.run(_dream(cwd, settings, endpoint))
        console.out().print(str(report), markup=False)
        if report.status in ("failed", "cancelled", "skipped"):
            raise SystemExit(ExitCode.ERROR)

    console.run(command)


async def _dream(cwd: Path, settings: Settings, endpoint: Endpoint) -> DreamReport:
    from cairn.session.runtime import Runtime  # the model provider: only for this command

    base = Runtime.from_endpoint(cwd=cwd, settings=settings, endpoint=endpoint, record_chats=False)
    tenant = console.tenant()
    runtime = base if tenant is None else base.for_tenant(tenant)
    out = console.out()

    async def progress(text: str) -> None:
        out.print(f"[dim]•[/dim] {text}", highlight=False)

    try:
        manager = runtime.memory_manager()
        return await manager.run_dream_now(
            session_id=str(uuid.uuid4()), runtime=runtime, progress=progress
        )
    finally:
        await base.aclose()


def _when(entry: HistoryEntry) -> str:
    return _dt.datetime.fromtimestamp(entry.time).strftime("%Y-%m-%d %H:%M:%S")


def _files_cell(entry: HistoryEntry) -> str:
    shown = entry.files[:MAX_LOG_FILES_SHOWN]
    more = max(entry.file_count, len(entry.files)) - len(shown)
    return "\n".join(shown) + (f"\n(+{more} more)" if more > 0 else "")


@memory_app.command("log")
def log(
    memory: Annotated[
        str | None,
        typer.Argument(help="A memory (path or title): show its versions as diffs."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Entries shown.")] = 30,
) -> None:
    """Show recent changes to memory (extract, dream, forget, restore), newest first; with
    MEMORY, each version of that memory as a diff, with who changed it and why."""

    def command() -> None:
        if memory is not None:
            _print_versions(console.manager(), memory, limit)
            return
        entries, warnings = console.manager().history()
        out = console.out()
        for warning in warnings:
            out.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
        if not entries:
            out.print("No memory changes recorded yet.")
            return
        shown = entries[:limit]
        names = [name for entry in shown for name in entry.files[:MAX_LOG_FILES_SHOWN]]
        longest = max(map(len, names), default=5)
        table = Table()
        table.add_column("When", no_wrap=True)
        table.add_column("Operation")
        table.add_column("Scope")
        table.add_column("Files", overflow="fold", min_width=min(longest, MAX_LOG_FILE_WIDTH))
        table.add_column("Session", no_wrap=True)
        table.add_column("Detail")
        for entry in shown:
            table.add_row(
                _when(entry),
                entry.operation,
                entry.scope,
                _files_cell(entry),
                entry.session_id[:8],
                entry.detail,
            )
        out.print(table)

    console.run(command)


def _print_versions(manager: MemoryManager, reference: str, limit: int) -> None:
    from rich.text import Text

    from cairn.memory.trust.versions import changes

    scope, relative, versions = _one_log(manager, reference)
    out = console.out()
    if not versions:
        out.print(f"{scope}:{relative}: no versions recorded yet (cairn has not changed it).")
        return
    noun = "version" if len(versions) == 1 else "versions"
    out.print(f"{scope}:{relative}: {len(versions)} {noun}, newest first", markup=False)
    for change in reversed(changes(versions)[-limit:]):
        version = change.version
        when = _dt.datetime.fromtimestamp(version.time).strftime("%Y-%m-%d %H:%M:%S")
        session = f"  session {version.session_id[:8]}" if version.session_id else ""
        out.print()
        out.print(Text(f"v{version.number}  {when}  {version.operation}{session}", style="bold"))
        for line in (version.why, change.summary, change.evidence):
            if line:
                out.print(f"  {line}", markup=False)
        for line in change.diff:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
            out.print(Text(f"  {line}", style=style))


@memory_app.command("export")
def export(folder: Annotated[Path, typer.Argument(help="A new or empty folder.")]) -> None:
    """Write every memory as Markdown files under FOLDER/project/ and FOLDER/user/."""

    def command() -> None:
        manager = console.manager()
        try:
            report = manager.export(folder)
        finally:
            console.close(manager)
        console.out().print(f"Exported {report.summary('written')} to {folder}.", markup=False)

    console.run(command)


@memory_app.command("import")
def import_(
    folder: Annotated[Path, typer.Argument(help="A folder `cairn memory export` wrote.")],
) -> None:
    """Make the memory match FOLDER (edited after an export): changed and new memories are
    written, memories missing from it go to the trash (`cairn memory restore` brings them back)."""

    def command() -> None:
        manager = console.manager()
        try:
            report = manager.import_folder(folder, session_id="")
        finally:
            console.close(manager)
        out = console.out()
        for skipped in report.skipped:
            out.print(f"[yellow]skipped:[/yellow] {skipped}", highlight=False)
        out.print(f"Imported: {report.summary('written')}.", markup=False)

    console.run(command)


@memory_app.command("migrate")
def migrate_command(
    to: Annotated[
        MigrationTarget, typer.Option("--to", help="The backend to copy the memory into.")
    ],
) -> None:
    """Copy this project's memory to the other backend, byte for byte (the target must hold
    no memory yet), then point memory.backend at it."""
    from cairn.memory.store.transfer import migrate

    def command() -> None:
        cwd = Path.cwd()
        report = migrate(
            console.settings(cwd), project_root(cwd), to=to.value, tenant=console.tenant()
        )
        console.out().print(
            f"Copied {report.summary('copied')} ({report.files} files with the indexes, audit "
            f'trail, trash and state) to {to.value}. Set memory.backend to "{to.value}" to use it.',
            markup=False,
        )

    console.run(command)


@memory_app.command("path")
def path() -> None:
    """Print where memories are kept."""

    def command() -> None:
        roots = console.manager().roots
        out = console.out()
        out.print(f"project memory: {roots.project or '(unavailable)'}", markup=False)
        out.print(f"user memory:    {roots.user}", markup=False)
        out.print(f"project state:  {roots.state_dir}", markup=False)

    console.run(command)
