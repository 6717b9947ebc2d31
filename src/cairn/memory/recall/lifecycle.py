"""The Recall lifecycle of one session: begin, consume, finish.

This is the only Recall state machine in cairn. The agent client owns one per session and every
front end reaches it through the client's ``begin_recall`` / ``consume_recall`` /
``finish_recall``.

- :meth:`RecallLifecycle.begin` cancels the previous handle (``new_query``), links the turn's
  abort signal (``abort``) and starts recall as a task. The fast result is kept as soon as it is
  published.
- :meth:`RecallLifecycle.consume` at ``initial`` waits at most 100 ms and stops waiting as soon as
  the fast or the final result exists. While recall still runs it delivers the fast result once
  and keeps the handle pending; once recall has settled it delivers the refined result minus the
  documents the fast phase already delivered. At ``tool_result`` it never waits and delivers
  only a settled result.
- :meth:`RecallLifecycle.request_sent` is told (by the agent client) when the turn's request
  has been written: only then does recall rank the selector's candidates and ask the selector,
  so none of that work runs between the fast result and the first request leaving.
- :meth:`RecallLifecycle.finish` closes a handle that found no safe delivery point.

Every delivered path joins :attr:`RecallLifecycle.surfaced_paths`, which later recalls exclude,
so a memory reaches the model at most once per session. Each handle records exactly one terminal
``memory.recall.delivery`` event (a refined delivery or a discard) plus at most one fast one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from cairn.abort import AbortController, AbortSignal
from cairn.debug_log import get_logger
from cairn.llm.types import Provider
from cairn.memory.recall.query import RecallResult
from cairn.memory.telemetry import DeliveryPoint, DiscardReason, RecallPhase, emit_delivery
from cairn.vocabulary.recall import RecallDelivery

if TYPE_CHECKING:
    from cairn.memory.manager import MemoryManager

__all__ = ["INITIAL_RECALL_WAIT_MS", "RecallDelivery", "RecallLifecycle", "initial_recall_wait_ms"]

INITIAL_RECALL_WAIT_MS = 100  # the longest the first request of a turn waits for Recall
TEST_WAIT_ENV = "CAIRN_TEST_RECALL_WAIT_MS"  # cairn's own end-to-end tests on a loaded machine
REQUEST_SENT_WAIT_S = 1.0  # the longest the refinement waits for the first request to be written
SEMANTIC_START_WAIT_S = 1.0  # the longest semantic candidates wait for the first request ...
SEMANTIC_SETTLE_S = 0.25  # ... and then for it to leave, before their model loads

_log = get_logger("MEMORY_RECALL")


class _Handle:
    """One prompt's Recall (a plain class: compared by identity, nothing compiled to define)."""

    def __init__(self, controller: AbortController, fired_at: float) -> None:
        self.controller = controller
        self.fired_at = fired_at
        self.progress = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.unlink_parent: Callable[[], None] = lambda: None
        self.fast: RecallResult | None = None
        self.result: RecallResult | None = None
        self.fast_delivered = False
        self.fast_paths: set[str] = set()
        self.closed = False  # consumed or discarded: the terminal event was recorded
        # Set once the turn's first request has taken its memory (or the handle closed): the
        # semantic candidates wait for it, so loading their model never delays that request.
        self.first_request = asyncio.Event()
        # Set once the turn's first request has been written (or the handle closed): ranking the
        # selector's candidates waits for it, so that work never delays the request.
        self.sent = asyncio.Event()

    @property
    def settled(self) -> bool:
        return self.result is not None


