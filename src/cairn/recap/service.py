"""``generate_session_recap``: the one function behind /recap, the away recap and the daemon.

A fresh task checkpoint (:mod:`cairn.session.task_state`) answers at once, without a model
request: its recap line is the recap. Otherwise one side query writes it.

:func:`session_recap` says why there is no recap when there is none (too little conversation,
the model's answer was cut, empty, not a recap, too slow, or the request failed), so ``/recap``
and the daemon say the real reason; :func:`generate_session_recap` is its text alone. A model
that writes a plausible recap without the ``<recap>`` tags (small local models often do) is
taken at its word; the generation is bounded by :data:`RECAP_TIMEOUT_SECONDS` as well as by its
output bound.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from cairn.abort import AbortSignal
from cairn.content import Content
from cairn.debug_log import get_logger
from cairn.llm.side_query import side_query
from cairn.recap.dialog import recent_dialog, startup_context_length
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.session.session import Session

__all__ = [
    "NOT_ENOUGH_CONTEXT",
    "RECAP_MAX_OUTPUT_TOKENS",
    "RECAP_PURPOSE",
    "RECAP_SYSTEM_PROMPT",
    "RECAP_TIMEOUT_SECONDS",
    "RECAP_USER_PROMPT",
    "Recap",
    "extract_recap",
    "generate_session_recap",
    "plausible_recap",
    "recap_messages",
    "session_recap",
]

RECAP_MAX_OUTPUT_TOKENS = 300  # a recap is one or two sentences
RECAP_TEMPERATURE = 0.3  # a little variety, still close to the conversation
RECAP_PURPOSE = "recap"  # the X-Cairn-Purpose of the side query
MIN_HISTORY_ENTRIES = 2  # below this there is nothing to recap
RECAP_TIMEOUT_SECONDS = 60.0  # the longest a recap may take (the daemon's route waits as long)
CHECKPOINT_WAIT_SECONDS = 15.0  # the longest a recap waits for a task checkpoint being written
MAX_UNTAGGED_WORDS = 80  # an untagged answer longer than this is not a recap
MIN_UNTAGGED_WORDS = 4  # nor one shorter than this
NOT_ENOUGH_CONTEXT = "Not enough conversation context for a recap yet."
# How an untagged answer that is not a recap starts: the model talking about the task.
_PREAMBLES = ("let me", "i'll", "i will", "i can", "i cannot", "i'm", "sure", "okay", "ok,",
              "here is", "here's", "as an ai", "sorry")  # fmt: skip
_SENTENCE_END = (".", "!", "?", "。", "！", "？")
_log = get_logger("SESSION_RECAP")
_PAIR = re.compile(r"<recap>(.*?)</recap>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<recap>", re.IGNORECASE)

RECAP_SYSTEM_PROMPT = """\
You write session recaps for a terminal coding assistant. The user stepped away and is coming
back; tell them in one glance where they left off.

Rules:
- At most 40 words (for Chinese, about 80 characters), in 1 or 2 plain sentences.
- No Markdown, no bullet points, no headings.
- First the overall task they are working on, then the single concrete next step.
- Do not list what was done, recite tool calls, or give a status report.
- Write in the same language as the conversation (the language the user mostly writes in).
- Put the recap inside <recap>...</recap> and write nothing outside the tags.

