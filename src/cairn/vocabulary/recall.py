"""What Recall hands the agent client for one request: the memory text and what it holds.

The memory package produces it (:class:`cairn.memory.RecallLifecycle`), the agent client puts
its ``prompt`` into the request, and the session tells the front end which memories went in
(:class:`~cairn.vocabulary.events.MemoryRecalled`). A leaf type: the agent imports no memory.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from cairn.values import Value
from cairn.vocabulary.events import MemoryRef

__all__ = ["RecallDelivery", "RecallPhase"]

RecallPhase: TypeAlias = Literal["fast", "refined"]


class RecallDelivery(Value):
    """Memory text to insert into the request about to be sent."""

    prompt: str  # the ``## Relevant memory`` block
    paths: list[str]  # absolute paths of the memories in it
    phase: RecallPhase
    strategy: str  # heuristic or model
    memories: tuple[MemoryRef, ...] = ()  # the same memories, as people see them
