"""Session titles: the first prompt's first line at once, then a short one from the model.

When a new session's first prompt starts, its first line becomes the title; after that first
turn ends normally, a side query to ``fastModel`` (``X-Cairn-Purpose: title``; only when a fast
model is set) asks for a few words that name the task, in the background and best effort: a
failure, a slow answer or ``general.sessionTitles: false`` only means the first line stays.
Each title goes to the session's listeners as :class:`~cairn.vocabulary.events.SessionTitled`
(ACP ``session_info_update``, the daemon's event stream) and into the recording (a
``session_title`` system record), so session lists show it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Literal

from cairn.content import Content
from cairn.debug_log import get_logger
from cairn.llm.side_query import side_query
from cairn.recording.records import TITLE_SUBTYPE
from cairn.session.turn_hooks import TurnHook
from cairn.vocabulary.events import SessionTitled

if TYPE_CHECKING:
    from cairn.session.session import PromptRequest, Session
    from cairn.vocabulary.events import TurnResult

__all__ = [
    "MAX_TITLE_CHARS",
    "SESSION_TITLE_RECORD",
    "TITLE_PURPOSE",
    "SessionTitles",
    "clean_title",
]

TITLE_PURPOSE: Final = "title"  # X-Cairn-Purpose of the side query
SESSION_TITLE_RECORD: Final = TITLE_SUBTYPE  # system record subtype: {"title", "source"}
MAX_TITLE_CHARS: Final = 80
TITLE_TIMEOUT_SECONDS: Final = 20.0  # a slower answer is dropped (the first line stays)
TITLE_MAX_OUTPUT_TOKENS: Final = 40
MAX_EXCERPT_CHARS: Final = 2000  # of the prompt and of the answer, sent to name the task
TITLE_SYSTEM_PROMPT: Final = (
    "You name coding sessions. Given the user's first request and the assistant's answer, "
    "reply with a title of 3 to 7 words that names the task, in the user's language. "
    "No quotes, no trailing period, nothing else."
)
_log = get_logger("TITLE")


class SessionTitles(TurnHook):
    """One per session (see the module docstring)."""

    def __init__(self) -> None:
        self.title: str | None = None
        self._first_prompt = ""
        self._asked_model = False

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        if self.title is not None or session.loaded is not None or not request.fresh:
            return  # a loaded session has its title already
        typed = request.display_text or request.text  # what the person typed, not the files
        title = clean_title(typed)
        if title and not title.startswith("/"):  # a slash command names no task
            self._first_prompt = typed[:MAX_EXCERPT_CHARS]
            await self._set(session, title, "prompt")

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        if self._asked_model or not self._first_prompt:
            return
        if result.stop_reason != "end_turn" or not result.text.strip():
            return
        self._asked_model = True
        # The fast model only: a title is not worth a request on the main model.
        if session.settings.general.session_titles and session.runtime.provider.fast_model:
            session.runtime.spawn(self._ask_model(session, result.text), name="session-title")

    async def _ask_model(self, session: Session, answer: str) -> None:
        question = (
            f"First request:\n{self._first_prompt}\n\n"
            f"Answer:\n{answer[:MAX_EXCERPT_CHARS]}\n\nTitle:"
        )
        try:
            result = await asyncio.wait_for(
                side_query(
                    session.runtime.provider,
                    purpose=TITLE_PURPOSE,
                    system=TITLE_SYSTEM_PROMPT,
                    messages=[Content.user(question)],
                    max_output_tokens=TITLE_MAX_OUTPUT_TOKENS,
                    max_attempts=1,
                    session_id=session.id,
                ),
                TITLE_TIMEOUT_SECONDS,
            )
        except Exception as exc:  # best effort: the first line stays the title
            _log.debug(f"no model title: {exc!r}")
            return
        title = clean_title(result.text.strip().strip("\"'“”‘’`").rstrip("."))
        if title and title != self.title:
            await self._set(session, title, "model")

    async def _set(self, session: Session, title: str, source: Literal["prompt", "model"]) -> None:
        self.title = title
        if session.recorder is not None:
            session.recorder.record_system(SESSION_TITLE_RECORD, {"title": title, "source": source})
        await session.emit(SessionTitled(title, source))


def clean_title(text: str) -> str:
    """The first non-blank line of ``text``, spaces folded, at most :data:`MAX_TITLE_CHARS`."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    if len(line) <= MAX_TITLE_CHARS:
        return line
    return line[: MAX_TITLE_CHARS - 1].rstrip() + "…"
