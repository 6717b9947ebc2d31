"""The tool scheduler: validate, check permissions and hooks, ask if needed, run, report.

Calls of one batch run in the order the model issued them. A call the user declines ends the
batch: the calls after it are answered as skipped, so every call still gets a response.

Every call runs with a tool context that carries the scheduler's deny rules (so each path a
tool touches is checked, not only its arguments), the tool's name and why it may run. A call
that would change cairn's own configuration (:mod:`cairn.tools.protected`) is confirmed as a
settings change in every mode but yolo. The permission checks read files (globs, git config),
so they run in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from cairn.content import FunctionCall, FunctionResponse
from cairn.debug_log import get_logger
from cairn.tools.base import ApprovalSource, Location, Tool, ToolContext, ToolKind, ToolResult
from cairn.tools.permissions import (
    PLAN_MODE_MESSAGE,
    ApprovalDecision,
    PermissionRules,
    RuleMatch,
    Strictness,
    decide_approval,
)
from cairn.values import Value, replace
from cairn.vocabulary.events import (
    EventSink,
    Notice,
    PlanUpdate,
    ToolCallStart,
    ToolCallUpdate,
    ToolEnding,
)
from cairn.vocabulary.interaction import Frontend, PermissionRequest
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.hooks.outcome import HookEvent, HookOutcome
    from cairn.hooks.runner import HookRunner
    from cairn.tools.protected import ProtectedPaths
    from cairn.tools.registry import ToolRegistry

__all__ = [
    "SETTINGS_APPLIED_NOTICE",
    "SETTINGS_KEPT_NOTICE",
    "BeforeChange",
    "SettingsChanged",
    "ToolOutcome",
    "ToolScheduler",
    "may_change_workspace",
]

INVALID_ARGUMENTS_KEY = "__invalid_arguments__"
DECLINED_MESSAGE = "The user declined this tool call. Ask them how to proceed."
# Awaited right before a call that may change the workspace runs (the session's checkpoints).
BeforeChange = Callable[[EventSink], Awaitable[None]]
SKIPPED_MESSAGE = "Skipped: an earlier tool call in this batch was declined by the user."
SETTINGS_KEPT_NOTICE = (
    "{what} was changed without your confirmation. This session keeps the permission rules and "
    "hooks it started with; the change applies the next time cairn starts here."
)
SETTINGS_APPLIED_NOTICE = (
    "{what} was changed with your approval; this session's permission rules and hooks now "
    "follow the settings files."
)
# Told when a call changed cairn's configuration: what changed, and why the call ran (the
# session applies a change the user approved, and only that).
SettingsChanged = Callable[[str, ApprovalSource, EventSink], Awaitable[None]]
_log = get_logger("TOOLS")


class _Approval(Value):
    decision: ApprovalDecision
    source: ApprovalSource
    strict: Strictness | None = None
    strict_reason: str = ""


class ToolOutcome(Value, frozen=False):
    call: FunctionCall
    response: FunctionResponse
    status: Literal["completed", "failed", "rejected", "skipped", "cancelled"]
    result: ToolResult | None = None
    stop_reason: str | None = None  # a PostToolUse hook said `continue: false`: the turn ends

    @property
    def terminal(self) -> bool:
        """Completed or failed (not declined, skipped or cancelled): counts as a completed call."""
        return self.status in ("completed", "failed")


class ToolScheduler:
    """Runs a turn's tool calls (see the module docstring). A plain class, not a dataclass:
    nothing is compiled when it is defined, on every start-up."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        rules: PermissionRules,
        frontend: Frontend,
        approval_mode: Callable[[], str],
        hooks: HookRunner | None = None,
        before_change: BeforeChange | None = None,
        settings_changed: SettingsChanged | None = None,
    ) -> None:
        self.registry = registry
        self.rules = rules
        self.frontend = frontend
        self.approval_mode = approval_mode
        self.hooks = hooks
        self.before_change = before_change
        self.settings_changed = settings_changed
        # Named in what it asks the user ("general-purpose: ..."): a subagent's.
        self.label = ""
        self._always_allowed: set[str] = set()
        self._protected: dict[tuple[object, ...], ProtectedPaths] = {}
        # The Notification hooks still running.
        self._notifying: set[asyncio.Future[HookOutcome]] = set()
        self._ungranted: PermissionRules | None = None  # while granting

    def grant(self, allowed: PermissionRules) -> None:
        """Let ``allowed``'s allow rules allow calls too, until :meth:`end_grant` (a command
        file's or skill's ``allowed-tools``, for the rest of its turn)."""
        if self._ungranted is None:
            self._ungranted = self.rules
        self.rules = self.rules.allowing(allowed)

    def end_grant(self) -> None:
        if self._ungranted is not None:
            self.rules, self._ungranted = self._ungranted, None

    def follow_settings(self, rules: PermissionRules, hooks: HookRunner) -> None:
        """Use new settings' rules and hooks (a settings change the user approved); a grant
        ends with them."""
        self.rules, self._ungranted, self.hooks = rules, None, hooks

    async def run(
        self, calls: Sequence[FunctionCall], ctx: ToolContext, emit: EventSink
    ) -> list[ToolOutcome]:
        outcomes: list[ToolOutcome] = []
        declined = False
        for group in self._groups(calls):
            if declined:
                for call in group:
                    outcomes.append(_error(call, SKIPPED_MESSAGE, "skipped"))
                    await emit(
                        ToolCallUpdate(
                            call.id, "cancelled", output=SKIPPED_MESSAGE, ending="skipped"
                        )
                    )
                continue
            if len(group) == 1:
                done = [await self._run_one(group[0], ctx, emit)]
            else:  # calls of a concurrent tool (subagents) run together
                done = list(await asyncio.gather(*(self._run_one(c, ctx, emit) for c in group)))
            outcomes.extend(done)
            declined = any(outcome.status == "rejected" for outcome in done)
        return outcomes

    def _groups(self, calls: Sequence[FunctionCall]) -> list[list[FunctionCall]]:
        """The batch in order, consecutive calls of a ``concurrent`` tool grouped together."""
        groups: list[list[FunctionCall]] = []
        for call in calls:
            if groups and self._concurrent(call) and self._concurrent(groups[-1][-1]):
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    def _concurrent(self, call: FunctionCall) -> bool:
        return getattr(self.registry.get(call.name), "concurrent", False) is True

    def derived(
        self, *, registry: ToolRegistry, hooks: HookRunner | None, label: str
    ) -> ToolScheduler:
        """A scheduler for a subagent: this one's rules, front end, approval mode, checkpoints
        and "allow always" answers, over the subagent's own tools; ``label`` prefixes the title
        of what it asks the user."""
        child = ToolScheduler(
            registry=registry,
            rules=self.rules,
            frontend=self.frontend,
            approval_mode=self.approval_mode,
            hooks=hooks,
            before_change=self.before_change,
            settings_changed=self.settings_changed,
        )
        child._always_allowed = self._always_allowed
        child._protected = self._protected
        child.label = label
        return child

    async def _run_one(self, call: FunctionCall, ctx: ToolContext, emit: EventSink) -> ToolOutcome:
        tool = self.registry.get(call.name)
        if tool is None:
            await emit(ToolCallStart(call.id, call.name, call.name, ToolKind.OTHER, call.args))
            return await _fail(call, self.registry.unknown_tool_message(call.name), emit)
        ctx = replace(
            ctx,
            approval_mode=self.approval_mode(),
            path_rules=ctx.path_rules or self.rules,
            tool_name=call.name,
            call_id=call.id,
            events=emit,
        )
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
        try:
            settings = await asyncio.to_thread(self._settings_change, call, ctx)
        except Exception as exc:  # a check that fails must refuse, never run or crash the turn
            return await _fail(call, _check_failed(call, exc), emit)

        forced_confirm = False
        hook_context: str | None = None  # a PreToolUse hook's additionalContext, for the model
        if self.hooks is not None and self.hooks.has("PreToolUse"):
            hook = await self.hooks.pre_tool_use(
                tool_name=call.name,
                tool_input=call.args,
                tool_use_id=call.id,
                permission_mode=self.approval_mode(),
            )
            for notice in hook.notices():
                await emit(notice)
            hook_context = hook.additional_context
            if hook.blocked or hook.decision == "deny":
                reason = hook.reason or "No reason provided"
                message = f"Blocked by a PreToolUse hook: {reason}" + _hook_note(hook_context)
                return await _fail(call, message, emit, denied=True)
            if hook.updated_input is not None:  # the call runs, and is checked, as rewritten
                call = FunctionCall(call.id, call.name, hook.updated_input)
                await emit(Notice("info", f"A PreToolUse hook changed {title}.", "hook"))
                try:
                    settings = await asyncio.to_thread(self._settings_change, call, ctx)
                except Exception as exc:
                    return await _fail(call, _check_failed(call, exc), emit)
            if hook.decision == "allow" and settings is None:
                try:
                    match = await asyncio.to_thread(self._match, call, ctx)
                except Exception as exc:
                    return await _fail(call, _check_failed(call, exc), emit)
                if match is None or (match.decision != "deny" and match.strict is None):
                    # deny rules and commands they cannot see through still apply
                    refused = self._refused_in_plan_mode(tool, call, ctx)
                    if refused is not None:
                        return await _fail(call, refused, emit, denied=True)
                    return await self._execute(
                        tool, call, _approved(ctx, "rule"), emit, settings, hook_context
                    )
            forced_confirm = hook.decision == "ask"

        try:
            approval = await asyncio.to_thread(
                self._approval, tool, call, ctx, forced_confirm, settings
            )
        except Exception as exc:
            return await _fail(call, _check_failed(call, exc), emit)
        if approval.decision.action == "deny":
            return await _fail(call, approval.decision.message, emit, denied=True)
        source = approval.source
        if approval.decision.action == "confirm":
            outcome = await self._confirm(tool, call, ctx, title, approval)
            if outcome in ("reject", "cancelled"):
                ending: ToolEnding = "rejected" if outcome == "reject" else "cancelled"
                await emit(
                    ToolCallUpdate(
                        call.id, "cancelled", output=DECLINED_MESSAGE, denied=True, ending=ending
                    )
                )
                return _error(call, DECLINED_MESSAGE, "rejected")
            source = "user"
        return await self._execute(tool, call, _approved(ctx, source), emit, settings, hook_context)

    @staticmethod
    def _refused_in_plan_mode(tool: Tool, call: FunctionCall, ctx: ToolContext) -> str | None:
        """Plan mode refuses an MCP call that may change things, even when a hook allows it."""
        if ctx.approval_mode == "plan" and tool.confirmation(call.args, ctx) == "mcp":
            return PLAN_MODE_MESSAGE
        return None

    def _match(self, call: FunctionCall, ctx: ToolContext) -> RuleMatch | None:
        scope = None
        if call.name == ToolName.SHELL:
            from cairn.tools.shell import shell_scope

            scope = shell_scope(call.args, ctx)
        return self.rules.match(call.name, call.args, ctx.workspace, scope=scope)

    def _settings_change(self, call: FunctionCall, ctx: ToolContext) -> str | None:
        """What protected configuration the call would change (see cairn.tools.protected)."""
        if call.name not in (ToolName.WRITE_FILE, ToolName.EDIT, ToolName.SHELL):
            return None
        from cairn.tools.protected import ProtectedPaths, settings_change

        exempt = tuple(ctx.writable_roots or ())
        run_later = tuple(ctx.run_later)
        key = (ctx.workspace, exempt, run_later)
        paths = self._protected.get(key)
        if paths is None:
            commands = self.hooks.commands() if self.hooks is not None else []
            paths = ProtectedPaths.of(
                ctx.workspace, exempt=exempt, hook_commands=commands, run_later=run_later
            )
            self._protected[key] = paths
        cwd = ctx.workspace
        if call.name == ToolName.SHELL:
            from cairn.tools.shell import shell_scope

            if _is_read_only(call, ctx):
                return None  # a read-only command writes nothing
            cwd = shell_scope(call.args, ctx).cwd
        return settings_change(
            call.name,
            call.args,
            paths,
            lambda raw: ctx.resolve(raw, write=True),
            cwd,
            shell_can_change=ctx.sandbox.can_change if ctx.sandbox is not None else None,
        )

    def _approval(
        self,
        tool: Tool,
        call: FunctionCall,
        ctx: ToolContext,
        forced: bool,
        settings: str | None,
    ) -> _Approval:
        confirmation = tool.confirmation(call.args, ctx)
        match = self._match(call, ctx)
        rule = match.decision if match else None
        strict: Strictness | None = match.strict if match else None
        strict_reason = match.reason if match else ""
        if settings is not None and rule != "deny":
            strict, strict_reason = "settings", settings
        if forced and rule != "deny":
            # A hook asked for confirmation: "info" is never auto-approved by auto-edit.
            rule, confirmation = "ask", "info"
        always = (
            rule is None
            and strict is None
            and confirmation is not None
            and self._always_allowed_for(call)
        )
        if always:
            rule = "allow"
        mode = self.approval_mode()
        decision = decide_approval(
            rule=rule,
            confirmation=confirmation,
            approval_mode=mode,  # type: ignore[arg-type]
            interactive=self.frontend.interactive,
            tool_name=call.name,
            rule_text=match.rule.text if match else None,
            strict=strict,
            strict_reason=strict_reason,
        )
        source: ApprovalSource = "mode"
        if always:
            source = "user"
        elif strict is None and rule == "allow" and match is not None:
            source = "unasked" if match.read_only_parts else "rule"
        elif strict is None and confirmation is None and rule != "ask":
            source = "unasked"
        return _Approval(decision, source, strict, strict_reason)

    async def _confirm(
        self, tool: Tool, call: FunctionCall, ctx: ToolContext, title: str, approval: _Approval
    ) -> str:
        try:
            diff = await tool.preview(call.args, ctx)
        except Exception as exc:
            _log.warning(f"preview of {call.name} failed: {exc!r}")
            diff = None
        if approval.strict == "settings":
            title = f"Settings change — {approval.strict_reason}: {title}"
        elif approval.strict == "unresolved":
            title = f"{title} (cannot be checked against your deny rules: {approval.strict_reason})"
        if self.label:
            title = f"{self.label}: {title}"
        request = PermissionRequest(
            call_id=call.id,
            tool_name=call.name,
            title=title,
            kind=tool.kind,
            confirmation=tool.confirmation(call.args, ctx) or "info",
            args=call.args,
            diff=diff,
            strict=approval.strict,
            programs=self._programs(call),
        )
        self._notify(f"cairn needs your permission to use {call.name}", "permission_prompt")
        outcome = await self.frontend.request_permission(request)
        if outcome == "allow_always" and approval.strict is None:
            self._always_allowed.update(self._always_keys(call))
        return outcome

    def _notify(self, message: str, kind: str) -> None:
        """``Notification`` hooks hear that cairn waits for the user; never delays the asking."""
        hooks = self.hooks
        if hooks is None or not hooks.has("Notification"):
            return
        task = asyncio.ensure_future(hooks.notification(message=message, notification_type=kind))
        self._notifying.add(task)
        task.add_done_callback(self._notifying.discard)

    def _always_allowed_for(self, call: FunctionCall) -> bool:
        keys = self._always_keys(call)
        return bool(keys) and keys <= self._always_allowed

    @staticmethod
    def _programs(call: FunctionCall) -> tuple[str, ...]:
        """A shell command's programs, in order, as "allow always" would remember them."""
        if call.name != ToolName.SHELL:
            return ()
        from cairn.tools.shell_resolve import resolve

        line = resolve(str(call.args.get("command", "")))
        return () if line.unresolved else tuple(dict.fromkeys(line.programs))

    @staticmethod
    def _always_keys(call: FunctionCall) -> set[str]:
        """What "allow always" remembers: the tool, or for the shell every program it runs
        (wrappers and ``bash -c`` strings seen through); nothing for a command whose programs
        are only known when it runs."""
        if call.name == ToolName.SHELL:
            from cairn.tools.shell_resolve import resolve  # ~6 ms to import: on use

            line = resolve(str(call.args.get("command", "")))
            if line.unresolved:
                return set()
            return {f"{ToolName.SHELL}:{p}" for p in line.programs}
        if call.name == ToolName.WEB_FETCH:  # approved per domain
            host = urlsplit(str(call.args.get("url", ""))).hostname
            return {f"{ToolName.WEB_FETCH}:{host}"} if host else set()
        return {call.name}

    async def _execute(
        self,
        tool: Tool,
        call: FunctionCall,
        ctx: ToolContext,
        emit: EventSink,
        settings: str | None = None,
        hook_context: str | None = None,
    ) -> ToolOutcome:
        changes = self.before_change is not None and await asyncio.to_thread(
            may_change_workspace, tool, call, ctx
        )  # the shell's read-only check reads files: off the event loop
        if self.before_change is not None and changes:
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
        if hook_context:
            result = result.noted(_hook_note(hook_context))
        stop_reason: str | None = None
        if self.hooks is not None:
            result, stop_reason = await self._after_call(call, result, emit)
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
        if settings is not None and result.ok:
            if self.settings_changed is not None:
                await self.settings_changed(settings, ctx.approval, emit)
            else:
                notice = SETTINGS_KEPT_NOTICE.format(what=settings)
                await emit(Notice("warning", notice[0].upper() + notice[1:], "permissions"))
        return ToolOutcome(call, result.to_response(call), status, result, stop_reason)

    async def _after_call(
        self, call: FunctionCall, result: ToolResult, emit: EventSink
    ) -> tuple[ToolResult, str | None]:
        """``PostToolUse`` (or ``PostToolUseFailure``) hooks: what they tell the model joins the
        result; ``continue: false`` ends the turn (its reason returned)."""
        hooks = self.hooks
        assert hooks is not None
        event: HookEvent = "PostToolUse" if result.ok else "PostToolUseFailure"
        if not hooks.has(event):
            return result, None
        mode = self.approval_mode()
        if result.ok:
            outcome = await hooks.post_tool_use(
                tool_name=call.name,
                tool_input=call.args,
                tool_response=result.to_response(call).response,
                tool_use_id=call.id,
                permission_mode=mode,
            )
        else:
            outcome = await hooks.post_tool_use_failure(
                tool_name=call.name,
                tool_input=call.args,
                tool_use_id=call.id,
                error=result.error or "",
                permission_mode=mode,
            )
        for notice in outcome.notices():
            await emit(notice)
        notes = ""
        if outcome.blocked and outcome.reason:
            notes += f"\n\n{event} hook: {outcome.reason}"
        notes += _hook_note(outcome.additional_context)
        if notes:
            result = result.noted(notes)
        return result, outcome.stop_reason if outcome.stop else None


