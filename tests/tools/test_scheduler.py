"""The tool scheduler: validation, rules, approval modes, the user's answers, hooks and events.

Calls run against the real built-in tools in a real workspace; hooks are real bash scripts run by
:class:`cairn.hooks.HookRunner`. What is observed: outcomes (the responses the model gets), the
events emitted, the permission requests the front end saw, and the files on disk.
"""

from __future__ import annotations

import json
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.content import FunctionCall
from cairn.hooks import HookRunner
from cairn.llm.types import INVALID_ARGUMENTS_KEY
from cairn.testing import ScriptedFrontend
from cairn.tools.base import (
    ConfirmationKind,
    FileDiff,
    Location,
    TodoItem,
    ToolContext,
    ToolKind,
    ToolResult,
)
from cairn.tools.permissions import (
    NON_INTERACTIVE_COMMAND_MESSAGE,
    NON_INTERACTIVE_MESSAGE,
    PLAN_MODE_MESSAGE,
    PermissionRules,
)
from cairn.tools.registry import ToolRegistry, default_registry
from cairn.tools.scheduler import DECLINED_MESSAGE, SKIPPED_MESSAGE, ToolOutcome, ToolScheduler
from cairn.vocabulary.events import Notice, PlanUpdate, SessionEvent, ToolCallStart, ToolCallUpdate
from cairn.vocabulary.interaction import NonInteractive, PermissionOutcome

pytestmark = pytest.mark.timeout(60)


# ----- test doubles: a person at the front end, and a broken tool -----


def scripted_user(*answers: PermissionOutcome) -> ScriptedFrontend:
    """A person who answers these approvals, in order, and fails the test on any other."""
    return ScriptedFrontend(permissions=answers, default_permission=None)


class ExplodingTool:
    """A tool whose execute raises instead of returning a result."""

    name = "explode"
    description = "Always raises."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
    kind = ToolKind.OTHER

    def title(self, args: Mapping[str, Any]) -> str:
        return "Explode"

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        return None

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        return []

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        return None

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


# ----- helpers -----


class Run:
    """A scheduler over a real workspace, with the events it emitted."""

    def __init__(
        self,
        ctx: ToolContext,
        *,
        frontend: Any = None,
        mode: str = "default",
        rules: PermissionRules | None = None,
        hooks: HookRunner | None = None,
    ) -> None:
        self.ctx = ctx
        self.events: list[SessionEvent] = []
        self.mode = mode
        registry = ToolRegistry([*default_registry(), ExplodingTool()])
        self.scheduler = ToolScheduler(
            registry=registry,
            rules=rules or PermissionRules(),
            frontend=frontend or NonInteractive(),
            approval_mode=lambda: self.mode,
            hooks=hooks,
        )

    async def emit(self, event: SessionEvent) -> None:
        self.events.append(event)

    async def __call__(self, *calls: FunctionCall) -> list[ToolOutcome]:
        return await self.scheduler.run(list(calls), self.ctx, self.emit)

    async def one(self, call: FunctionCall) -> ToolOutcome:
        [outcome] = await self(call)
        return outcome

    def updates(self, call_id: str) -> list[str]:
        return [
            e.status for e in self.events if isinstance(e, ToolCallUpdate) and e.call_id == call_id
        ]


def write(path: str, content: str = "new text\n", call_id: str = "w1") -> FunctionCall:
    return FunctionCall(call_id, "write_file", {"file_path": path, "content": content})


def shell(command: str, call_id: str = "s1") -> FunctionCall:
    return FunctionCall(call_id, "run_shell_command", {"command": command})


def read(path: str, call_id: str = "r1") -> FunctionCall:
    return FunctionCall(call_id, "read_file", {"file_path": path})


def error_of(outcome: ToolOutcome) -> str:
    assert outcome.response.is_error, outcome.response
    return outcome.response.text


def hook_runner(tmp_path: Path, workspace: Path, body: str, matcher: str = "") -> HookRunner:
    """A HookRunner whose settings run one real bash PreToolUse hook with ``body``."""
    script = tmp_path / "hooks" / "pre_tool_use.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/usr/bin/env bash\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    settings = Settings.model_validate(
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": matcher,
                        "hooks": [{"type": "command", "command": shlex.quote(str(script))}],
                    }
                ]
            }
        }
    )
    return HookRunner(settings.hooks, cwd=workspace, session_id="session-1")


def decision_hook(decision: str, reason: str = "") -> str:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return f"cat > /dev/null\ncat <<'JSON'\n{json.dumps(output)}\nJSON"


