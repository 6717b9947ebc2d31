"""Managed long-term memory: the store, Recall, Extract, Dream, Forget and the prompt section.

The public names are loaded on first use, so importing one submodule (``cairn.memory.document``)
does not pull in the store, the selector or the model provider types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.memory.background.dream.run import DreamReport
    from cairn.memory.background.tasks import MemoryTask
    from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
    from cairn.memory.forget.selection import ForgetCandidate, ForgetPlan
    from cairn.memory.forget.trash import ForgetReport
    from cairn.memory.manager import MemoryManager
    from cairn.memory.paths import MemoryRoots, memory_roots
    from cairn.memory.recall.lifecycle import (
        INITIAL_RECALL_WAIT_MS,
        RecallLifecycle,
        initial_recall_wait_ms,
    )
    from cairn.memory.recall.noise import remember_tool_name
    from cairn.memory.recall.query import RecallResult
    from cairn.memory.store.history import HistoryEntry
    from cairn.memory.store.memory_store import MemoryStore, ScanReport, ScoredDoc
    from cairn.vocabulary.recall import RecallDelivery

__all__ = [
    "INITIAL_RECALL_WAIT_MS",
    "DreamReport",
    "ForgetCandidate",
    "ForgetPlan",
    "ForgetReport",
    "HistoryEntry",
    "MemoryDoc",
    "MemoryManager",
    "MemoryRoots",
    "MemoryScope",
    "MemoryStore",
    "MemoryTask",
    "MemoryType",
    "RecallDelivery",
    "RecallLifecycle",
    "RecallResult",
    "ScanReport",
    "ScoredDoc",
    "initial_recall_wait_ms",
    "memory_roots",
    "remember_tool_name",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MemoryDoc": "document",
        "MemoryScope": "document",
        "MemoryType": "document",
        "DreamReport": "background.dream.run",
        "HistoryEntry": "store.history",
        "MemoryTask": "background.tasks",
        "ForgetCandidate": "forget.selection",
        "ForgetPlan": "forget.selection",
        "ForgetReport": "forget.trash",
        "MemoryManager": "manager",
        "remember_tool_name": "recall.noise",
        "MemoryRoots": "paths",
        "memory_roots": "paths",
        "INITIAL_RECALL_WAIT_MS": "recall.lifecycle",
        "RecallDelivery": "cairn.vocabulary.recall",
        "RecallLifecycle": "recall.lifecycle",
        "initial_recall_wait_ms": "recall.lifecycle",
        "RecallResult": "recall.query",
        "MemoryStore": "store.memory_store",
        "ScanReport": "store.memory_store",
        "ScoredDoc": "store.memory_store",
    },
    __all__,
)
