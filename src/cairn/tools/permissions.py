"""Permission rules (``permissions.allow/ask/deny``) and the approval decision for one call.

A rule is ``ToolName`` or ``ToolName(specifier)``. For ``run_shell_command`` the specifier is a
glob on the command (``Bash(git *)``); for the file tools it is a glob on the path relative to
the workspace (``Read(src/**)``, ``Edit(*.md)``). Priority is deny > ask > allow. The approval
decision then combines the matched rule with the tool's own confirmation need and the approval
mode, following the reference scheduler's order (§9.3 of the agent-core notes).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from cairn.tools._walk import GlobPattern

if TYPE_CHECKING:  # pydantic stays off the import path of the tools
    from cairn.config.settings import ApprovalMode, PermissionsSettings
    from cairn.tools.base import ConfirmationKind

__all__ = [
    "NON_INTERACTIVE_MESSAGE",
    "PLAN_MODE_MESSAGE",
    "TOOL_ALIASES",
    "ApprovalDecision",
    "PermissionRule",
    "PermissionRules",
    "RuleDecision",
    "RuleMatch",
    "canonical_tool_name",
    "decide_approval",
]

RuleDecision: TypeAlias = Literal["allow", "ask", "deny"]

# Rule names as people write them (and the reference's legacy names) -> registered tool names.
TOOL_ALIASES: Mapping[str, str] = {
    "Bash": "run_shell_command",
    "Shell": "run_shell_command",
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit",
    "Glob": "glob",
    "Grep": "grep_search",
    "LS": "list_directory",
    "replace": "edit",
    "search_file_content": "grep_search",
}
SHELL_TOOL = "run_shell_command"
_MCP_PREFIX = "mcp__"
ASK_USER_TOOL = "ask_user_question"
# The argument a path rule is matched against, per tool; None means "the workspace".
_PATH_ARGUMENTS: Mapping[str, str] = {
    "read_file": "file_path",
    "write_file": "file_path",
    "edit": "file_path",
    "list_directory": "path",
    "glob": "path",
    "grep_search": "path",
}
_FOLDER_TOOLS = frozenset({"list_directory", "glob", "grep_search"})
_RULE_SYNTAX = re.compile(
    r"\s*(?P<tool>[A-Za-z_][\w.\-]*\*?)\s*(?:\((?P<spec>.*)\))?\s*", re.DOTALL
)
_ROUGH_SHELL_SEPARATORS = re.compile(r"&&|\|\||[;|&\n]")

PLAN_MODE_MESSAGE = (
    "Plan mode is active: this call would change files or run commands. Present your plan instead."
)
NON_INTERACTIVE_MESSAGE = (
    "This tool call requires permission, but non-interactive mode cannot ask. "
    "Re-run with --approval-mode auto-edit or yolo, or add a permissions.allow rule."
)
# Confirmation kinds auto-edit approves by itself.
_AUTO_EDIT_KINDS: frozenset[str] = frozenset({"edit"})


def canonical_tool_name(name: str) -> str:
    """The registered name for ``name`` (``Bash`` -> ``run_shell_command``)."""
    return TOOL_ALIASES.get(name, name)


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One parsed rule; ``text`` is the rule as written in settings."""

    text: str
    tool: str
    specifier: str | None = None

    @classmethod
    def parse(cls, text: str) -> PermissionRule:
        """Raises ``ValueError`` with the reason when ``text`` is not a rule."""
        if not isinstance(text, str):
            raise ValueError("a rule must be a string")
        match = _RULE_SYNTAX.fullmatch(text)
        if match is None:
            raise ValueError('expected "ToolName" or "ToolName(specifier)"')
        spec = match.group("spec")
        if spec is not None:
            spec = spec.strip()
            if not spec:
                raise ValueError("the specifier in parentheses is empty")
        return cls(text, canonical_tool_name(match.group("tool")), spec)

    def applies_to(self, tool_name: str) -> bool:
        name = canonical_tool_name(tool_name)
        if self.tool.startswith(_MCP_PREFIX) and name.startswith(_MCP_PREFIX):
            # mcp__server (every tool of the server), mcp__server__* and mcp__server__tool
            if self.tool.endswith("*"):
                return name.startswith(self.tool[:-1])
            return name == self.tool or name.startswith(self.tool + "__")
        return self.tool == name

    def matches(self, tool_name: str, args: Mapping[str, Any], workspace: Path) -> bool:
        """True when this rule covers the call: any part of a compound shell command counts."""
        if not self.applies_to(tool_name):
            return False
        if self.specifier is None or self.specifier == "*":
            return True
        if self.tool == SHELL_TOOL:
            command = args.get("command")
            return isinstance(command, str) and any(
                _command_matches(self.specifier, text) for text in _shell_texts(command)
            )
        if self.tool in _PATH_ARGUMENTS:
            return _path_matches(self.specifier, self.tool, args, workspace)
        return False

    def covers_command(self, command_text: str) -> bool:
        """True when this shell rule covers one simple command (for allow rules)."""
        if self.specifier is None or self.specifier == "*":
            return True
        return _command_matches(self.specifier, command_text)


