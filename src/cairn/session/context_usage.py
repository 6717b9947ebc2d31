"""What fills a session's context window, and what its requests used by purpose: ``/context``,
``/usage``, the daemon's ``GET /session/{id}/context`` and ``cairn -p -o json``.

:func:`context_report` splits the next request into its parts (the system prompt's core, the
context files, the memory section, the skills; the tool declarations, built-in and each MCP
server's; the startup context; the task checkpoint; recalled memories; attachments; the rest of
the conversation) and estimates each at :data:`~cairn.llm.estimate.CHARS_PER_TOKEN` characters a
token of what goes on the wire (text, tool-call arguments, tool results, declarations as JSON;
an image at :data:`IMAGE_TOKENS`). The last request's prompt, as the server counted it, is shown
beside the estimate. A warning says when the window is close to full: compression starts at
``model.chatCompression.contextPercentageThreshold``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from cairn.agent.reminders import is_system_reminder
from cairn.content import Content, FunctionCall, FunctionResponse, Image, Part, Text, Thought
from cairn.llm import by_purpose_dict
from cairn.llm.estimate import CHARS_PER_TOKEN
from cairn.session.attachments import BLOCK_START
from cairn.values import Value
from cairn.vocabulary.usage import Usage

if TYPE_CHECKING:
    from cairn.session.session import Session

__all__ = [
    "IMAGE_TOKENS",
    "ContextPart",
    "ContextReport",
    "context_report",
    "render_usage",
    "usage_report",
]

IMAGE_TOKENS: Final = 1_600  # what one image costs in a prompt, about (a large picture's count)
NEAR_FULL: Final = 0.9  # of the window: past this, a request may not fit with its answer
_CHECKPOINT_MARK = "<task_checkpoint"
_RECALL_MARK = "## Relevant memory"
_MCP_PREFIX = "mcp__"


class ContextPart(Value):
    name: str  # e.g. "system prompt", "tools: mcp server github", "conversation"
    tokens: int


class ContextReport(Value):
    """The parts of the next request (estimated), the window and the last counted prompt."""

    parts: tuple[ContextPart, ...]
    window: int
    threshold: float  # compression starts at this share of the window (0: never)
    counted: int  # the last request's prompt tokens as the server counted them (0: none yet)
    output_bound: int  # what the next answer may take

    @property
    def estimated(self) -> int:
        return sum(part.tokens for part in self.parts)

    @property
    def warning(self) -> str | None:
        """Said when the window is filling up: before compression, or before an overflow."""
        used = max(self.estimated, self.counted)
        share = used / self.window if self.window else 0.0
        free = self.window - used
        if free < self.output_bound or share >= NEAR_FULL:
            return (
                f"The context window is {share:.0%} full: the next request may not fit with its "
                "answer. /compress frees space now."
            )
        if self.threshold > 0 and share >= self.threshold:
            return (
                f"The context window is {share:.0%} full, past the compression threshold "
                f"({self.threshold:.0%}): the conversation is being compressed."
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "estimatedTokens": self.estimated,
            "countedTokens": self.counted,
            "compressionThreshold": self.threshold,
            "parts": [
                {"name": p.name, "tokens": p.tokens, "percent": self._percent(p.tokens)}
                for p in self.parts
            ],
            "warning": self.warning,
        }

    def _percent(self, tokens: int) -> float:
        return round(100 * tokens / self.window, 1) if self.window else 0.0

    def render(self) -> str:
        """The report as ``/context`` shows it."""
        lines = [f"Context window: {self.window:,} tokens."]
        width = max((len(p.name) for p in self.parts), default=0)
        for part in self.parts:
            percent = f"{self._percent(part.tokens):.1f}%"
            lines.append(f"  {part.name.ljust(width)}  {part.tokens:>9,}  {percent:>6}")
        total = f"{self._percent(self.estimated):.1f}%"
        lines.append(f"  {'total (estimated)'.ljust(width)}  {self.estimated:>9,}  {total:>6}")
        if self.counted:
            lines.append(f"The last request's prompt, as the server counted it: {self.counted:,}.")
        if self.threshold > 0:
            at = int(self.threshold * self.window)
            lines.append(f"Compression starts at {self.threshold:.0%} ({at:,} tokens).")
        warning = self.warning
        if warning:
            lines.append(f"Warning: {warning}")
        return "\n".join(lines)


def _tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def _part_chars(part: Part) -> int:
    """The characters ``part`` puts on the wire (an image counts apart)."""
    if isinstance(part, Text):
        return len(part.text)
    if isinstance(part, FunctionCall):
        return len(part.name) + len(json.dumps(dict(part.args), ensure_ascii=False, default=str))
    if isinstance(part, FunctionResponse):
        return len(part.model_text)
    if isinstance(part, Thought):
        return len(part.text)
    return 0


def _history_part(part: Part) -> str:
    """Which part of the context ``part`` belongs to."""
    if isinstance(part, Image):
        return "attachments"
    if isinstance(part, Text):
        if _CHECKPOINT_MARK in part.text[:400] or (
            is_system_reminder(part.text) and _CHECKPOINT_MARK in part.text
        ):
            return "task checkpoint"
        if is_system_reminder(part.text) and _RECALL_MARK in part.text:
            return "recalled memories"
        if part.text.lstrip().startswith(BLOCK_START):
            return "attachments"
        if part.text.lstrip().startswith("<state_snapshot>"):
            return "compressed history"
    return "conversation"


def _add(totals: dict[str, int], name: str, tokens: int) -> None:
    totals[name] = totals.get(name, 0) + tokens


def _history_parts(entries: Iterable[Content], startup: int) -> dict[str, int]:
    totals: dict[str, int] = {}
    for index, entry in enumerate(entries):
        for part in entry.parts:
            name = "startup context" if index < startup else _history_part(part)
            if isinstance(part, Image):
                _add(totals, name, IMAGE_TOKENS)
            else:
                _add(totals, name, _tokens(_part_chars(part)))
            if isinstance(part, FunctionResponse):
                _add(totals, name, IMAGE_TOKENS * len(part.media))
    return totals


def _tool_parts(session: Session) -> dict[str, int]:
    totals: dict[str, int] = {}
    for tool in session.client.tool_declarations():
        declared = {"name": tool.name, "description": tool.description}
        chars = len(json.dumps({**declared, "parameters": dict(tool.parameters)}))
        server = tool.name[len(_MCP_PREFIX) :].split("__", 1)[0]
        name = f"tools: MCP server {server}" if tool.name.startswith(_MCP_PREFIX) else "tools"
        _add(totals, name, _tokens(chars))
    return totals


def context_report(session: Session) -> ContextReport:
    """What the next request of ``session`` holds, by part (see the module docstring)."""
    prompt = session.system_prompt
    system = {
        "system prompt": prompt.core + prompt.append,
        "context files": prompt.context_files,
        "skills": prompt.skills,
        "memory section": prompt.memory,
    }
    totals = {name: _tokens(len(text)) for name, text in system.items() if text}
    totals.update(_tool_parts(session))
    client = session.client
    for name, tokens in _history_parts(client.history.shallow(), client.startup_length).items():
        _add(totals, name, tokens)
    settings = session.settings.model.chat_compression
    return ContextReport(
        parts=tuple(ContextPart(name, tokens) for name, tokens in totals.items() if tokens),
        window=client.context_window,
        threshold=max(0.0, settings.context_percentage_threshold),
        counted=client.last_prompt_tokens,
        output_bound=client.output_bound(),
    )


def usage_report(session: Session) -> dict[str, Any]:
    """This session's usage by purpose (this process), and today's of every session of this
    cairn home (``None`` for a daemon tenant: other tenants' use is not theirs to see), with
    ``cost_usd`` where ``model.prices`` prices every model a purpose used."""
    ledger = session.runtime.usage
    prices = session.settings.model.prices

    def price(model: str, usage: Usage) -> float | None:
        known = prices.get(model)
        if known is None:
            return None
        return known.cost(usage.input_tokens, usage.output_tokens, usage.cached_tokens)

    today = None if session.runtime.tenant else by_purpose_dict(ledger.day_by_model(), price)
    return {
        "session": by_purpose_dict(ledger.session_by_model(session.id), price),
        "today": today,
        "day": ledger.today().isoformat(),
    }


def render_usage(report: Mapping[str, Any]) -> str:
    """:func:`usage_report` as ``/usage`` shows it."""
    lines: list[str] = []
    day = report.get("day", "")
    for title, key in (("This session", "session"), (f"Today ({day}, UTC)", "today")):
        totals = report.get(key)
        if totals is None:
            continue
        if not totals:
            lines.append(f"{title}: no model requests yet.")
            continue
        lines.append(f"{title}, tokens by purpose (input / output, cached input):")
        width = max(len(purpose) for purpose in totals)
        sums = Usage()
        costs = [counts.get("cost_usd") for counts in totals.values()]
        for purpose, counts in totals.items():
            lines.append(_usage_line(purpose.ljust(width), counts))
            sums.add(_usage(counts))
        total: dict[str, Any] = sums.to_dict()
        if all(cost is not None for cost in costs):
            total["cost_usd"] = sum(c for c in costs if c is not None)
        lines.append(_usage_line("total".ljust(width), total))
    return "\n".join(lines)


def _usage(counts: Mapping[str, int]) -> Usage:
    return Usage(
        input_tokens=counts.get("input_tokens", 0),
        output_tokens=counts.get("output_tokens", 0),
        cached_tokens=counts.get("cache_read_input_tokens", 0),
    )


def _usage_line(label: str, counts: Mapping[str, Any]) -> str:
    read, written = counts.get("input_tokens", 0), counts.get("output_tokens", 0)
    cached = counts.get("cache_read_input_tokens", 0)
    cost = counts.get("cost_usd")
    priced = f"  ${cost:,.4f}" if cost is not None else ""
    return f"  {label}  {read:>10,} / {written:>8,}  ({cached:,} cached){priced}"