Example:
<recap>Fixing the flaky auth retry test. Next: make the backoff clock injectable.</recap>"""

RECAP_USER_PROMPT = (
    "Generate the recap now. Wrap it in <recap>...</recap>. Nothing outside the tags."
)


def extract_recap(raw: str) -> str | None:
    """The recap inside ``<recap>`` tags; only an opening tag → the rest; no tag → ``None``."""
    match = _PAIR.search(raw)
    if match and match.group(1).strip():
        return match.group(1).strip()
    if match:
        return None  # an empty pair: nothing to show
    opening = _OPEN.search(raw)
    if opening is None:
        return None
    rest = raw[opening.end() :].strip()
    return rest or None


def plausible_recap(raw: str) -> str | None:
    """An answer without ``<recap>`` tags that still reads as a recap: one or two plain
    sentences (4 to 80 words, ending a sentence), no Markdown, not the model talking about the
    task ("Let me think...", "Sure!"); ``None`` otherwise."""
    text = raw.strip()
    if "<" in text and ">" in text:
        return None  # tags of some kind: extract_recap's case, or markup
    words = text.split()
    if not MIN_UNTAGGED_WORDS <= len(words) <= MAX_UNTAGGED_WORDS:
        return None
    if len(text.splitlines()) > 2 or not text.endswith(_SENTENCE_END) or text.endswith("..."):
        return None
    if text.startswith(("#", "-", "*", "`", "{", "[", ">", "|")) or "```" in text:
        return None
    if text.lower().startswith(_PREAMBLES):
        return None
    return " ".join(text.split())


class Recap(Value):
    """A recap (``text``), or why there is none (``reason``, in words for people; ``None`` when
    it was cancelled)."""

    text: str | None
    reason: str | None = None


async def generate_session_recap(session: Session, abort: AbortSignal | None = None) -> str | None:
    """A 1–2 sentence "task, then next step" summary of the session, or ``None``. Never raises.

    ``abort`` (or cancelling the awaiting task) stops the side query; an aborted recap is
    ``None``. Cancellation of the caller's task still propagates as ``CancelledError``.
    """
    return (await session_recap(session, abort)).text


async def session_recap(
    session: Session, abort: AbortSignal | None = None, *, timeout: float = RECAP_TIMEOUT_SECONDS
) -> Recap:
    """:func:`generate_session_recap` with the reason when there is no recap; never raises
    (but cancellation of the caller's task). ``timeout`` bounds the whole generation."""
    if abort is not None and abort.aborted:
        _log.debug("recap skipped: aborted before it started")
        return Recap(None)
    try:
        async with asyncio.timeout(timeout):
            outcome = await _until_aborted(_generate(session), abort)
    except TimeoutError:
        _log.warning(f"Recap generation failed: no answer within {timeout:g} s")
        return Recap(None, f"The model did not write a recap within {timeout:g} s.")
    except Exception as exc:  # recap is cosmetic and best-effort: never raise
        _log.warning(f"Recap generation failed: {exc}")
        return Recap(None, f"The recap request failed: {exc}")
    return outcome if outcome is not None else Recap(None)


async def _until_aborted(
    work: Coroutine[Any, Any, Recap], abort: AbortSignal | None
) -> Recap | None:
    if abort is None:
        return await work
    task = asyncio.ensure_future(work)

    def stop(_reason: str | None) -> None:
        task.cancel()

    remove = abort.add_listener(stop)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if abort.aborted and not (current is not None and current.cancelling()):
            _log.debug(f"recap skipped: aborted ({abort.reason or 'no reason'})")
            return None
        raise
    finally:
        remove()


def recap_messages(history: Sequence[Content]) -> list[Content]:
    """What a recap is written from: the recent plain dialog, then the recap instruction."""
    recent = recent_dialog(history[startup_context_length(history) :])
    return [*recent, Content.user(RECAP_USER_PROMPT)] if recent else []


async def _generate(session: Session) -> Recap:
    checkpoint = await session.task_state.recap(wait=CHECKPOINT_WAIT_SECONDS)
    if checkpoint is not None:  # a fresh task checkpoint: no model request needed
        _log.debug(f"recap from the task checkpoint: len={len(checkpoint)}")
        return Recap(checkpoint)
    history = session.client.history.shallow()
    if len(history) < MIN_HISTORY_ENTRIES:
        _log.debug(f"recap skipped: history too short ({len(history)} entries)")
        return Recap(None, NOT_ENOUGH_CONTEXT)
    messages = recap_messages(history)
    if not messages:
        _log.debug("recap skipped: no dialog messages after filtering")
        return Recap(None, NOT_ENOUGH_CONTEXT)
    context = session.system_prompt.project_context  # context files and the memory index
    system = RECAP_SYSTEM_PROMPT + (f"\n\n# Project context\n\n{context}" if context else "")
    _log.debug(f"recap: sending side-query with {len(messages) - 1} messages")
    result = await side_query(
        session.runtime.provider,
        purpose=RECAP_PURPOSE,
        system=system,
        messages=messages,
        max_output_tokens=RECAP_MAX_OUTPUT_TOKENS,
        temperature=RECAP_TEMPERATURE,
        max_attempts=1,
        session_id=session.id,
    )
    cut = result.finish_reason == "length"
    if not result.text:
        _log.debug("recap skipped: empty model response")
        if cut:  # all of it went into reasoning
            return Recap(None, _cut_reason())
        return Recap(None, "The model's answer was empty.")
    recap = extract_recap(result.text)
    if recap is None:
        recap = plausible_recap(result.text) if not cut else None
        if recap is not None:
            _log.debug(f"recap accepted without <recap> tags: len={len(recap)}")
            return Recap(recap)
        _log.debug("recap skipped: failed to extract <recap> tags from response")
        if cut:
            return Recap(None, _cut_reason())
        shown = " ".join(result.text.split())
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        return Recap(None, f"The model did not answer with a recap (it wrote: {shown!r}).")
    _log.debug(f"recap generated: len={len(recap)}")
    return Recap(recap)


def _cut_reason() -> str:
    return (
        "The model's recap was cut at its output bound before it was written "
        "(model.generationConfig.maxOutputTokens.recap)."
    )