# ----- validation -----


async def test_an_unknown_tool_fails_and_names_the_closest_tools(ctx: ToolContext) -> None:
    run = Run(ctx, mode="yolo")

    outcome = await run.one(FunctionCall("c1", "reed_file", {"file_path": "a.txt"}))

    assert outcome.status == "failed"
    message = error_of(outcome)
    assert message.startswith('Tool "reed_file" not found in registry.')
    assert 'Did you mean "read_file"?' in message
    start = run.events[0]
    assert isinstance(start, ToolCallStart) and start.kind is ToolKind.OTHER
    assert run.updates("c1") == ["failed"]


async def test_invalid_json_arguments_fail_without_running(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, mode="yolo")
    call = FunctionCall("c1", "write_file", {INVALID_ARGUMENTS_KEY: '{"file_path": "a.txt", '})

    outcome = await run.one(call)

    assert outcome.status == "failed"
    assert error_of(outcome) == (
        'The arguments of write_file were not a valid JSON object: {"file_path": "a.txt", . '
        "Call it again with valid JSON."
    )
    assert list(workspace.iterdir()) == []


# ----- rules and approval modes -----


async def test_a_deny_rule_refuses_even_in_yolo_mode(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "keep.txt").write_text("precious")
    rules = PermissionRules.parse(deny=["Bash(rm *)"])
    run = Run(ctx, mode="yolo", rules=rules)

    outcome = await run.one(shell("rm keep.txt"))

    assert outcome.status == "failed"
    assert error_of(outcome) == (
        "Permission denied: this run_shell_command call matches the permissions.deny rule "
        '"Bash(rm *)".'
    )
    assert (workspace / "keep.txt").read_text() == "precious"


async def test_an_allow_rule_runs_without_asking(ctx: ToolContext, workspace: Path) -> None:
    user = scripted_user()
    run = Run(ctx, frontend=user, rules=PermissionRules.parse(allow=["Write(notes/*)"]))

    outcome = await run.one(write("notes/today.md"))

    assert outcome.status == "completed"
    assert user.permission_requests == []
    assert (workspace / "notes" / "today.md").read_text() == "new text\n"


async def test_plan_mode_refuses_an_edit_with_the_plan_mode_message(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, frontend=scripted_user(), mode="plan")

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "failed"
    assert error_of(outcome) == PLAN_MODE_MESSAGE
    assert not (workspace / "a.txt").exists()


