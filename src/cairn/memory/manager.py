"""The memory manager of one project: one per (process, project root), shared by its sessions.

It owns the project's :class:`~cairn.memory.store.MemoryStore` and is the one entry point the
session runtime, the agent client and ``cairn memory`` use for the system-prompt section, Recall
and Forget. Every session's Recall handle (:class:`~cairn.memory.prefetch.RecallLifecycle`) calls
:meth:`MemoryManager.recall`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from cairn.abort import AbortSignal
from cairn.config.settings import Settings
from cairn.debug_log import get_logger
from cairn.llm.types import Provider
from cairn.memory.document import MemoryDoc, MemoryScope
from cairn.memory.forget import (
    MAX_FORGET_MATCHES,
    ForgetCandidate,
    ForgetPlan,
    ForgetReport,
    apply_forget_plan,
    list_forget_candidates,
    restore_last_forget,
    select_forget_candidates,
)
from cairn.memory.index_file import build_index_text
from cairn.memory.paths import INDEX_FILE_NAME, MemoryRoots, memory_roots
from cairn.memory.prompt import MemoryTier, build_auto_memory_prompt
from cairn.memory.recall import RecallResult, recall_memories
from cairn.memory.render import render_relevant_memory
from cairn.memory.store import MemoryStore, ScanReport, ScoredDoc
from cairn.memory.telemetry import emit_forget

__all__ = ["MemoryManager"]

_log = get_logger("MEMORY_RECALL")


class MemoryManager:
    """System-prompt section, Recall and Forget over one project's memory."""

    def __init__(
        self,
        project_root: Path,
        *,
        settings: Settings,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.project_root = Path(project_root)
        self.settings = settings
        self.clock = clock
        self.roots: MemoryRoots = memory_roots(self.project_root, environ=environ)
        self.store = MemoryStore(self.roots, clock=clock)

    @property
    def enabled(self) -> bool:
        """``memory.enableManagedAutoMemory``: Recall, Extract and the prompt section."""
        return self.settings.memory.enable_managed_auto_memory

    def root_map(self) -> dict[MemoryScope, Path]:
        """The available memory roots by scope (project first)."""
        roots: dict[MemoryScope, Path] = {}
        if self.roots.project is not None:
            roots["project"] = self.roots.project
        roots["user"] = self.roots.user
        return roots

    # --- system prompt ---------------------------------------------------------------------

    def system_prompt_section(self) -> str:
        """The ``# auto memory`` section; ``""`` when managed memory is off."""
        if not self.enabled:
            return ""
        tiers = [
            MemoryTier(scope, root, self._index_text(scope, root))
            for scope, root in self.root_map().items()
        ]
        return build_auto_memory_prompt(tiers)

    def _index_text(self, scope: MemoryScope, root: Path) -> str:
        try:
            return (root / INDEX_FILE_NAME).read_text(encoding="utf-8")
        except FileNotFoundError:
            if not root.is_dir():  # no memories in this scope: nothing to scan for
                return ""
            # Memories copied in by hand have no index yet: show what it would say.
            return build_index_text([doc for doc in self.docs() if doc.scope == scope])
        except (OSError, UnicodeDecodeError) as exc:
            _log.warning(f"{root / INDEX_FILE_NAME}: not loaded into the prompt ({exc})")
            return ""

    # --- reading ---------------------------------------------------------------------------

    def refresh(self) -> ScanReport:
        return self.store.refresh()

    def docs(self) -> list[MemoryDoc]:
        """Every memory, project first, each scope newest first (after a refresh)."""
        self.store.refresh()
        return self.store.docs()

    def search(self, query: str, *, limit: int = 10) -> list[ScoredDoc]:
        """The fast lexical ranking, as Recall's fast phase uses it."""
        self.store.refresh()
        return self.store.rank(query, limit=limit)

    def find(self, reference: str) -> list[MemoryDoc]:
        """Memories named by ``reference``: a path (absolute, or relative to a root), or a title.

        An exact path or title wins; otherwise titles containing ``reference`` (any case).
        """
        docs = self.docs()
        wanted = reference.strip()
        if not wanted:
            return []
        by_path = [
            doc
            for doc in docs
            if wanted in (str(doc.path), doc.relative_path, f"{doc.scope}:{doc.relative_path}")
        ]
        if by_path:
            return by_path
        exact = [doc for doc in docs if doc.title.casefold() == wanted.casefold()]
        if exact:
            return exact
        return [doc for doc in docs if wanted.casefold() in doc.title.casefold()]

    def render(self, docs: Sequence[MemoryDoc]) -> str:
        """The ``## Relevant memory`` block for ``docs``, aged by this manager's clock."""
        return render_relevant_memory(docs, now=self.clock())

    def reindex(self, *, on_step: Callable[[str], None] | None = None) -> ScanReport:
        """Re-read changed files, regenerate every ``MEMORY.md`` and persist the index.

        ``on_step`` is told the name of each step as it starts (for progress display).
        """
        step = on_step or (lambda _name: None)
        step("Reading memory files")
        report = self.store.refresh()
        step("Writing MEMORY.md")
        self.store.rebuild_index_files()
        step("Saving the search index")
        self.store.save()
        return report

    def close(self) -> None:
        """Persist the index and stop watching the roots."""
        self.store.save()
        self.store.close()

    # --- recall ----------------------------------------------------------------------------

    async def recall(
        self,
        query: str,
        *,
        provider: Provider | None,
        excluded: AbstractSet[str],
        recent_tools: Sequence[str],
        abort: AbortSignal,
        on_fast_result: Callable[[RecallResult], None] | None = None,
        session_id: str | None = None,
    ) -> RecallResult:
        """Relevant memories for ``query``; never raises (a failure is an empty result)."""
        if not self.enabled:
            return RecallResult()
        try:
            return await recall_memories(
                self.store,
                query,
                provider=provider,
                excluded=excluded,
                recent_tools=recent_tools,
                abort=abort,
                now=self.clock,
                on_fast_result=on_fast_result,
                session_id=session_id,
            )
        except Exception as exc:  # Recall is best effort: it never fails a turn
            _log.warning(f"recall failed: {exc!r}")
            return RecallResult()

    # --- forget ----------------------------------------------------------------------------

    def forget_candidates(self) -> list[ForgetCandidate]:
        return list_forget_candidates(self.docs())

    async def select_forget(
        self,
        query: str,
        *,
        provider: Provider | None,
        limit: int = MAX_FORGET_MATCHES,
        session_id: str | None = None,
    ) -> ForgetPlan:
        """The entries ``query`` asks to forget (nothing is changed yet)."""
        return await select_forget_candidates(
            self.forget_candidates(), query, provider=provider, limit=limit, session_id=session_id
        )

    def apply_forget(self, plan: ForgetPlan) -> ForgetReport:
        """Move the plan's entries to the trash and rebuild the indexes."""
        report = apply_forget_plan(plan, self.root_map(), now=self.clock())
        if report.entries:
            self._after_change()
        emit_forget(
            action="forget", strategy=plan.strategy, entries=report.entries, files=len(report.files)
        )
        return report

    def restore_last_forget(self) -> ForgetReport:
        """Bring back the most recent forget (refusing to overwrite) and rebuild the indexes."""
        report = restore_last_forget(self.root_map())
        if report.ok:
            self._after_change()
        emit_forget(
            action="restore", strategy="none", entries=report.entries, files=len(report.files)
        )
        return report

    def _after_change(self) -> None:
        self.store.rebuild_index_files()
        self.store.save()