@dataclass(frozen=True, slots=True)
class RuleMatch:
    decision: RuleDecision
    rule: PermissionRule


@dataclass(frozen=True)
class PermissionRules:
    """The ``permissions`` section, parsed. Malformed rules are dropped with a warning."""

    allow: tuple[PermissionRule, ...] = ()
    ask: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: PermissionsSettings) -> PermissionRules:
        return cls.parse(allow=settings.allow, ask=settings.ask, deny=settings.deny)

    @classmethod
    def parse(
        cls,
        *,
        allow: Iterable[Any] = (),
        ask: Iterable[Any] = (),
        deny: Iterable[Any] = (),
    ) -> PermissionRules:
        warnings: list[str] = []
        parsed = {
            kind: _parse_list(kind, texts, warnings)
            for kind, texts in (("allow", allow), ("ask", ask), ("deny", deny))
        }
        return cls(parsed["allow"], parsed["ask"], parsed["deny"], tuple(warnings))

    def match(self, tool_name: str, args: Mapping[str, Any], workspace: Path) -> RuleMatch | None:
        """The deciding rule for this call (deny > ask > allow), or ``None``."""
        ordered: tuple[tuple[RuleDecision, tuple[PermissionRule, ...]], ...] = (
            ("deny", self.deny),
            ("ask", self.ask),
        )
        for decision, rules in ordered:
            for rule in rules:
                if rule.matches(tool_name, args, workspace):
                    return RuleMatch(decision, rule)
        if canonical_tool_name(tool_name) == SHELL_TOOL:
            return self._match_shell_allow(tool_name, args)
        for rule in self.allow:
            if rule.matches(tool_name, args, workspace):
                return RuleMatch("allow", rule)
        return None

    def decide(
        self, tool_name: str, args: Mapping[str, Any], workspace: Path
    ) -> RuleDecision | None:
        found = self.match(tool_name, args, workspace)
        return None if found is None else found.decision

    def _match_shell_allow(self, tool_name: str, args: Mapping[str, Any]) -> RuleMatch | None:
        """Allowed when every simple command (substitutions included) is covered by an allow
        rule or is read-only by itself; an unparseable command is never allowed by a pattern."""
        rules = [r for r in self.allow if r.applies_to(tool_name)]
        command = args.get("command")
        if not rules or not isinstance(command, str):
            return None
        bare = next((r for r in rules if r.specifier in (None, "*")), None)
        if bare is not None:
            return RuleMatch("allow", bare)
        from cairn.tools.shell_parse import is_read_only_command, split_commands  # ~6 ms: on use

        parts = split_commands(command)
        if not parts:
            return None
        used: PermissionRule | None = None
        for part in parts:
            covering = next((r for r in rules if r.covers_command(part.text)), None)
            if covering is None and not is_read_only_command(part.text):
                return None
            used = used or covering
        return None if used is None else RuleMatch("allow", used)


def _parse_list(kind: str, texts: Iterable[Any], warnings: list[str]) -> tuple[PermissionRule, ...]:
    rules: list[PermissionRule] = []
    for index, text in enumerate(texts):
        try:
            rules.append(PermissionRule.parse(text))
        except ValueError as exc:
            warnings.append(f"permissions.{kind}[{index}] {text!r}: {exc}; the rule is ignored")
    return tuple(rules)


