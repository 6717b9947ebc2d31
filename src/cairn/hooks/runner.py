"""The hook runner: one per session, it runs the configured command hooks for an event.

Every hook matching an event runs at the same time; their answers are merged (any block blocks,
deny > ask > allow, contexts joined in settings order). A hook that fails, times out or prints
something unreadable is a warning and otherwise ignored: hooks can stop the agent only on
purpose, never by accident.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.settings import HookCommand, HookMatcher, HooksSettings
from cairn.debug_log import get_logger
from cairn.hooks.outcome import (
    HOOK_EVENTS,
    HookEvent,
    HookOutcome,
    merge_outcomes,
    outcome_from_result,
)
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.hooks.matcher import ToolMatcher

__all__ = ["HOOK_EVENTS", "NO_RESPONSE_TEXT", "HookRunner"]

NO_RESPONSE_TEXT = "[no response text]"  # Stop's last_assistant_message when the model said nothing
_LABEL_CHARS = 60  # characters of a command quoted to name an unnamed hook in a warning

_log = get_logger("HOOKS")


class _Group(Value):
    matcher: ToolMatcher
    hooks: tuple[HookCommand, ...]


# What each event's ``matcher`` is matched against (the others have no matcher).
_MATCHED_ON: dict[HookEvent, str] = {
    "PreToolUse": "tool_name",
    "PostToolUse": "tool_name",
    "PostToolUseFailure": "tool_name",
    "SubagentStop": "agent_type",
    "SessionStart": "source",
    "SessionEnd": "reason",
    "PreCompact": "trigger",
    "Notification": "notification_type",
}


class HookRunner:
    """Runs the command hooks of a session, for every event of :data:`HOOK_EVENTS`."""

    def __init__(
        self,
        hooks: HooksSettings,
        *,
        cwd: Path,
        session_id: str,
        transcript_path: Path | None = None,
        disabled: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.cwd = cwd
        self.session_id = session_id
        self.transcript_path = transcript_path
        self.disabled = disabled
        self._environ = dict(os.environ if environ is None else environ)
        self._setup_warnings: list[str] = []
        configured: dict[HookEvent, list[HookMatcher]] = {
            "UserPromptSubmit": hooks.user_prompt_submit,
            "PreToolUse": hooks.pre_tool_use,
            "PostToolUse": hooks.post_tool_use,
            "PostToolUseFailure": hooks.post_tool_use_failure,
            "Stop": hooks.stop,
            "SubagentStop": hooks.subagent_stop,
            "SessionStart": hooks.session_start,
            "SessionEnd": hooks.session_end,
            "PreCompact": hooks.pre_compact,
            "Notification": hooks.notification,
        }
        self._groups: dict[HookEvent, list[_Group]] = {
            event: self._compile(event, groups) for event, groups in configured.items()
        }

    def commands(self) -> list[str]:
        """Every configured hook command (the files they run are protected from tools)."""
        groups = [group for event_groups in self._groups.values() for group in event_groups]
        return [hook.command for group in groups for hook in group.hooks]

    def has(self, event: HookEvent) -> bool:
        """Whether any hook is configured for ``event`` (and hooks are not disabled)."""
        return not self.disabled and any(group.hooks for group in self._groups[event])

    async def user_prompt_submit(self, prompt: str) -> HookOutcome:
        return await self._run("UserPromptSubmit", {"prompt": prompt})

    async def pre_tool_use(
        self,
        *,
        tool_name: str,
        tool_input: Mapping[str, Any],
        tool_use_id: str,
        permission_mode: str,
    ) -> HookOutcome:
        fields = _tool_fields(permission_mode, tool_name, tool_input, tool_use_id)
        return await self._run("PreToolUse", fields)

    async def post_tool_use(
        self,
        *,
        tool_name: str,
        tool_input: Mapping[str, Any],
        tool_response: Mapping[str, Any],
        tool_use_id: str,
        permission_mode: str,
    ) -> HookOutcome:
        fields = _tool_fields(permission_mode, tool_name, tool_input, tool_use_id)
        fields["tool_response"] = dict(tool_response)
        return await self._run("PostToolUse", fields)

    async def post_tool_use_failure(
        self,
        *,
        tool_name: str,
        tool_input: Mapping[str, Any],
        tool_use_id: str,
        error: str,
        permission_mode: str,
        is_interrupt: bool = False,
    ) -> HookOutcome:
        fields = _tool_fields(permission_mode, tool_name, tool_input, tool_use_id)
        fields |= {"error": error, "is_interrupt": is_interrupt}
        return await self._run("PostToolUseFailure", fields)

    async def subagent_stop(
        self,
        *,
        agent_id: str,
        agent_type: str,
        last_assistant_message: str,
        stop_hook_active: bool,
        permission_mode: str,
    ) -> HookOutcome:
        message = last_assistant_message if last_assistant_message.strip() else NO_RESPONSE_TEXT
        fields = {
            "permission_mode": permission_mode,
            "stop_hook_active": stop_hook_active,
            "agent_id": agent_id,
            "agent_type": agent_type,
            "agent_transcript_path": "",
            "last_assistant_message": message,
        }
        return await self._run("SubagentStop", fields)

    async def session_start(self, *, source: str, model: str) -> HookOutcome:
        """``source``: ``startup``, ``resume``, ``clear`` or ``compact``."""
        return await self._run("SessionStart", {"source": source, "model": model})

    async def session_end(self, *, reason: str) -> HookOutcome:
        """``reason``: ``clear``, ``prompt_input_exit`` or ``other``."""
        return await self._run("SessionEnd", {"reason": reason})

    async def pre_compact(self, *, trigger: str, custom_instructions: str = "") -> HookOutcome:
        """``trigger``: ``manual`` (``/compress``) or ``auto``."""
        fields = {"trigger": trigger, "custom_instructions": custom_instructions}
        return await self._run("PreCompact", fields)

    async def notification(
        self, *, message: str, notification_type: str, title: str = "cairn"
    ) -> HookOutcome:
        """``notification_type``: ``permission_prompt`` or ``idle_prompt``."""
        fields = {"message": message, "notification_type": notification_type, "title": title}
        return await self._run("Notification", fields)

    async def stop(
        self,
        *,
        last_assistant_message: str,
        stop_hook_active: bool = True,
        context_usage: float | None = None,
    ) -> HookOutcome:
        message = last_assistant_message if last_assistant_message.strip() else NO_RESPONSE_TEXT
        fields: dict[str, Any] = {
            "stop_hook_active": stop_hook_active,
            "last_assistant_message": message,
        }
        if context_usage is not None:
            fields["context_usage"] = context_usage
        return await self._run("Stop", fields)

    def _compile(self, event: HookEvent, groups: list[HookMatcher]) -> list[_Group]:
        compiled: list[_Group] = []
        if not groups:
            return compiled
        from cairn.hooks.matcher import ToolMatcher  # only sessions with hooks load it

        for group in groups:
            matcher = ToolMatcher.compile(group.matcher if event in _MATCHED_ON else "")
            if matcher.error is not None:
                self._setup_warnings.append(f"{event} hooks skipped: {matcher.error}")
            hooks = tuple(c for c in group.hooks if c.command.strip())
            compiled.append(_Group(matcher, hooks))
        return compiled

    def _selected(self, event: HookEvent, fields: Mapping[str, Any]) -> list[HookCommand]:
        key = _MATCHED_ON.get(event)
        value = fields.get(key) if key is not None else None
        return [
            hook
            for group in self._groups[event]
            if not isinstance(value, str) or group.matcher.matches(value)
            for hook in group.hooks
        ]

    async def _run(self, event: HookEvent, fields: Mapping[str, Any]) -> HookOutcome:
        if self.disabled:
            return HookOutcome()
        hooks = self._selected(event, fields)
        merged = await self._run_all(event, hooks, fields) if hooks else HookOutcome()
        if self._groups[event] and self._setup_warnings:
            # Reported once, with the first event their groups belong to, not every time.
            merged.warnings[:0] = self._setup_warnings
            self._setup_warnings = []
        for warning in merged.warnings:
            _log.warning(warning)
        return merged

    async def _run_all(
        self, event: HookEvent, hooks: list[HookCommand], fields: Mapping[str, Any]
    ) -> HookOutcome:
        stdin = self._encode(event, fields)
        if stdin is None:
            return _unencodable(event)
        outcomes = await asyncio.gather(*(self._run_one(event, h, stdin) for h in hooks))
        return merge_outcomes(event, outcomes)

    def _encode(self, event: HookEvent, fields: Mapping[str, Any]) -> bytes | None:
        """The event as UTF-8 JSON; text that UTF-8 cannot carry (a lone surrogate) is written
        as a JSON escape. ``None`` when it cannot be encoded at all (nested too deeply)."""
        payload = self._payload(event, fields)
        try:
            return json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(payload, default=str).encode("ascii")
        except (RecursionError, ValueError):
            return None

    async def _run_one(self, event: HookEvent, hook: HookCommand, stdin: bytes) -> HookOutcome:
        from cairn.hooks.process import run_command, timeout_seconds  # only when a hook runs

        timeout = timeout_seconds(hook.timeout)
        started = asyncio.get_running_loop().time()
        result = await run_command(
            hook.command, stdin=stdin, cwd=self.cwd, env=self._env(hook), timeout=timeout
        )
        elapsed_ms = (asyncio.get_running_loop().time() - started) * 1000
        label = _label(hook)
        _log.debug(f"{event} hook {label}: exit {result.exit_code} in {elapsed_ms:.0f} ms")
        return outcome_from_result(event, label, result)

    def _payload(self, event: HookEvent, fields: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript_path) if self.transcript_path else "",
            "cwd": str(self.cwd),
            "hook_event_name": event,
            "timestamp": _utc_now_iso(),
            **fields,
        }

    def _env(self, command: HookCommand) -> dict[str, str]:
        project = str(self.cwd)
        return {
            **self._environ,
            **command.env,
            "CAIRN_PROJECT_DIR": project,
            "CLAUDE_PROJECT_DIR": project,  # existing Claude Code hooks read this name
            "CAIRN_SESSION_ID": self.session_id,
        }


def _unencodable(event: HookEvent) -> HookOutcome:
    """Hooks that cannot be told about an event cannot guard it: a tool call is refused."""
    warning = f"{event} hooks skipped: the event could not be passed to them as JSON"
    if event == "PreToolUse":
        reason = (
            "The tool call's input could not be passed to the PreToolUse hooks (it is nested "
            "too deeply), so it is not run. Call the tool again with simpler arguments."
        )
        return HookOutcome(blocked=True, reason=reason, decision="deny", warnings=[warning])
    return HookOutcome(warnings=[warning])


def _utc_now_iso() -> str:
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
    return now.replace("+00:00", "Z")


def _tool_fields(
    permission_mode: str, tool_name: str, tool_input: Mapping[str, Any], tool_use_id: str
) -> dict[str, Any]:
    """The input fields the three tool events share."""
    return {
        "permission_mode": permission_mode,
        "tool_name": tool_name,
        "tool_input": dict(tool_input),
        "tool_use_id": tool_use_id,
    }


def _label(command: HookCommand) -> str:
    if command.name:
        return repr(command.name)
    text = " ".join(command.command.split())
    return repr(text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "...")
