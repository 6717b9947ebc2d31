"""When the conversation is compressed: in the background from the threshold on, waited for only
by a request that would not fit without it, and never in a loop (docs/usage.md, "Compression").

:mod:`cairn.agent.compression` says *how* a history is compressed; the :class:`Compactor` (one
per agent client) says *when*, and puts the result into the client's history: a compression
started in the background works on a snapshot, and joins the history at the next request with
what was added since (or is dropped when the history changed otherwise meanwhile: a ``/clear``,
a retry, a rewind). After a compression that left the prompt above the threshold, compression
waits until the conversation grew by :data:`COMPRESSION_REGROWTH` of the window.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from cairn.agent.compression import (
    CompressionResult,
    CompressionStatus,
    Summariser,
    compress_history,
)
from cairn.content import Content, Part
from cairn.debug_log import get_logger
from cairn.llm.estimate import estimate_tokens

if TYPE_CHECKING:
    from cairn.agent.chat import ChatHistory
    from cairn.config.settings import Settings
    from cairn.llm.types import Provider

__all__ = ["ANSWER_ROOM", "COMPRESSION_REGROWTH", "CompactionObserver", "Compactor"]

# After a compression that left the prompt above the threshold, the conversation must grow by
# this fraction of the window before compression is tried again (no compression loop).
COMPRESSION_REGROWTH = 0.1
ANSWER_ROOM = 0.25  # at most this fraction of the window is kept free for the answer
_log = get_logger("CLIENT")

# Told of every compression that replaced the history: the prompt tokens before and after, the
# status, and the history it left after the startup context (with the request about to join
# it, recorded already): the session records it, so a resume starts from it.
CompactionObserver = Callable[[int, int, str, list[Content]], object]


class CompressionHost(Protocol):
    """What the compactor reads of its agent client."""

    settings: Settings
    history: ChatHistory
    last_prompt_tokens: int
    last_output_tokens: int
    startup_length: int
    session_id: str
    provider: Provider

    @property
    def model(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    def output_bound(self) -> int: ...


class Compactor:
    """One agent client's compression: when, in the background, and its result applied."""

    def __init__(self, host: CompressionHost) -> None:
        self._host = host
        self.failed = False  # a compression failed or was refused: not tried on every request
        self._before: Callable[[str], Awaitable[str | None]] | None = None
        self._after: Callable[[], Awaitable[None]] | None = None
        self._observers: list[CompactionObserver] = []
        self._summarise: Summariser | None = None
        self._running: asyncio.Task[tuple[list[Content], CompressionResult]] | None = None
        self._floor: int | None = None  # a prompt compression could not bring below threshold
        self._measure = False  # the next answer says what the last compression freed

    # ----- who follows it -----

    def on_compress(
        self,
        before: Callable[[str], Awaitable[str | None]],
        after: Callable[[], Awaitable[None]],
    ) -> None:
        self._before, self._after = before, after

    def summarise_with(self, summariser: Summariser) -> None:
        self._summarise = summariser

    def on_compacted(self, observer: CompactionObserver) -> None:
        self._observers.append(observer)

    # ----- state -----

    @property
    def background(self) -> Literal["running", "ready"] | None:
        """A compression started in the background: still ``running``, or ``ready`` to join
        the history at the next request; ``None`` when there is none."""
        if self._running is None:
            return None
        return "ready" if self._running.done() else "running"

    def reset(self) -> None:
        """A fresh chat: nothing failed, nothing runs."""
        self.failed = False
        self._floor = None
        self.stop()

    def stop(self) -> None:
        """Stop a compression running in the background (its result is never applied)."""
        task, self._running = self._running, None
        if task is not None:
            task.cancel()

    def threshold_tokens(self) -> int | None:
        """The prompt size at which compression starts (``None``: automatic compression off)."""
        host = self._host
        threshold = host.settings.model.chat_compression.context_percentage_threshold
        return int(threshold * host.context_window) if threshold > 0 else None

    def wanted(self) -> bool:
        """Past the threshold, not latched by a failure, and, after a compression that did not
        free enough, grown by :data:`COMPRESSION_REGROWTH` of the window since."""
        limit, tokens = self.threshold_tokens(), self._host.last_prompt_tokens
        if limit is None or tokens < limit or self.failed:
            return False
        regrowth = int(COMPRESSION_REGROWTH * self._host.context_window)
        return self._floor is None or tokens >= self._floor + regrowth

    def fits(self, parts: Sequence[Part]) -> bool:
        """Whether the next request, ``parts`` included, leaves room for an answer (unknown
        sizes fit: the server says otherwise, and the overflow path compresses then)."""
        host = self._host
        if not host.last_prompt_tokens:
            return True
        texts = [json.dumps(Content("user", list(parts)).to_dict(), ensure_ascii=False)]
        prompt = host.last_prompt_tokens + host.last_output_tokens + estimate_tokens(texts)
        window = host.context_window
        return prompt <= window - min(host.output_bound(), int(window * ANSWER_ROOM))

    # ----- compressing -----

    async def compress(self, *, force: bool, trigger: str) -> CompressionResult:
        """Compress now (``force``: whatever the size); a background compression is stopped."""
        host = self._host
        tokens = host.last_prompt_tokens
        if not force and not self.wanted():
            return CompressionResult(CompressionStatus.NOOP, tokens, tokens)
        self.stop()
        if force and not tokens:
            tokens = sum(len(str(e.to_dict())) for e in host.history.shallow()) // 4
        snapshot = host.history.shallow()
        trigger = trigger or ("manual" if force else "auto")
        _, result = await self._compressed(snapshot, tokens, force=force, trigger=trigger)
        return await self._apply(snapshot, result, force=force) or result

    def start(self) -> None:
        """Compress a snapshot of the history in the background when it is wanted; the result
        joins at the next request (:meth:`before_sending`)."""
        if self._running is not None or not self.wanted():
            return
        snapshot = self._host.history.shallow()
        tokens = self._host.last_prompt_tokens
        work = self._compressed(snapshot, tokens, force=False, trigger="auto")
        self._running = asyncio.ensure_future(work)

    async def before_sending(self, parts: Sequence[Part]) -> CompressionResult | None:
        """At a request: a compression finished in the background joins the history; one still
        running is waited for only when the request would not fit without it, and compression
        starts now (and is waited for) only then too. Otherwise it starts in the background."""
        fits = self.fits(parts)
        task = self._running
        if task is not None and (task.done() or not fits):
            self._running = None
            try:
                snapshot, result = await task
            except asyncio.CancelledError:
                if task.cancelled():
                    return None
                raise
            except Exception as exc:  # compression is a helper: the request goes as it is
                _log.warning(f"compressing in the background failed: {exc!r}")
                self.failed = True
                return None
            return await self._apply(snapshot, result, force=False, pending=parts)
        if not fits and self.wanted():
            snapshot = self._host.history.shallow()
            tokens = self._host.last_prompt_tokens
            _, result = await self._compressed(snapshot, tokens, force=False, trigger="auto")
            return await self._apply(snapshot, result, force=False, pending=parts)
        self.start()
        return None

    def measured(self) -> None:
        """An answer reported its prompt size. The first after a compression says how much it
        freed: still past the threshold, compression waits for the conversation to grow."""
        limit, tokens = self.threshold_tokens(), self._host.last_prompt_tokens
        if limit is None or tokens < limit:
            self._floor = None
        elif self._measure:
            self._floor = tokens
            _log.info(
                f"compression left {tokens} prompt tokens (threshold {limit}); "
                "not compressing again until the conversation grows"
            )
        self._measure = False

    async def _compressed(
        self, snapshot: list[Content], tokens: int, *, force: bool, trigger: str
    ) -> tuple[list[Content], CompressionResult]:
        """``snapshot`` compressed (not applied), after the PreCompact hooks agreed."""
        if self._before is not None:
            refusal = await self._before(trigger)
            if refusal is not None:
                status = CompressionStatus.BLOCKED
                return snapshot, CompressionResult(status, tokens, tokens, error=refusal)
        host = self._host
        result = await compress_history(
            [entry.shallow_copy() for entry in snapshot],
            provider=host.provider,
            model=host.model,
            original_tokens=tokens,
            prefix_length=host.startup_length,
            session_id=host.session_id,
            summarise=self._summarise,
        )
        return snapshot, result

    async def _apply(
        self,
        snapshot: list[Content],
        result: CompressionResult,
        *,
        force: bool,
        pending: Sequence[Part] | None = None,
    ) -> CompressionResult | None:
        """Put a compression of ``snapshot`` into the history, with what was added since;
        ``None`` when the history changed otherwise meanwhile (a /clear, a retry, a rewind)."""
        if result.status is not CompressionStatus.COMPRESSED or result.history is None:
            if result.status is not CompressionStatus.NOOP and not force:
                self.failed = True  # not tried again on every request
            return result
        host = self._host
        entries = host.history.shallow()
        kept = entries[: len(snapshot)]
        changed = len(kept) < len(snapshot)
        if changed or any(a is not b for a, b in zip(kept, snapshot, strict=True)):
            _log.info("a compression finished after the conversation changed; it was dropped")
            return None
        later = entries[len(snapshot) :]
        host.history.replace([*result.history, *later])
        added = estimate_tokens(json.dumps(e.to_dict(), ensure_ascii=False) for e in later)
        host.last_prompt_tokens = result.new_tokens + added
        self.failed = False
        self._measure = True
        left = host.history.shallow()[host.startup_length :]
        left += [Content("user", list(pending))] if pending else []
        for observer in self._observers:
            observer(result.original_tokens, result.new_tokens, str(result.status), left)
        if self._after is not None:
            await self._after()
        return result
