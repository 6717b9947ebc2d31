"""Chat compression: replace the older part of a long conversation with a shorter account of it.

The account is the session's task checkpoint when it has one (:mod:`cairn.agent.task_checkpoint`:
the objective, the user's instructions word for word, what is done and what remains), given by
a :data:`Summariser`; no model request is needed then. Without one, the model writes a
``<state_snapshot>`` of the older part (a side query), and the user's words the summariser
gives are kept word for word after it. Either way the most recent messages stay as they are.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum

from cairn.content import Content, FunctionCall, FunctionResponse, Text
from cairn.debug_log import get_logger
from cairn.llm.side_query import side_query
from cairn.llm.types import Provider
from cairn.values import Value

__all__ = [
    "COMPRESSION_PRESERVE_THRESHOLD",
    "DEFAULT_CONTEXT_WINDOW",
    "CompressionResult",
    "CompressionStatus",
    "Summariser",
    "TaskSummary",
    "compress_history",
    "find_split_point",
    "history_size",
]

DEFAULT_CONTEXT_WINDOW = 131_072  # tokens, for models whose window is not configured
COMPRESSION_PRESERVE_THRESHOLD = 0.3  # fraction of the history (by size) kept verbatim
MIN_COMPRESSION_FRACTION = 0.05  # don't bother compressing less than this fraction
SUMMARY_ACK = "Got it. Thanks for the additional context!"
CONTINUE_PROMPT = "Continue with the prior task using the context above."

COMPRESSION_PROMPT = """\
You compress a conversation between a user and a coding agent so the agent can continue the work
with only your summary and the most recent messages.

First think in a <scratchpad> about what matters. Then write a <state_snapshot> with these sections:
<overall_goal> the user's goal in one sentence </overall_goal>
<key_knowledge> facts, constraints, decisions and conventions learned (bullets) </key_knowledge>
<file_system_state> files created, read, changed or deleted, and why they matter
</file_system_state>
<recent_actions> the last few significant actions and their outcomes </recent_actions>
<current_plan> numbered steps, each marked [DONE], [IN PROGRESS] or [TODO] </current_plan>
Be dense and specific: names, paths, commands, numbers. Leave out pleasantries."""
_log = get_logger("COMPRESSION")


class TaskSummary(Value):
    """What the session says about the part being compressed: its task checkpoint, which then
    replaces the model-written summary, or (``checkpoint`` ``None``) only the user's words to
    keep word for word after one."""

    checkpoint: str | None = None
    verbatim: str = ""


# Given the entries to compress and those kept, the session's account of them.
Summariser = Callable[[Sequence[Content], Sequence[Content]], Awaitable[TaskSummary]]


class CompressionStatus(StrEnum):
    COMPRESSED = "compressed"
    NOOP = "noop"
    FAILED_EMPTY_SUMMARY = "failed_empty_summary"
    FAILED_INFLATED = "failed_inflated_token_count"
    FAILED_ERROR = "failed_error"
    BLOCKED = "blocked"  # a PreCompact hook refused (``error`` says why)


class CompressionResult(Value, frozen=False):
    status: CompressionStatus
    original_tokens: int
    new_tokens: int
    history: list[Content] | None = None  # the new history when compressed
    error: str | None = None
    cut: bool = False  # the summary was cut at its output bound
    from_checkpoint: bool = False  # the task checkpoint replaced the older part (no model asked)

    def describe(self) -> str:
        """The outcome in words for people (never the status value itself)."""
        if self.status is CompressionStatus.COMPRESSED:
            done = f"Compressed the conversation: {self.original_tokens} → {self.new_tokens} tokens"
            if self.from_checkpoint:
                done += " (from the task checkpoint)"
            if self.cut:
                return (
                    f"{done} (the summary was cut at its output bound: "
                    "model.generationConfig.maxOutputTokens.compress)."
                )
            return f"{done}."
        if self.status is CompressionStatus.NOOP:
            return "Nothing to compress yet."
        if self.status is CompressionStatus.FAILED_INFLATED:
            return "Nothing to compress yet: a summary would be longer than the conversation."
        if self.status is CompressionStatus.BLOCKED:
            return f"A PreCompact hook kept the conversation as it is: {self.error}"
        if self.status is CompressionStatus.FAILED_EMPTY_SUMMARY:
            return "Could not compress the conversation: the model returned an empty summary."
        detail = f": {self.error}" if self.error else ""
        return f"Could not compress the conversation{detail}."


def _size(entry: Content) -> int:
    return len(json.dumps(entry.to_dict(), ensure_ascii=False))


def history_size(entries: Sequence[Content]) -> int:
    """The entries' size in characters of their JSON (what compression measures)."""
    return sum(_size(e) for e in entries)