def _shell_texts(command: str) -> list[str]:
    """Every text a deny/ask rule is tried against: each simple command with and without its
    assignments and redirections, and the whole command. Unparseable commands are cut roughly
    at the list operators so that ``rm -rf x`` on a later line is still seen."""
    from cairn.tools.shell_parse import split_commands  # ~6 ms to import: on first shell rule

    texts = [command.strip()]
    parts = split_commands(command)
    if parts is None:
        texts += [p.strip() for p in _ROUGH_SHELL_SEPARATORS.split(command) if p.strip()]
    else:
        for part in parts:
            texts += [part.text, part.command_text]
    return texts


def _command_matches(specifier: str, command: str) -> bool:
    """``git *`` matches ``git`` and ``git status -s``; ``npm run test:*`` is a prefix rule."""
    if specifier.endswith(":*"):
        prefix = specifier[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if specifier.endswith(" *") and command == specifier[:-2]:
        return True
    return fnmatch.fnmatchcase(command, specifier)


def _path_matches(specifier: str, tool: str, args: Mapping[str, Any], workspace: Path) -> bool:
    raw = args.get(_PATH_ARGUMENTS[tool])
    if raw is None and tool in _FOLDER_TOOLS:
        raw = "."
    if not isinstance(raw, str) or not raw.strip():
        return False
    target = Path(raw).expanduser()
    absolute = (target if target.is_absolute() else workspace / target).resolve()
    candidates = _path_candidates(specifier, absolute, workspace)
    if tool in _FOLDER_TOOLS:  # "src/**" also covers a search of the folder src itself
        candidates += [c + "/" for c in candidates]
    pattern = specifier if not specifier.startswith("~/") else str(Path(specifier).expanduser())
    glob = GlobPattern.compile(pattern, anywhere=not pattern.startswith("/"))
    return any(glob.matches(c) for c in candidates)


def _path_candidates(specifier: str, absolute: Path, workspace: Path) -> list[str]:
    if specifier.startswith(("/", "~/")):
        return [absolute.as_posix()]
    try:
        return [absolute.relative_to(workspace.resolve()).as_posix()]
    except ValueError:
        return []  # outside the workspace: only absolute patterns apply


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What the scheduler does with a call; ``message`` is what the model sees when denied."""

    action: Literal["run", "confirm", "deny"]
    message: str = ""


_RUN = ApprovalDecision("run")


def decide_approval(
    *,
    rule: RuleDecision | None,
    confirmation: ConfirmationKind | None,
    approval_mode: ApprovalMode,
    interactive: bool,
    tool_name: str,
    rule_text: str | None = None,
) -> ApprovalDecision:
    """Combine the matched rule, the tool's confirmation need and the approval mode.

    deny rule > plan mode refuses MCP calls that may change things > ask_user_question (its own
    interaction) > allow rule > no confirmation needed
    (unless an ask rule) > yolo > plan (refused) > auto-edit for edits > ask or refuse.
    """
    if rule == "deny":
        return ApprovalDecision("deny", _denied_by_rule(tool_name, rule_text))
    if approval_mode == "plan" and confirmation == "mcp":
        return ApprovalDecision("deny", PLAN_MODE_MESSAGE)  # no rule lets plan mode change things
    if canonical_tool_name(tool_name) == ASK_USER_TOOL or rule == "allow":
        return _RUN
    if confirmation is None and rule != "ask":
        return _RUN
    if approval_mode == "yolo":
        return _RUN
    if approval_mode == "plan":
        return ApprovalDecision("deny", PLAN_MODE_MESSAGE)
    if approval_mode == "auto-edit" and confirmation in _AUTO_EDIT_KINDS:
        return _RUN
    if interactive:
        return ApprovalDecision("confirm")
    return ApprovalDecision("deny", NON_INTERACTIVE_MESSAGE)


def _denied_by_rule(tool_name: str, rule_text: str | None) -> str:
    if rule_text:
        return (
            f"Permission denied: this {tool_name} call matches the permissions.deny rule "
            f'"{rule_text}".'
        )
    return f"Permission denied: a permissions.deny rule in settings blocks this {tool_name} call."