async def test_plan_mode_still_runs_reads(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    run = Run(ctx, mode="plan")

    outcome = await run.one(read("a.txt"))

    assert outcome.status == "completed"
    assert "hello" in outcome.response.text


async def test_non_interactive_default_mode_refuses_an_edit(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, mode="default")

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "failed"
    assert error_of(outcome) == NON_INTERACTIVE_MESSAGE
    assert "requires permission" in error_of(outcome)
    assert not (workspace / "a.txt").exists()


async def test_auto_edit_runs_edits_without_asking(ctx: ToolContext, workspace: Path) -> None:
    user = scripted_user()
    run = Run(ctx, frontend=user, mode="auto-edit")

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "completed"
    assert user.permission_requests == []
    assert (workspace / "a.txt").exists()


# ----- asking the user -----


async def test_interactive_mode_asks_and_allow_once_runs_the_call(
    ctx: ToolContext, workspace: Path
) -> None:
    user = scripted_user("allow_once")
    run = Run(ctx, frontend=user)

    outcome = await run.one(write("a.txt", "hello\n"))

    assert outcome.status == "completed"
    assert (workspace / "a.txt").read_text() == "hello\n"
    [request] = user.permission_requests
    assert (request.call_id, request.tool_name, request.title) == (
        "w1",
        "write_file",
        "Write a.txt",
    )
    assert request.kind is ToolKind.EDIT
    assert request.confirmation == "edit"
    assert request.diff == FileDiff(workspace.resolve() / "a.txt", None, "hello\n")


async def test_allow_once_is_not_remembered(ctx: ToolContext, workspace: Path) -> None:
    user = scripted_user("allow_once", "allow_once")
    run = Run(ctx, frontend=user)

    await run.one(write("a.txt", call_id="w1"))
    await run.one(write("b.txt", call_id="w2"))

    assert [r.call_id for r in user.permission_requests] == ["w1", "w2"]


async def test_allow_always_remembers_the_tool(ctx: ToolContext, workspace: Path) -> None:
    user = scripted_user("allow_always")
    run = Run(ctx, frontend=user)

    await run.one(write("a.txt", call_id="w1"))
    later = await run.one(write("b.txt", call_id="w2"))

    assert later.status == "completed"
    assert [r.call_id for r in user.permission_requests] == ["w1"]
    assert (workspace / "b.txt").exists()


async def test_allow_always_for_a_shell_command_remembers_each_of_its_programs(
    ctx: ToolContext, workspace: Path
) -> None:
    user = scripted_user("allow_always", "reject")
    run = Run(ctx, frontend=user)

    first = await run.one(shell("touch a.txt && mkdir made", "s1"))
    same_programs = await run.one(shell("touch b.txt", "s2"))
    new_program = await run.one(shell("touch c.txt && rm a.txt", "s3"))

    assert (first.status, same_programs.status, new_program.status) == (
        "completed",
        "completed",
        "rejected",
    )
    assert [r.call_id for r in user.permission_requests] == ["s1", "s3"]
    # Issue #30: the approval names what "allow always" would allow.
    assert [r.programs for r in user.permission_requests] == [("touch", "mkdir"), ("touch", "rm")]
    assert (workspace / "made").is_dir()
    assert (workspace / "b.txt").exists()
    assert (workspace / "a.txt").exists()  # the rm was declined
    assert not (workspace / "c.txt").exists()


async def test_reject_ends_the_batch_and_later_calls_are_skipped(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "c.txt").write_text("c")
    user = scripted_user("reject")
    run = Run(ctx, frontend=user)

    outcomes = await run(write("a.txt", call_id="w1"), write("b.txt", call_id="w2"), read("c.txt"))

    assert [o.status for o in outcomes] == ["rejected", "skipped", "skipped"]
    assert [o.response.response for o in outcomes] == [
        {"error": DECLINED_MESSAGE},
        {"error": SKIPPED_MESSAGE},
        {"error": SKIPPED_MESSAGE},
    ]
    assert [r.call_id for r in user.permission_requests] == ["w1"]
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    assert run.updates("w1") == ["cancelled"]
    assert run.updates("w2") == ["cancelled"]
    assert run.updates("r1") == ["cancelled"]


async def test_a_cancelled_permission_request_counts_as_declined(
    ctx: ToolContext, workspace: Path
) -> None:
    run = Run(ctx, frontend=scripted_user("cancelled"))

    outcomes = await run(write("a.txt", call_id="w1"), write("b.txt", call_id="w2"))

    assert [o.status for o in outcomes] == ["rejected", "skipped"]
    assert list(workspace.iterdir()) == []


# ----- PreToolUse hooks -----


async def test_a_hook_that_denies_refuses_the_call(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, decision_hook("deny", "no writes on Fridays"))
    run = Run(ctx, mode="yolo", hooks=hooks)

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "failed"
    assert error_of(outcome) == "Blocked by a PreToolUse hook: no writes on Fridays"
    assert not (workspace / "a.txt").exists()


async def test_a_hook_that_exits_2_blocks_with_its_stderr(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, "cat > /dev/null\necho 'rm is banned' >&2\nexit 2")
    run = Run(ctx, mode="yolo", hooks=hooks)

    outcome = await run.one(shell("touch x"))

    assert error_of(outcome) == "Blocked by a PreToolUse hook: rm is banned"
    assert not (workspace / "x").exists()


async def test_a_hook_that_says_ask_forces_a_confirmation_in_auto_edit(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, decision_hook("ask", "check this one"))
    user = scripted_user("allow_once")
    run = Run(ctx, frontend=user, mode="auto-edit", hooks=hooks)

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "completed"
    assert [r.call_id for r in user.permission_requests] == ["w1"]
    assert (workspace / "a.txt").exists()


async def test_a_hook_that_says_ask_is_refused_where_nobody_can_answer(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, decision_hook("ask"))
    run = Run(ctx, mode="auto-edit", hooks=hooks)

    outcome = await run.one(write("a.txt"))

    assert error_of(outcome) == NON_INTERACTIVE_COMMAND_MESSAGE  # auto-edit is already on
    assert not (workspace / "a.txt").exists()


async def test_a_hook_that_says_allow_skips_the_confirmation(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, decision_hook("allow"))
    user = scripted_user()
    run = Run(ctx, frontend=user, mode="default", hooks=hooks)

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "completed"
    assert user.permission_requests == []
    assert (workspace / "a.txt").exists()


async def test_a_hook_that_says_allow_does_not_override_a_deny_rule(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    """Regression: a hook's "allow" ran the call before the permissions.deny rules were looked
    at, so an approve-everything hook silently disabled every deny rule (Claude Code evaluates
    deny rules whatever a hook returned)."""
    (workspace / "keep.txt").write_text("precious")
    hooks = hook_runner(tmp_path, workspace, decision_hook("allow"))
    rules = PermissionRules.parse(deny=["Bash(rm *)"])
    run = Run(ctx, frontend=scripted_user(), hooks=hooks, rules=rules)

    outcome = await run.one(shell("rm keep.txt"))

    assert outcome.status == "failed"
    assert 'permissions.deny rule "Bash(rm *)"' in error_of(outcome)
    assert (workspace / "keep.txt").read_text() == "precious"


async def test_the_hook_receives_the_call_and_the_approval_mode(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    received = tmp_path / "hook-input.json"
    hooks = hook_runner(tmp_path, workspace, f"cat > {shlex.quote(str(received))}")
    run = Run(ctx, mode="yolo", hooks=hooks)

    await run.one(write("a.txt", "x", call_id="w9"))

    data = json.loads(received.read_text())
    assert data["hook_event_name"] == "PreToolUse"
    assert data["tool_name"] == "Write"  # Claude Code's names (issue #30)
    assert data["tool_input"] == {"file_path": str(workspace / "a.txt"), "content": "x"}
    assert data["tool_use_id"] == "w9"
    assert data["permission_mode"] == "bypassPermissions"


async def test_a_pre_tool_use_hooks_context_follows_the_result_or_the_refusal(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    """Issue #30: Claude Code gives a PreToolUse hook's additionalContext to the model; cairn
    dropped it."""
    output = {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "prod <db>"}
    }
    body = f"cat > /dev/null\ncat <<'JSON'\n{json.dumps(output)}\nJSON"
    run = Run(ctx, mode="yolo", hooks=hook_runner(tmp_path, workspace, body))

    ran = await run.one(write("a.txt", "x"))

    assert ran.status == "completed"
    assert ran.response.text.endswith("<cairn:hook-context>prod &lt;db&gt;</cairn:hook-context>")
    denied_with = {**output["hookSpecificOutput"], "permissionDecision": "deny"}
    body = f"cat > /dev/null\ncat <<'JSON'\n{json.dumps({'hookSpecificOutput': denied_with})}\nJSON"
    run = Run(ctx, mode="yolo", hooks=hook_runner(tmp_path, workspace, body))
    refused = await run.one(write("b.txt", "x"))
    assert "<cairn:hook-context>prod &lt;db&gt;</cairn:hook-context>" in error_of(refused)


async def test_a_hook_for_other_tools_leaves_the_call_alone(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    hooks = hook_runner(tmp_path, workspace, decision_hook("deny", "no"), matcher="^edit$")
    run = Run(ctx, mode="yolo", hooks=hooks)

    outcome = await run.one(write("a.txt"))

    assert outcome.status == "completed"


# ----- running -----


async def test_a_tool_that_raises_becomes_a_failed_response(ctx: ToolContext) -> None:
    run = Run(ctx)

    outcome = await run.one(FunctionCall("x1", "explode", {}))

    assert outcome.status == "failed"
    assert error_of(outcome) == "explode failed unexpectedly: disk on fire"
    assert run.updates("x1") == ["in_progress", "failed"]


async def test_a_todo_write_result_emits_a_plan_update(ctx: ToolContext) -> None:
    run = Run(ctx)
    todos = [
        {"id": "1", "content": "write tests", "status": "in_progress"},
        {"id": "2", "content": "fix bugs", "status": "pending"},
    ]

    outcome = await run.one(FunctionCall("t1", "todo_write", {"todos": todos}))

    assert outcome.status == "completed"
    plans = [e for e in run.events if isinstance(e, PlanUpdate)]
    assert plans == [
        PlanUpdate(
            (
                TodoItem("1", "write tests", "in_progress"),
                TodoItem("2", "fix bugs", "pending"),
            )
        )
    ]
    assert run.events[-1] == plans[0]


async def test_events_are_start_then_in_progress_then_the_final_status(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    run = Run(ctx)

    await run(read("a.txt", "r1"), read("missing.txt", "r2"))

    summary = [
        (type(e).__name__, e.call_id, getattr(e, "status", None))
        for e in run.events
        if isinstance(e, ToolCallStart | ToolCallUpdate)
    ]
    assert summary == [
        ("ToolCallStart", "r1", None),
        ("ToolCallUpdate", "r1", "in_progress"),
        ("ToolCallUpdate", "r1", "completed"),
        ("ToolCallStart", "r2", None),
        ("ToolCallUpdate", "r2", "in_progress"),
        ("ToolCallUpdate", "r2", "failed"),
    ]
    start = run.events[0]
    assert isinstance(start, ToolCallStart)
    assert (start.name, start.title, start.kind) == ("read_file", "Read a.txt", ToolKind.READ)
    assert start.locations == (Location(workspace.resolve() / "a.txt"),)
    final = run.events[2]
    assert (
        isinstance(final, ToolCallUpdate) and final.output is not None and "hello" in final.output
    )


async def test_a_hook_system_message_reaches_the_user_as_a_notice(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    body = 'echo \'{"systemMessage": "Reading files is logged for the audit."}\''
    run = Run(
        ctx, frontend=scripted_user(), mode="default", hooks=hook_runner(tmp_path, workspace, body)
    )

    await run.one(read("a.txt"))

    notices = [e for e in run.events if isinstance(e, Notice)]
    assert [(n.level, n.text, n.source) for n in notices] == [
        ("info", "Reading files is logged for the audit.", "hook")
    ]


# ----- which refusals are denials (front ends report them: -p's permission_denials) -----


def denied(run: Run) -> dict[str, bool]:
    return {
        e.call_id: e.denied
        for e in run.events
        if isinstance(e, ToolCallUpdate) and e.status in ("failed", "cancelled")
    }


async def test_every_refusal_by_the_permission_system_is_marked_denied(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    rules = PermissionRules.parse(deny=["Bash(rm *)"])
    by_rule = Run(ctx, mode="yolo", rules=rules)
    await by_rule.one(shell("rm -rf build"))
    by_plan = Run(ctx, mode="plan")
    await by_plan.one(write("a.txt"))
    nobody_to_ask = Run(ctx)
    await nobody_to_ask.one(write("a.txt"))
    by_user = Run(ctx, frontend=scripted_user("reject"))
    await by_user(write("a.txt", call_id="w1"), write("b.txt", call_id="w2"))
    hooks = hook_runner(tmp_path, workspace, decision_hook("deny", "not today"))
    by_hook = Run(ctx, mode="yolo", hooks=hooks)
    await by_hook.one(write("a.txt"))

    assert denied(by_rule) == {"s1": True}
    assert denied(by_plan) == {"w1": True}
    assert denied(nobody_to_ask) == {"w1": True}
    assert denied(by_user) == {"w1": True, "w2": False}  # the second was skipped, not refused
    assert denied(by_hook) == {"w1": True}


async def test_a_call_that_fails_by_itself_is_not_denied(ctx: ToolContext) -> None:
    run = Run(ctx)

    await run(read("missing.txt"), FunctionCall("x1", "explode", {}))

    assert denied(run) == {"r1": False, "x1": False}


@pytest.mark.parametrize(
    "call",
    [
        FunctionCall("n1", "read_file", {"file_path": "a\x00b"}),
        FunctionCall("n1", "write_file", {"file_path": ".cairn/\x00", "content": "x"}),
        FunctionCall("n1", "grep_search", {"pattern": "x", "path": "\x00"}),
        FunctionCall("n1", "run_shell_command", {"command": "echo x > a\x00b"}),
        FunctionCall("n1", "run_shell_command", {"command": "cat <\x00"}),
    ],
)
async def test_a_nul_byte_in_an_argument_fails_the_call_not_the_turn(
    ctx: ToolContext, call: FunctionCall
) -> None:
    """A NUL byte cannot be in a path or a command line (the OS refuses it); it must end that
    call with an error, never raise out of the permission checks."""
    rules = PermissionRules.parse(deny=["Read(secret/**)", "Edit(*.lock)", "Bash(rm*)"])
    run = Run(ctx, mode="yolo", rules=rules)

    outcome = await run.one(call)

    assert outcome.status == "failed"
    assert "NUL" in error_of(outcome) or "null byte" in error_of(outcome)


class BrokenCheckTool(ExplodingTool):
    """A tool whose own confirmation check raises (a plugin tool with a bug)."""

    name = "broken_check"

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        raise RuntimeError("check on fire")


async def test_a_permission_check_that_raises_refuses_the_call_and_the_batch_goes_on(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    run = Run(ctx, mode="yolo")
    run.scheduler.registry.register(BrokenCheckTool())

    broken, after = await run(FunctionCall("b1", "broken_check", {}), read("a.txt", "r2"))

    assert broken.status == "failed"
    assert "permission check of this broken_check call failed" in error_of(broken)
    assert "check on fire" in error_of(broken)
    assert after.status == "completed"
