"""``generate_session_recap``: the one function behind /recap, the away recap and the daemon."""

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

if TYPE_CHECKING:
    from cairn.session.session import Session

__all__ = [
    "RECAP_MAX_OUTPUT_TOKENS",
    "RECAP_PURPOSE",
    "RECAP_SYSTEM_PROMPT",
    "RECAP_USER_PROMPT",
    "extract_recap",
    "generate_session_recap",
    "recap_messages",
]

RECAP_MAX_OUTPUT_TOKENS = 300  # a recap is one or two sentences
RECAP_TEMPERATURE = 0.3  # a little variety, still close to the conversation
RECAP_PURPOSE = "recap"  # the X-Cairn-Purpose of the side query
MIN_HISTORY_ENTRIES = 2  # below this there is nothing to recap
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


async def generate_session_recap(session: Session, abort: AbortSignal | None = None) -> str | None:
    """A 1–2 sentence "task, then next step" summary of the session, or ``None``. Never raises.

    ``abort`` (or cancelling the awaiting task) stops the side query; an aborted recap is
    ``None``. Cancellation of the caller's task still propagates as ``CancelledError``.
    """
    if abort is not None and abort.aborted:
        _log.debug("recap skipped: aborted before it started")
        return None
    try:
        return await _until_aborted(_generate(session), abort)
    except Exception as exc:  # recap is cosmetic and best-effort: never raise
        _log.warning(f"Recap generation failed: {exc}")
        return None


async def _until_aborted(
    work: Coroutine[Any, Any, str | None], abort: AbortSignal | None
) -> str | None:
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


async def _generate(session: Session) -> str | None:
    history = session.client.history.shallow()
    if len(history) < MIN_HISTORY_ENTRIES:
        _log.debug(f"recap skipped: history too short ({len(history)} entries)")
        return None
    messages = recap_messages(history)
    if not messages:
        _log.debug("recap skipped: no dialog messages after filtering")
        return None
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
    if not result.text:
        _log.debug("recap skipped: empty model response")
        return None
    recap = extract_recap(result.text)
    if recap is None:
        _log.debug("recap skipped: failed to extract <recap> tags from response")
        return None
    _log.debug(f"recap generated: len={len(recap)}")
    return recap
