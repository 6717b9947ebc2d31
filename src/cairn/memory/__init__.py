"""Managed long-term memory: the store, Recall, Extract, Dream, Forget and the prompt section.

The public names are loaded on first use, so importing one submodule (``cairn.memory.document``)
does not pull in the store, the selector or the model provider types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_HOMES = {
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
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cairn.memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"cairn.memory.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
