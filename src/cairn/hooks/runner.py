"""The hook runner: one per session, it runs the configured hooks for an event.

Every hook matching an event runs at the same time; their answers are merged (any block blocks,
deny > ask > allow, contexts joined in settings order). A hook that fails, times out or prints
something unreadable is a warning and otherwise ignored: hooks can stop the agent only on
purpose, never by accident.

A hook sees the event in its group's dialect (:mod:`cairn.hooks.dialect`): Claude Code's tool
names and arguments, or cairn's own. ``command`` hooks run a shell command (in the background
when ``async``: their ``systemMessage`` and ``additionalContext`` come with the next prompt,
:meth:`HookRunner.take_background`); ``prompt`` hooks ask the model (:mod:`cairn.hooks.prompt`).
``SessionStart`` hooks may write ``CLAUDE_ENV_FILE`` (:mod:`cairn.hooks.env_file`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.settings import HookCommand, HookMatcher, HooksSettings
from cairn.debug_log import get_logger
from cairn.hooks.dialect import Dialect, names_only_cairn_tools, permission_mode, tool_event
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
    from cairn.llm.types import Provider

RuleTest = Callable[[str, str, Mapping[str, Any]], bool]  # (rule, tool, arguments) -> covered?

__all__ = ["HOOK_EVENTS", "NO_RESPONSE_TEXT", "HookRunner"]

NO_RESPONSE_TEXT = "[no response text]"  # Stop's last_assistant_message when the model said nothing
_LABEL_CHARS = 60  # characters of a command quoted to name an unnamed hook in a warning

_log = get_logger("HOOKS")


class _Group(Value):
    matcher: ToolMatcher
    hooks: tuple[HookCommand, ...]
    dialect: Dialect


class _Selected(Value):
    hook: HookCommand
    dialect: Dialect


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
        provider: Provider | None = None,
        approval_mode: Callable[[], str] | None = None,
        rule_test: RuleTest | None = None,
        env_file: Path | None = None,
    ) -> None:
        """``provider``: the model ``prompt`` hooks ask; ``approval_mode``: the session's, for
        ``permission_mode``; ``rule_test``: whether a permission rule covers a call (a hook's
        ``if``); ``env_file``: the ``CLAUDE_ENV_FILE`` of ``SessionStart`` hooks."""
        self.cwd = cwd
        self.session_id = session_id
        self.transcript_path = transcript_path
        self.disabled = disabled
        self._environ = dict(os.environ if environ is None else environ)
        self._provider = provider
        self._approval_mode = approval_mode
        self._rule_test = rule_test
        self._env_file = env_file
        self._setup_warnings: list[str] = []
        self._told: set[str] = set()  # warnings said once a session
        self._background: set[asyncio.Task[HookOutcome]] = set()
        self._background_done: list[HookOutcome] = []
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
        return [hook.command for group in groups for hook in group.hooks if hook.type == "command"]

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
        """``source``: ``startup``, ``resume``, ``clear`` or ``compact``. The outcome's
        ``environment`` is what the hooks wrote to ``CLAUDE_ENV_FILE``: the changes to the
        session's environment (the hooks' own) for shell commands."""
        env_file = self._env_file
        if env_file is not None and self.has("SessionStart"):
            from cairn.hooks.env_file import reset_env_file

            try:
                reset_env_file(env_file)
            except OSError as exc:
                _log.warning(f"CLAUDE_ENV_FILE {env_file}: {exc}")
                env_file = None
        outcome = await self._run("SessionStart", {"source": source, "model": model})
        if env_file is not None and self.has("SessionStart"):
            from cairn.hooks.env_file import evaluate_env_file

            change, warning = await evaluate_env_file(env_file, self._environ, self.cwd)
            outcome.environment = change
            if warning is not None:
                _log.warning(warning)
                outcome.warnings.append(warning)
        return outcome

    @property
    def background_running(self) -> int:
        """How many ``async`` hooks are still running."""
        return len(self._background)

    def take_background(self) -> HookOutcome | None:
        """What ``async`` hooks finished since the last call said (their ``systemMessage``,
        ``additionalContext`` and warnings), for the next prompt; ``None`` when nothing."""
        if not self._background_done:
            return None
        done, self._background_done = self._background_done, []
        merged = merge_outcomes("Notification", done)  # an event without decisions
        return HookOutcome(
            additional_context=merged.additional_context,
            system_message=merged.system_message,
            warnings=merged.warnings,
        )

    async def close(self) -> None:
        """Stop the ``async`` hooks still running (with their process groups)."""
        running = list(self._background)
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if self._env_file is not None:
            from cairn.hooks.env_file import remove_env_file

            remove_env_file(self._env_file)

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
        from cairn.hooks.prompt import PROMPT_HOOK_EVENTS

        for group in groups:
            matcher = ToolMatcher.compile(group.matcher if event in _MATCHED_ON else "")
            if matcher.error is not None:
                self._setup_warnings.append(f"{event} hooks skipped: {matcher.error}")
            hooks: list[HookCommand] = []
            for hook in group.hooks:
                if hook.type == "prompt" and event not in PROMPT_HOOK_EVENTS:
                    self._setup_warnings.append(
                        f"{event} hook {_label(hook)} skipped: prompt hooks decide only "
                        f"{', '.join(sorted(PROMPT_HOOK_EVENTS))}; use a command hook"
                    )
                    continue
                if hook.type == "prompt" and hook.run_async:
                    self._setup_warnings.append(
                        f"{event} hook {_label(hook)}: `async` applies to command hooks only; "
                        "it is waited for"
                    )
                hooks.append(hook)
            compiled.append(_Group(matcher, tuple(hooks), _dialect(group, event)))
        return compiled

    def _selected(self, event: HookEvent, fields: Mapping[str, Any]) -> list[_Selected]:
        """The hooks of the groups whose matcher matches, whose ``if`` covers the call; a
        command configured twice (for one dialect) runs once, as in Claude Code."""
        key = _MATCHED_ON.get(event)
        value = fields.get(key) if key is not None else None
        selected: list[_Selected] = []
        seen: set[tuple[str, Dialect, bool]] = set()
        for group in self._groups[event]:
            if isinstance(value, str) and not group.matcher.matches(value):
                continue
            for hook in group.hooks:
                if hook.condition is not None and not self._covers(event, hook, fields):
                    continue
                if hook.type == "command":
                    identity = (hook.command, group.dialect, hook.run_async)
                    if identity in seen:
                        continue
                    seen.add(identity)
                selected.append(_Selected(hook, group.dialect))
        return selected

    def _covers(self, event: HookEvent, hook: HookCommand, fields: Mapping[str, Any]) -> bool:
        """Does the hook's ``if`` rule cover this tool call? Outside tool events it is ignored
        (said once); a rule that cannot be checked lets the hook run (said once)."""
        rule = hook.condition or ""
        tool = fields.get("tool_name")
        if not isinstance(tool, str):
            self._once(f"{event} hook {_label(hook)}: `if` applies to tool events only; ignored")
            return True
        if self._rule_test is None:
            self._once(f"{event} hook {_label(hook)}: `if` cannot be checked here; the hook runs")
            return True
        try:
            return self._rule_test(rule, tool, fields.get("tool_input") or {})
        except ValueError as exc:
            self._once(f"{event} hook {_label(hook)}: `if` {rule!r} is not a rule ({exc}); skipped")
            return False

    def _once(self, warning: str) -> None:
        if warning not in self._told:
            self._told.add(warning)
            self._setup_warnings.append(warning)

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
        self, event: HookEvent, hooks: list[_Selected], fields: Mapping[str, Any]
    ) -> HookOutcome:
        stdin: dict[Dialect, bytes] = {}
        for dialect in dict.fromkeys(h.dialect for h in hooks):
            encoded = self._encode(event, fields, dialect)
            if encoded is None:
                return _unencodable(event)
            stdin[dialect] = encoded
        waited = []
        for selected in hooks:
            data = stdin[selected.dialect]
            if selected.hook.type == "command" and selected.hook.run_async:
                self._start_background(event, selected.hook, data)
            else:
                waited.append(self._run_one(event, selected, fields, data))
        outcomes = await asyncio.gather(*waited)
        return merge_outcomes(event, outcomes)

    def _encode(
        self, event: HookEvent, fields: Mapping[str, Any], dialect: Dialect
    ) -> bytes | None:
        """The event as UTF-8 JSON; text that UTF-8 cannot carry (a lone surrogate) is written
        as a JSON escape. ``None`` when it cannot be encoded at all (nested too deeply)."""
        payload = self._payload(event, fields, dialect)
        try:
            return json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(payload, default=str).encode("ascii")
        except (RecursionError, ValueError):
            return None

    async def _run_one(
        self, event: HookEvent, selected: _Selected, fields: Mapping[str, Any], stdin: bytes
    ) -> HookOutcome:
        hook = selected.hook
        started = asyncio.get_running_loop().time()
        if hook.type == "prompt":
            outcome = await self._ask(event, hook, stdin)
            what = "answered"
        else:
            outcome, what = await self._command(event, hook, stdin)
        elapsed_ms = (asyncio.get_running_loop().time() - started) * 1000
        _log.debug(f"{event} hook {_label(hook)}: {what} in {elapsed_ms:.0f} ms")
        if outcome.updated_input is not None and isinstance(fields.get("tool_name"), str):
            from cairn.hooks.dialect import tool_arguments

            outcome.updated_input = tool_arguments(
                selected.dialect, fields["tool_name"], outcome.updated_input
            )
        return outcome

    async def _command(
        self, event: HookEvent, hook: HookCommand, stdin: bytes
    ) -> tuple[HookOutcome, str]:
        from cairn.hooks.process import run_command, timeout_seconds  # only when a hook runs

        timeout = timeout_seconds(hook.timeout)
        result = await run_command(
            hook.command, stdin=stdin, cwd=self.cwd, env=self._env(event, hook), timeout=timeout
        )
        return outcome_from_result(event, _label(hook), result), f"exit {result.exit_code}"

    async def _ask(self, event: HookEvent, hook: HookCommand, stdin: bytes) -> HookOutcome:
        from cairn.hooks.process import timeout_seconds
        from cairn.hooks.prompt import DEFAULT_PROMPT_TIMEOUT_SECONDS, ask_model

        timeout = (
            timeout_seconds(hook.timeout)
            if hook.timeout is not None
            else DEFAULT_PROMPT_TIMEOUT_SECONDS
        )
        return await ask_model(
            self._provider,
            event=event,
            where=f"hook {_label(hook)} ({event})",
            prompt=hook.prompt,
            arguments=stdin.decode("utf-8", errors="replace"),
            model=hook.model,
            timeout=timeout,
            session_id=self.session_id,
        )

    def _start_background(self, event: HookEvent, hook: HookCommand, stdin: bytes) -> None:
        """An ``async`` hook: nothing waits for it; what it says is kept for the next prompt
        (its decisions are not read: what they would decide has already gone on)."""

        async def run() -> HookOutcome:
            outcome, what = await self._command(event, hook, stdin)
            _log.debug(f"{event} hook {_label(hook)} (async): {what}")
            return outcome

        task = asyncio.ensure_future(run())
        self._background.add(task)
        task.add_done_callback(self._background_finished)

    def _background_finished(self, task: asyncio.Task[HookOutcome]) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            _log.warning(f"an async hook failed: {error!r}")
            return
        self._background_done.append(task.result())

    def _payload(
        self, event: HookEvent, fields: Mapping[str, Any], dialect: Dialect = "claude"
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript_path) if self.transcript_path else "",
            "cwd": str(self.cwd),
            "hook_event_name": event,
            "timestamp": _utc_now_iso(),
            **fields,
        }
        mode = fields.get("permission_mode")
        if not isinstance(mode, str) and self._approval_mode is not None:
            mode = self._approval_mode()
        if isinstance(mode, str):
            payload["permission_mode"] = permission_mode(mode, dialect)
        tool = fields.get("tool_name")
        if isinstance(tool, str):
            payload |= tool_event(
                dialect,
                tool,
                fields.get("tool_input") or {},
                str(self.cwd),
                fields.get("tool_response"),
            )
        return payload

    def _env(self, event: HookEvent, command: HookCommand) -> dict[str, str]:
        project = str(self.cwd)
        env = {
            **self._environ,
            **command.env,
            "CAIRN_PROJECT_DIR": project,
            "CLAUDE_PROJECT_DIR": project,  # existing Claude Code hooks read this name
            "CAIRN_SESSION_ID": self.session_id,
        }
        if event == "SessionStart" and self._env_file is not None:
            from cairn.hooks.env_file import ENV_FILE_VARIABLE

            env[ENV_FILE_VARIABLE] = str(self._env_file)
        return env


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
    text = " ".join((command.command if command.type == "command" else command.prompt).split())
    return repr(text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "...")


def _dialect(group: HookMatcher, event: HookEvent) -> Dialect:
    """The group's ``toolNames``; else cairn's names when its matcher names tools only by
    cairn's (or Qwen Code's) names, Claude Code's otherwise."""
    if group.tool_names is not None:
        return group.tool_names
    tool_event_ = _MATCHED_ON.get(event) == "tool_name"
    return "cairn" if tool_event_ and names_only_cairn_tools(group.matcher) else "claude"
