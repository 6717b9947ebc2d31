"""The tool scheduler: validate, check permissions and hooks, ask if needed, run, report.

Calls of one batch run in the order the model issued them. A call the user declines ends the
batch: the calls after it are answered as skipped, so every call still gets a response.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from cairn.content import FunctionCall, FunctionResponse
from cairn.debug_log import get_logger
from cairn.tools.base import Location, Tool, ToolContext, ToolKind, ToolResult
from cairn.tools.permissions import (
    PLAN_MODE_MESSAGE,
    ApprovalDecision,
    PermissionRules,
    decide_approval,
)
from cairn.vocabulary.events import EventSink, Notice, PlanUpdate, ToolCallStart, ToolCallUpdate
from cairn.vocabulary.interaction import Frontend, PermissionRequest

if TYPE_CHECKING:
    from cairn.hooks.runner import HookRunner
    from cairn.tools.registry import ToolRegistry

__all__ = ["BeforeChange", "ToolOutcome", "ToolScheduler", "may_change_workspace"]

INVALID_ARGUMENTS_KEY = "__invalid_arguments__"
DECLINED_MESSAGE = "The user declined this tool call. Ask them how to proceed."
# Awaited right before a call that may change the workspace runs (the session's checkpoints).
BeforeChange = Callable[[EventSink], Awaitable[None]]
SKIPPED_MESSAGE = "Skipped: an earlier tool call in this batch was declined by the user."
_log = get_logger("TOOLS")


@dataclass
class ToolOutcome:
    call: FunctionCall
    response: FunctionResponse
    status: Literal["completed", "failed", "rejected", "skipped", "cancelled"]
    result: ToolResult | None = None

    @property
    def terminal(self) -> bool:
        """Completed or failed (not declined, skipped or cancelled): counts as a completed call."""
        return self.status in ("completed", "failed")


class ToolScheduler:
    def __init__(
        self,
        *,
        registry: ToolRegistry,
        rules: PermissionRules,
        frontend: Frontend,
        approval_mode: Callable[[], str],
        hooks: HookRunner | None = None,
        before_change: BeforeChange | None = None,
    ) -> None:
        self.registry = registry
        self.before_change = before_change
        self.rules = rules
        self.frontend = frontend
        self._approval_mode = approval_mode
        self.hooks = hooks
        self._always_allowed: set[str] = set()

    async def run(
        self, calls: Sequence[FunctionCall], ctx: ToolContext, emit: EventSink
    ) -> list[ToolOutcome]:
        outcomes: list[ToolOutcome] = []
        declined = False
        for call in calls:
            if declined:
                outcomes.append(_error(call, SKIPPED_MESSAGE, "skipped"))
                await emit(ToolCallUpdate(call.id, "cancelled", output=SKIPPED_MESSAGE))
                continue
            outcome = await self._run_one(call, ctx, emit)
            outcomes.append(outcome)
            declined = outcome.status == "rejected"
        return outcomes

    async def _run_one(self, call: FunctionCall, ctx: ToolContext, emit: EventSink) -> ToolOutcome:
        ctx = replace(ctx, approval_mode=self._approval_mode())
        tool = self.registry.get(call.name)
        if tool is None:
            await emit(ToolCallStart(call.id, call.name, call.name, ToolKind.OTHER, call.args))
            return await _fail(call, self.registry.unknown_tool_message(call.name), emit)
        title = _safe_title(tool, call)
        locations = tuple(_safe_locations(tool, call, ctx))
        await emit(ToolCallStart(call.id, call.name, title, tool.kind, call.args, locations))
        if INVALID_ARGUMENTS_KEY in call.args:
            return await _fail(
                call,
                f"The arguments of {call.name} were not a valid JSON object: "
                f"{str(call.args[INVALID_ARGUMENTS_KEY])[:200]}. Call it again with valid JSON.",
                emit,
            )

        forced_confirm = False
        if self.hooks is not None and self.hooks.has("PreToolUse"):
            hook = await self.hooks.pre_tool_use(
                tool_name=call.name,
                tool_input=call.args,
                tool_use_id=call.id,
                permission_mode=self._approval_mode(),
            )
            for warning in hook.warnings:
                await emit(Notice("warning", warning, "hook"))
            if hook.system_message:
                await emit(Notice("info", hook.system_message, "hook"))
            if hook.blocked or hook.decision == "deny":
                reason = hook.reason or "No reason provided"
                return await _fail(call, f"Blocked by a PreToolUse hook: {reason}", emit)
            if hook.decision == "allow" and not self._denied_by_rule(call, ctx):
                refused = self._refused_in_plan_mode(tool, call, ctx)
                if refused is not None:
                    return await _fail(call, refused, emit)
                return await self._execute(tool, call, ctx, emit)  # deny rules still apply
            forced_confirm = hook.decision == "ask"

        action = self._approval(tool, call, ctx, forced_confirm)
        if action.action == "deny":
            return await _fail(call, action.message, emit)
        if action.action == "confirm":
            outcome = await self._confirm(tool, call, ctx, title)
            if outcome in ("reject", "cancelled"):
                await emit(ToolCallUpdate(call.id, "cancelled", output=DECLINED_MESSAGE))
                return _error(call, DECLINED_MESSAGE, "rejected")
        return await self._execute(tool, call, ctx, emit)

    @staticmethod
    def _refused_in_plan_mode(tool: Tool, call: FunctionCall, ctx: ToolContext) -> str | None:
        """Plan mode refuses an MCP call that may change things, even when a hook allows it."""
        if ctx.approval_mode == "plan" and tool.confirmation(call.args, ctx) == "mcp":
            return PLAN_MODE_MESSAGE
        return None

    def _denied_by_rule(self, call: FunctionCall, ctx: ToolContext) -> bool:
        match = self.rules.match(call.name, call.args, ctx.workspace)
        return match is not None and match.decision == "deny"

    def _approval(
        self, tool: Tool, call: FunctionCall, ctx: ToolContext, forced: bool
    ) -> ApprovalDecision:
        confirmation = tool.confirmation(call.args, ctx)
        match = self.rules.match(call.name, call.args, ctx.workspace)
        rule = match.decision if match else None
        if forced and rule != "deny":
            # A hook asked for confirmation: "info" is never auto-approved by auto-edit.
            rule, confirmation = "ask", "info"
        if rule is None and confirmation is not None and self._always_allowed_for(call):
            rule = "allow"
        return decide_approval(
            rule=rule,
            confirmation=confirmation,
            approval_mode=self._approval_mode(),  # type: ignore[arg-type]
            interactive=self.frontend.interactive,
            tool_name=call.name,
            rule_text=match.rule.text if match else None,
        )

    async def _confirm(self, tool: Tool, call: FunctionCall, ctx: ToolContext, title: str) -> str:
        try:
            diff = await tool.preview(call.args, ctx)
        except Exception as exc:
            _log.warning(f"preview of {call.name} failed: {exc!r}")
            diff = None
        request = PermissionRequest(
            call_id=call.id,
            tool_name=call.name,
            title=title,
            kind=tool.kind,
            confirmation=tool.confirmation(call.args, ctx) or "info",
            args=call.args,
            diff=diff,
        )
        outcome = await self.frontend.request_permission(request)
        if outcome == "allow_always":
            self._always_allowed.update(self._always_keys(call))
        return outcome

    def _always_allowed_for(self, call: FunctionCall) -> bool:
        keys = self._always_keys(call)
        return bool(keys) and keys <= self._always_allowed

    @staticmethod
    def _always_keys(call: FunctionCall) -> set[str]:
        """What "allow always" remembers: the tool, or for the shell every program it runs."""
        if call.name == "run_shell_command":
            from cairn.tools.shell_parse import describe_command  # ~6 ms to import: on use

            programs = describe_command(str(call.args.get("command", "")))
            return {f"run_shell_command:{p}" for p in programs}
        return {call.name}

    async def _execute(
        self, tool: Tool, call: FunctionCall, ctx: ToolContext, emit: EventSink
    ) -> ToolOutcome:
        if self.before_change is not None and may_change_workspace(tool, call, ctx):
            try:
                await self.before_change(emit)
            except Exception as exc:  # a checkpoint is a safety net, never the turn's failure
                _log.warning(f"before-change hook failed: {exc!r}")
        await emit(ToolCallUpdate(call.id, "in_progress"))
        try:
            result = await tool.execute(call.args, ctx)
        except Exception as exc:
            _log.error(f"{call.name} raised {exc!r}")
            result = ToolResult(error=f"{call.name} failed unexpectedly: {exc}")
        status: Literal["completed", "failed"] = "completed" if result.ok else "failed"
        text = result.output if result.ok else result.error
        await emit(
            ToolCallUpdate(
                call.id,
                status,
                output=text,
                display=result.display,
                diff=result.diff,
                locations=tuple(result.locations),
            )
        )
        if result.todos is not None:
            await emit(PlanUpdate(tuple(result.todos)))
        return ToolOutcome(call, result.to_response(call), status, result)


def may_change_workspace(tool: Tool, call: FunctionCall, ctx: ToolContext) -> bool:
    """Edits always may; a command or another tool may unless it runs without confirmation
    (a read-only shell command); reading, searching and thinking never do."""
    if tool.kind in (ToolKind.EDIT, ToolKind.DELETE):
        return True
    if tool.kind in (ToolKind.EXECUTE, ToolKind.OTHER):
        try:
            return tool.confirmation(call.args, ctx) is not None
        except Exception:
            return True
    return False


def _error(
    call: FunctionCall, message: str, status: Literal["failed", "rejected", "skipped"]
) -> ToolOutcome:
    return ToolOutcome(call, FunctionResponse(call.id, call.name, {"error": message}), status)


async def _fail(call: FunctionCall, message: str, emit: EventSink) -> ToolOutcome:
    await emit(ToolCallUpdate(call.id, "failed", output=message))
    return _error(call, message, "failed")


def _safe_title(tool: Tool, call: FunctionCall) -> str:
    try:
        return tool.title(call.args)
    except Exception:
        return call.name


def _safe_locations(tool: Tool, call: FunctionCall, ctx: ToolContext) -> list[Location]:
    try:
        return tool.locations(call.args, ctx)
    except Exception:
        return []