def _hook_note(context: str | None) -> str:
    """A hook's ``additionalContext`` as it follows a tool's result (already escaped)."""
    return f"\n\n<cairn:hook-context>{context}</cairn:hook-context>" if context else ""


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


def _check_failed(call: FunctionCall, exc: Exception) -> str:
    _log.error(f"permission check of {call.name} failed: {exc!r}")
    return (
        f"The permission check of this {call.name} call failed ({type(exc).__name__}: {exc}), "
        "so it was not run."
    )


def _approved(ctx: ToolContext, source: ApprovalSource) -> ToolContext:
    return replace(ctx, approval=source)


def _is_read_only(call: FunctionCall, ctx: ToolContext) -> bool:
    from cairn.tools.shell import shell_scope
    from cairn.tools.shell_readonly import is_read_only_command

    command = call.args.get("command")
    return isinstance(command, str) and is_read_only_command(command, shell_scope(call.args, ctx))


def _error(
    call: FunctionCall, message: str, status: Literal["failed", "rejected", "skipped"]
) -> ToolOutcome:
    return ToolOutcome(call, FunctionResponse(call.id, call.name, {"error": message}), status)


async def _fail(
    call: FunctionCall, message: str, emit: EventSink, *, denied: bool = False
) -> ToolOutcome:
    await emit(ToolCallUpdate(call.id, "failed", output=message, denied=denied))
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