def initial_recall_wait_ms(environ: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """How long the first request of a turn waits for Recall: :data:`INITIAL_RECALL_WAIT_MS`,
    or ``$CAIRN_TEST_RECALL_WAIT_MS`` (a number of milliseconds; anything else is ignored) for
    end-to-end tests that check *what* the first request carries on a machine too loaded to
    hold the bound (the bound itself is measured by the benchmarks)."""
    try:
        wait = float(environ.get(TEST_WAIT_ENV, ""))
    except ValueError:
        return INITIAL_RECALL_WAIT_MS
    return wait if 0 <= wait < float("inf") else INITIAL_RECALL_WAIT_MS


class RecallLifecycle:
    """One session's Recall handle (see the module docstring)."""

    def __init__(
        self,
        manager: MemoryManager,
        provider: Provider | None,
        *,
        session_id: str,
        clock: Callable[[], float] = time.monotonic,
        initial_wait_ms: float = INITIAL_RECALL_WAIT_MS,
    ) -> None:
        self._manager = manager
        self._initial_wait = initial_wait_ms / 1000
        self._provider = provider
        self._session_id = session_id
        self._clock = clock
        self._handle: _Handle | None = None
        self.surfaced_paths: set[str] = set()

    @property
    def pending(self) -> bool:
        """True while a handle is open (begun, neither consumed nor discarded)."""
        return self._handle is not None

    def begin(self, query: str, signal: AbortSignal, recent_tools: Sequence[str]) -> None:
        """Start recalling for ``query``; any previous handle is discarded as ``new_query``."""
        self.cancel("new_query")
        if not self._manager.enabled:
            return
        handle = _Handle(controller=AbortController(), fired_at=self._clock())
        self._handle = handle
        handle.unlink_parent = signal.add_listener(lambda _r: self._discard(handle, "abort"))
        if handle.closed:  # the turn was already aborted
            return
        handle.task = asyncio.get_running_loop().create_task(
            self._run(handle, query, tuple(recent_tools)), name="cairn-recall"
        )

    async def consume(self, point: Literal["initial", "tool_result"]) -> RecallDelivery | None:
        """The memory to send now at ``point``, or ``None`` (see the module docstring)."""
        handle = self._handle
        if handle is None:
            return None
        try:
            if point == "initial" and not handle.settled and handle.fast is None:
                await self._wait_for_progress(handle)
                if self._handle is not handle:  # swapped or discarded during the wait
                    return None
            if not handle.settled:
                return self._deliver_fast(handle) if point == "initial" else None
            return self._deliver_refined(handle, point)
        finally:
            handle.first_request.set()

    async def wait_settled(self) -> None:
        """Wait until the pending recall has its final result (demos, ``cairn memory``, tests).

        A turn never calls this: it would make the turn wait for the selector.
        """
        handle = self._handle
        if handle is not None and handle.task is not None:
            handle.first_request.set()  # nothing to protect: the caller waits for the result
            handle.sent.set()
            await asyncio.shield(handle.task)

    def request_sent(self) -> None:
        """The turn's request has been written to the endpoint: the refinement may go on."""
        handle = self._handle
        if handle is not None:
            handle.sent.set()

    def finish(self) -> None:
        """Close the handle at the end of a turn (``no_safe_delivery_point``); idempotent."""
        self.cancel("no_safe_delivery_point")

    def cancel(self, reason: str) -> None:
        """Discard the pending handle with ``reason`` (new_query, abort, reset, shutdown)."""
        known = _as_reason(reason)
        handle = self._handle
        if handle is not None:
            self._discard(handle, known)

    def reset(self) -> None:
        """``/clear``: discard the handle and forget which memories were surfaced."""
        self.cancel("reset")
        self.surfaced_paths.clear()

    async def _run(self, handle: _Handle, query: str, recent_tools: tuple[str, ...]) -> None:
        try:
            result = await self._manager.recall(
                query,
                provider=self._provider,
                excluded=frozenset(self.surfaced_paths),
                recent_tools=recent_tools,
                abort=handle.controller.signal,
                on_fast_result=lambda fast: self._on_fast(handle, fast),
                session_id=self._session_id,
                before_semantic=lambda: _first_request(handle),
                after_fast=lambda: _request_written(handle),
            )
        except asyncio.CancelledError:
            result = RecallResult()
        except Exception as exc:  # Recall is best effort: it never fails a turn
            _log.warning(f"recall failed: {exc!r}")
            result = RecallResult()
        if not handle.closed:
            handle.result = result
            handle.progress.set()

    def _on_fast(self, handle: _Handle, fast: RecallResult) -> None:
        if handle.fast is None and not handle.closed:
            handle.fast = fast
            handle.progress.set()

    async def _wait_for_progress(self, handle: _Handle) -> None:
        # A ceiling, not a fixed cost: fast result, settlement and discard all end the wait.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._initial_wait):
                await handle.progress.wait()

    def _deliver_fast(self, handle: _Handle) -> RecallDelivery | None:
        fast = handle.fast
        if handle.fast_delivered or fast is None or not fast.prompt:
            return None
        handle.fast_delivered = True
        paths = fast.paths
        handle.fast_paths.update(paths)
        self.surfaced_paths.update(paths)
        self._emit(handle, "fast", "initial", None, fast.strategy, len(paths))
        memories = tuple(doc.ref for doc in fast.docs)
        return RecallDelivery(fast.prompt, paths, "fast", fast.strategy, memories)

    def _deliver_refined(
        self, handle: _Handle, point: Literal["initial", "tool_result"]
    ) -> RecallDelivery | None:
        result = handle.result or RecallResult()
        fresh = [
            doc
            for doc in result.docs
            if str(doc.path) not in handle.fast_paths and str(doc.path) not in self.surfaced_paths
        ]
        if not fresh:
            reason: DiscardReason = "already_delivered" if result.docs else "no_relevant_results"
            self._discard(handle, reason)
            return None
        self._close(handle)
        paths = [str(doc.path) for doc in fresh]
        self.surfaced_paths.update(paths)
        prompt = result.prompt if len(fresh) == len(result.docs) else self._manager.render(fresh)
        self._emit(handle, "refined", point, None, result.strategy, len(paths))
        memories = tuple(doc.ref for doc in fresh)
        return RecallDelivery(prompt, paths, "refined", result.strategy, memories)

    def _discard(self, handle: _Handle, reason: DiscardReason) -> None:
        if handle.closed:
            return
        result = handle.result
        if result is not None and result.docs and set(result.paths) <= handle.fast_paths:
            reason = "already_delivered"  # the selector only chose what was already sent
        self._close(handle)
        strategy = result.strategy if result is not None else "none"
        selected = len(result.docs) if result is not None else 0
        self._emit(handle, "refined", "discarded", reason, strategy, selected)

    def _close(self, handle: _Handle) -> None:
        handle.closed = True
        handle.first_request.set()
        handle.sent.set()
        handle.unlink_parent()
        handle.controller.abort("recall closed")
        handle.progress.set()
        if handle.task is not None and not handle.task.done():
            handle.task.cancel()
        if self._handle is handle:
            self._handle = None

    def _emit(
        self,
        handle: _Handle,
        phase: RecallPhase,
        point: DeliveryPoint,
        reason: DiscardReason | None,
        strategy: str,
        docs_selected: int,
    ) -> None:
        emit_delivery(
            phase=phase,
            delivery_point=point,
            discard_reason=reason,
            strategy=strategy,
            docs_selected=docs_selected,
            latency_ms=(self._clock() - handle.fired_at) * 1000,
        )


async def _first_request(handle: _Handle) -> None:
    """Until the turn's first request has taken its memory and had a moment to leave (loading
    the embedding model then competes with nothing the turn waits for); a handle nobody
    consumes (a caller that only waits for the result) goes on after a second."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SEMANTIC_START_WAIT_S):
            await handle.first_request.wait()
            await asyncio.sleep(SEMANTIC_SETTLE_S)


async def _request_written(handle: _Handle) -> None:
    """Until the turn's first request has been written (it took the fast result first): the
    selector's candidates are ranked while the model reads it. A handle whose request never
    leaves (a caller without a model request) goes on after :data:`REQUEST_SENT_WAIT_S`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(REQUEST_SENT_WAIT_S):
            await handle.sent.wait()


def _as_reason(reason: str) -> DiscardReason:
    known: dict[str, DiscardReason] = {
        "new_query": "new_query",
        "abort": "abort",
        "reset": "reset",
        "shutdown": "shutdown",
        "no_safe_delivery_point": "no_safe_delivery_point",
    }
    if reason not in known:
        raise ValueError(
            f"unknown recall discard reason {reason!r}; expected one of {sorted(known)}"
        )
    return known[reason]
