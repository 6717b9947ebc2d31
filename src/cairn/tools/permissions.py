"""Permission rules (``permissions.allow/ask/deny``) and the approval decision for one call.

A rule is ``ToolName`` or ``ToolName(specifier)``; tool names may be written as Claude Code spells
them (``Bash``, ``Read``, ``Edit`` ...; :mod:`cairn.vocabulary.tool_names`). For
``run_shell_command`` the specifier is a glob on the command (``Bash(git *)``); for the file
tools it is a glob on the path relative to the workspace (``Read(src/**)``, ``Edit(*.md)``).
Priority is deny > ask > allow.

Path rules work by access, as in Claude Code: a ``Read(...)`` rule covers every tool that reads
files (``read_file``, ``grep_search``, ``glob``, ``list_directory``), and deny rules are checked
again on every file those tools come across (:meth:`PermissionRules.path_denial`); an
``Edit(...)`` or ``Write(...)`` rule covers both ``edit`` and ``write_file``.

Shell deny and ask rules are matched against every command the line runs after resolving
spellings and wrappers (:mod:`cairn.tools.shell_resolve`): ``Bash(rm *)`` also stops ``/bin/rm``,
``"rm"``, ``sudo rm``, ``bash -c "rm ..."``, ``xargs rm``, ``find -delete`` and ``unlink``. A
command line whose programs cannot all be known before it runs (``$CMD args``, ``eval "$X"``)
needs the user's approval whenever a shell deny or ask rule exists, in every approval mode.

The approval decision then combines the matched rule with the tool's own confirmation need and
the approval mode, following the reference scheduler's order (§9.3 of the agent-core notes).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import urlsplit

from cairn.tools._walk import GlobPattern
from cairn.values import Value
from cairn.vocabulary.tool_names import TOOL_ALIASES, ToolName, canonical_tool_name

if TYPE_CHECKING:  # pydantic stays off the import path of the tools
    from cairn.config.settings import ApprovalMode, PermissionsSettings
    from cairn.tools.base import Access, ConfirmationKind
    from cairn.tools.shell_readonly import ShellScope

__all__ = [
    "NON_INTERACTIVE_COMMAND_MESSAGE",
    "NON_INTERACTIVE_MESSAGE",
    "PLAN_MODE_MESSAGE",
    "SETTINGS_MESSAGE",
    "TOOL_ALIASES",
    "UNRESOLVED_MESSAGE",
    "ApprovalDecision",
    "PermissionRule",
    "PermissionRules",
    "RuleDecision",
    "RuleMatch",
    "Strictness",
    "canonical_tool_name",
    "decide_approval",
]

RuleDecision: TypeAlias = Literal["allow", "ask", "deny"]

# How strictly a call must be confirmed: "settings" (it changes cairn's own configuration:
# asked in every mode but yolo, never covered by rules or "allow always") or "unresolved" (a
# command that a shell deny rule cannot see through: asked in every mode, yolo included).
Strictness: TypeAlias = Literal["settings", "unresolved"]
_MCP_PREFIX = "mcp__"
# The argument a path rule is matched against, per tool; None means "the workspace".
_PATH_ARGUMENTS: Mapping[str, str] = {
    ToolName.READ_FILE: "file_path",
    ToolName.WRITE_FILE: "file_path",
    ToolName.EDIT: "file_path",
    ToolName.LIST_DIRECTORY: "path",
    ToolName.GLOB: "path",
    ToolName.GREP: "path",
}
_FOLDER_TOOLS = frozenset({ToolName.LIST_DIRECTORY, ToolName.GLOB, ToolName.GREP})
# The tools a path rule on each tool covers: reading rules cover every reading tool, writing
# rules both writing tools.
_READ_TOOLS = frozenset({ToolName.READ_FILE, *_FOLDER_TOOLS})
_WRITE_TOOLS = frozenset({ToolName.EDIT, ToolName.WRITE_FILE})
_COVERED_TOOLS: Mapping[str, frozenset[str]] = {
    ToolName.READ_FILE: _READ_TOOLS,
    ToolName.EDIT: _WRITE_TOOLS,
    ToolName.WRITE_FILE: _WRITE_TOOLS,
}
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
# Commands and MCP calls: auto-edit asks before them too, so only yolo or a rule lets them run.
NON_INTERACTIVE_COMMAND_MESSAGE = (
    "This tool call requires permission, but non-interactive mode cannot ask. "
    "Re-run with --yolo, or add a permissions.allow rule for it."
)
UNRESOLVED_MESSAGE = (
    "Permission needed: this command runs something that is only known when it runs ({reason}), "
    'so the permissions.deny rule "{rule}" cannot be checked against it. Write the command out '
    "in full instead."
)
SETTINGS_MESSAGE = (
    "Permission denied: this call would change cairn's own configuration ({what}), which needs "
    "the user's explicit approval in an interactive session (or --approval-mode yolo)."
)
# Confirmation kinds auto-edit approves by itself.
_AUTO_EDIT_KINDS: frozenset[str] = frozenset({"edit"})


class PermissionRule(Value):
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
        canonical = canonical_tool_name(tool_name)
        if self.tool.startswith(_MCP_PREFIX) and canonical.startswith(_MCP_PREFIX):
            # mcp__server (every tool of the server), mcp__server__* and mcp__server__tool
            if self.tool.endswith("*"):
                return canonical.startswith(self.tool[:-1])
            return canonical == self.tool or canonical.startswith(self.tool + "__")
        return self.tool == canonical or canonical in _COVERED_TOOLS.get(self.tool, ())

    def matches(self, tool_name: str, args: Mapping[str, Any], workspace: Path) -> bool:
        """True when this rule covers the call: any command a shell line runs counts."""
        if not self.applies_to(tool_name):
            return False
        if self.specifier is None or self.specifier == "*":
            return True
        canonical = canonical_tool_name(tool_name)
        if self.tool == ToolName.SHELL:
            command = args.get("command")
            return isinstance(command, str) and any(
                _command_matches(self.specifier, text) for text in _shell_texts(command)
            )
        if canonical in _PATH_ARGUMENTS:
            return _path_matches(self.specifier, canonical, args, workspace)
        if canonical == ToolName.WEB_FETCH:
            return _domain_matches(self.specifier, args.get("url"))
        return False

    def covers_path(self, path: Path, workspace: Path) -> bool:
        """True when this path rule covers the absolute, resolved ``path``."""
        if self.specifier is None or self.specifier == "*":
            return True
        return _absolute_matches(self.specifier, path, workspace, folder=False)

    def covers_command(self, command_text: str) -> bool:
        """True when this shell rule covers one simple command (for allow rules)."""
        if self.specifier is None or self.specifier == "*":
            return True
        return _command_matches(self.specifier, command_text)


class RuleMatch(Value):
    decision: RuleDecision
    rule: PermissionRule
    strict: Strictness | None = None
    reason: str = ""  # why a strict match needs approval
    read_only_parts: bool = False  # an allow that relied on parts being read-only


class PermissionRules(Value):
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

    def allowing(self, more: PermissionRules) -> PermissionRules:
        """These rules with ``more``'s allow rules added (a command file's ``allowed-tools``)."""
        return PermissionRules((*self.allow, *more.allow), self.ask, self.deny, self.warnings)

    def match(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        workspace: Path,
        *,
        scope: ShellScope | None = None,
    ) -> RuleMatch | None:
        """The deciding rule for this call (deny > ask > allow), or ``None``.

        ``scope`` is where a shell command runs and what it may read (for the read-only parts
        of a command an allow rule does not cover); default: the workspace.
        """
        ordered: tuple[tuple[RuleDecision, tuple[PermissionRule, ...]], ...] = (
            ("deny", self.deny),
            ("ask", self.ask),
        )
        for decision, rules in ordered:
            for rule in rules:
                if rule.matches(tool_name, args, workspace):
                    return RuleMatch(decision, rule)
        if canonical_tool_name(tool_name) == ToolName.SHELL:
            unresolved = self._unresolved_shell(args)
            if unresolved is not None:
                return unresolved
            return self._match_shell_allow(tool_name, args, scope or _workspace_scope(workspace))
        for rule in self.allow:
            if rule.matches(tool_name, args, workspace):
                return RuleMatch("allow", rule)
        return None

    def decide(
        self, tool_name: str, args: Mapping[str, Any], workspace: Path
    ) -> RuleDecision | None:
        found = self.match(tool_name, args, workspace)
        return None if found is None else found.decision

    def path_denial(self, path: Path, access: Access, workspace: Path, tool: str) -> str | None:
        """The deny rule covering ``path`` for ``access`` by ``tool``, as a sentence, or ``None``.

        Reading is covered by ``Read(...)`` rules and the tool's own rules; writing by ``Edit``
        and ``Write`` rules."""
        family = ToolName.READ_FILE if access == "read" else ToolName.EDIT
        tool = canonical_tool_name(tool) if tool else family
        for rule in self.deny:
            if not (rule.applies_to(family) or rule.tool == tool):
                continue
            if rule.tool == ToolName.SHELL or rule.tool not in (*_PATH_ARGUMENTS, tool):
                continue
            if rule.covers_path(path, workspace):
                return f'the permissions.deny rule "{rule.text}" covers this path'
        return None

    def _unresolved_shell(self, args: Mapping[str, Any]) -> RuleMatch | None:
        """A command a shell deny or ask rule cannot see through needs approval."""
        command = args.get("command")
        guards = [
            r
            for r in (*self.deny, *self.ask)
            if r.tool == ToolName.SHELL and r.specifier not in (None, "*")
        ]
        if not guards or not isinstance(command, str):
            return None
        from cairn.tools.shell_resolve import resolve  # ~6 ms to import: on first shell rule

        unresolved = resolve(command).unresolved
        if not unresolved:
            return None
        return RuleMatch("ask", guards[0], strict="unresolved", reason="; ".join(unresolved))

    def _match_shell_allow(
        self, tool_name: str, args: Mapping[str, Any], scope: ShellScope
    ) -> RuleMatch | None:
        """Allowed when every simple command (substitutions included) is covered by an allow
        rule or is read-only by itself; an unparseable command is never allowed by a pattern."""
        rules = [r for r in self.allow if r.applies_to(tool_name)]
        command = args.get("command")
        if not rules or not isinstance(command, str):
            return None
        bare = next((r for r in rules if r.specifier in (None, "*")), None)
        if bare is not None:
            return RuleMatch("allow", bare)
        from cairn.tools.shell_parse import split_commands  # ~6 ms to import: on use
        from cairn.tools.shell_readonly import is_read_only_command

        parts = split_commands(command)
        if not parts:
            return None
        used: PermissionRule | None = None
        read_only_parts = False
        for part in parts:
            covering = next((r for r in rules if r.covers_command(part.text)), None)
            if covering is None:
                if not is_read_only_command(part.text, scope):
                    return None
                read_only_parts = True
            used = used or covering
        if used is None:
            return None
        return RuleMatch("allow", used, read_only_parts=read_only_parts)


def _parse_list(kind: str, texts: Iterable[Any], warnings: list[str]) -> tuple[PermissionRule, ...]:
    rules: list[PermissionRule] = []
    for index, text in enumerate(texts):
        try:
            rules.append(PermissionRule.parse(text))
        except ValueError as exc:
            warnings.append(f"permissions.{kind}[{index}] {text!r}: {exc}; the rule is ignored")
    return tuple(rules)


def _workspace_scope(workspace: Path) -> ShellScope:
    from cairn.tools.shell_readonly import ShellScope

    return ShellScope.of(workspace)


def _shell_texts(command: str) -> list[str]:
    """Every text a deny/ask rule is tried against: the whole command; each simple command with
    and without its assignments and redirections, as written and with quotes removed; and every
    program it runs, wrappers and spellings resolved (``sudo /bin/rm -rf x`` -> ``rm -rf x``).
    Unparseable commands are also cut roughly at the list operators so that ``rm -rf x`` on a
    later line is still seen."""
    from cairn.tools.shell_resolve import resolve  # ~6 ms to import: on first shell rule

    texts = [command.strip()]
    line = resolve(command)
    if line.unresolved:
        texts += [p.strip() for p in _ROUGH_SHELL_SEPARATORS.split(command) if p.strip()]
    for part in line.commands:
        texts += [part.text, part.command_text, " ".join(w.value for w in part.words)]
    texts += [invocation.text for invocation in line.invocations]
    return texts


def _domain_matches(specifier: str, url: Any) -> bool:
    """``WebFetch(domain:docs.python.org)`` (Claude Code's form): the URL's host is that
    domain (``domain:*.python.org``: any host under it)."""
    if not specifier.startswith("domain:") or not isinstance(url, str):
        return False
    host = (urlsplit(url).hostname or "").lower()
    return bool(host) and fnmatch.fnmatchcase(host, specifier[len("domain:") :].strip().lower())


def _command_matches(specifier: str, command: str) -> bool:
    """``git *`` matches ``git`` and ``git status -s``; ``npm run test:*`` is a prefix rule.

    A rule naming its program by path (``/bin/rm *``) is matched by the program's name."""
    first, space, rest = specifier.partition(" ")
    if "/" in first and not first.endswith("/"):
        specifier = first.rsplit("/", 1)[1] + space + rest
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
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        return False  # the tool refuses such a path itself
    target = Path(os.path.expanduser(raw))  # ~nobody/x: unchanged, not an error
    absolute = (target if target.is_absolute() else workspace / target).resolve()
    return _absolute_matches(specifier, absolute, workspace, folder=tool in _FOLDER_TOOLS)


def _absolute_matches(specifier: str, absolute: Path, workspace: Path, *, folder: bool) -> bool:
    candidates = _path_candidates(specifier, absolute, workspace)
    if folder:  # "src/**" also covers a search of the folder src itself
        candidates += [c + "/" for c in candidates]
    pattern = specifier if not specifier.startswith("~/") else os.path.expanduser(specifier)
    glob = GlobPattern.compile(pattern, anywhere=not pattern.startswith("/"))
    return any(glob.matches(c) for c in candidates)


def _path_candidates(specifier: str, absolute: Path, workspace: Path) -> list[str]:
    if specifier.startswith(("/", "~/")):
        return [absolute.as_posix()]
    try:
        return [absolute.relative_to(workspace.resolve()).as_posix()]
    except ValueError:
        return []  # outside the workspace: only absolute patterns apply


class ApprovalDecision(Value):
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
    strict: Strictness | None = None,
    strict_reason: str = "",
) -> ApprovalDecision:
    """Combine the matched rule, the tool's confirmation need and the approval mode.

    deny rule > plan mode refuses MCP calls that may change things > strict confirmation (see
    :data:`Strictness`) > ask_user_question (its own interaction) > allow rule > no confirmation
    needed (unless an ask rule) > yolo > plan (refused) > auto-edit for edits > ask or refuse.
    """
    if rule == "deny":
        return ApprovalDecision("deny", _denied_by_rule(tool_name, rule_text))
    if approval_mode == "plan" and confirmation == "mcp":
        return ApprovalDecision("deny", PLAN_MODE_MESSAGE)  # no rule lets plan mode change things
    if strict is not None and not (strict == "settings" and approval_mode == "yolo"):
        if approval_mode == "plan":
            return ApprovalDecision("deny", PLAN_MODE_MESSAGE)
        if interactive:
            return ApprovalDecision("confirm")
        if strict == "settings":
            return ApprovalDecision("deny", SETTINGS_MESSAGE.format(what=strict_reason))
        return ApprovalDecision(
            "deny", UNRESOLVED_MESSAGE.format(reason=strict_reason, rule=rule_text or "")
        )
    if canonical_tool_name(tool_name) == ToolName.ASK_USER_QUESTION or rule == "allow":
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
    if confirmation in _AUTO_EDIT_KINDS:
        return ApprovalDecision("deny", NON_INTERACTIVE_MESSAGE)
    return ApprovalDecision("deny", NON_INTERACTIVE_COMMAND_MESSAGE)


def _denied_by_rule(tool_name: str, rule_text: str | None) -> str:
    if rule_text:
        return (
            f"Permission denied: this {tool_name} call matches the permissions.deny rule "
            f'"{rule_text}".'
        )
    return f"Permission denied: a permissions.deny rule in settings blocks this {tool_name} call."