def _is_clean_user(entry: Content) -> bool:
    return entry.role == "user" and not any(isinstance(p, FunctionResponse) for p in entry.parts)


def find_split_point(history: list[Content], fraction: float) -> int:
    """Index of the first entry to keep: the first plain user message past ``fraction``."""
    sizes = [_size(e) for e in history]
    total = sum(sizes)
    cumulative = 0
    for index, entry in enumerate(history):
        if _is_clean_user(entry) and cumulative >= total * fraction:
            return index
        cumulative += sizes[index]
    last = history[-1] if history else None
    if last is None:
        return 0
    if last.role == "model" and not any(isinstance(p, FunctionCall) for p in last.parts):
        return len(history)  # the conversation is at rest: compress all of it
    for index in range(len(history) - 1, 0, -1):
        if _is_clean_user(history[index]):
            return index
    return 0


async def compress_history(
    history: list[Content],
    *,
    provider: Provider,
    original_tokens: int,
    prefix_length: int = 0,
    session_id: str | None = None,
    model: str | None = None,
    summarise: Summariser | None = None,
) -> CompressionResult:
    """Replace ``history[prefix_length:split]`` with an account of it and keep the rest verbatim.

    ``prefix_length`` entries at the start (the startup context) are kept as they are;
    ``summarise`` gives the session's account (see :class:`TaskSummary`).
    """
    prefix, body = history[:prefix_length], history[prefix_length:]
    split = find_split_point(body, 1 - COMPRESSION_PRESERVE_THRESHOLD)
    to_compress, to_keep = body[:split], body[split:]
    total = history_size(body) or 1
    if not to_compress or history_size(to_compress) / total < MIN_COMPRESSION_FRACTION:
        return CompressionResult(CompressionStatus.NOOP, original_tokens, original_tokens)
    task = await _task_summary(summarise, to_compress, to_keep)
    if task.checkpoint:
        summary, cut, usage_tokens = task.checkpoint, False, None
    else:
        try:
            result = await side_query(
                provider,
                purpose="compress",
                system=COMPRESSION_PROMPT,
                messages=[
                    *to_compress,
                    Content.user("Write the <state_snapshot> of the conversation so far."),
                ],
                max_attempts=1,
                model=model or provider.model,
                session_id=session_id,
            )
        except Exception as exc:
            return CompressionResult(
                CompressionStatus.FAILED_ERROR, original_tokens, original_tokens, error=str(exc)
            )
        if not result.text.strip():
            return CompressionResult(
                CompressionStatus.FAILED_EMPTY_SUMMARY, original_tokens, original_tokens
            )
        summary = "\n\n".join(t for t in (result.text.strip(), task.verbatim) if t)
        cut = result.finish_reason == "length"
        usage = result.usage
        kept_words = len(task.verbatim) // 4  # the user's words, kept besides the summary
        usage_tokens = (
            original_tokens - (usage.input_tokens - 1000) + usage.output_tokens + kept_words
            if usage.input_tokens and usage.output_tokens
            else None
        )
    new_history = [*prefix, Content("user", [Text(summary)]), Content("model", [Text(SUMMARY_ACK)])]
    if to_keep and to_keep[0].role == "model":
        new_history.append(Content.user(CONTINUE_PROMPT))
    new_history.extend(to_keep)
    if usage_tokens is None:  # measured as the rest of the history is: by its size
        usage_tokens = original_tokens * history_size(new_history) // (history_size(history) or 1)
    if usage_tokens > original_tokens:
        return CompressionResult(CompressionStatus.FAILED_INFLATED, original_tokens, usage_tokens)
    return CompressionResult(
        CompressionStatus.COMPRESSED,
        original_tokens,
        max(0, usage_tokens),
        history=new_history,
        cut=cut,
        from_checkpoint=bool(task.checkpoint),
    )


async def _task_summary(
    summarise: Summariser | None, to_compress: Sequence[Content], to_keep: Sequence[Content]
) -> TaskSummary:
    """The session's account, or nothing (a failure there only means the model summarises)."""
    if summarise is None:
        return TaskSummary()
    try:
        return await summarise(to_compress, to_keep)
    except Exception as exc:  # the task checkpoint is a helper: compression goes on without it
        _log.warning(f"the task checkpoint could not be used for compression: {exc!r}")
        return TaskSummary()
