"""Managed long-term memory: the store, Recall, Extract, Dream, Forget and the prompt section.

The public names are loaded on first use, so importing one submodule (``cairn.memory.document``)
does not pull in the store, the selector or the model provider types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
    from cairn.memory.dream import DreamReport
    from cairn.memory.forget import ForgetCandidate, ForgetPlan, ForgetReport
    from cairn.memory.history import HistoryEntry
    from cairn.memory.manager import MemoryManager
    from cairn.memory.noise import remember_tool_name
    from cairn.memory.paths import MemoryRoots, memory_roots
    from cairn.memory.prefetch import INITIAL_RECALL_WAIT_MS, RecallDelivery, RecallLifecycle
    from cairn.memory.recall import RecallResult
    from cairn.memory.store import MemoryStore, ScanReport, ScoredDoc
    from cairn.memory.tasks import MemoryTask

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
    "memory_roots",
    "remember_tool_name",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MemoryDoc": "document",
        "MemoryScope": "document",
        "MemoryType": "document",
        "DreamReport": "dream",
        "HistoryEntry": "history",
        "MemoryTask": "tasks",
        "ForgetCandidate": "forget",
        "ForgetPlan": "forget",
        "ForgetReport": "forget",
        "MemoryManager": "manager",
        "remember_tool_name": "noise",
        "MemoryRoots": "paths",
        "memory_roots": "paths",
        "INITIAL_RECALL_WAIT_MS": "prefetch",
        "RecallDelivery": "prefetch",
        "RecallLifecycle": "prefetch",
        "RecallResult": "recall",
        "MemoryStore": "store",
        "ScanReport": "store",
        "ScoredDoc": "store",
    },
    __all__,
)
