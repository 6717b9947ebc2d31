"""Commands, skills and agents from files, in a session: every front end gets them here.

- Command files become slash commands (``/git:commit``) in the session's command list, so the
  terminal UI completes them, ACP sends them in ``available_commands_update`` and the daemon
  lists them. Running one fills in its arguments, runs its shell steps through the tool
  scheduler (the shell tool's permission rules, hooks and approval dialog, shown as tool calls)
  and sends the prompt with the files its ``@path`` mentions attach.
- Skills: their names and descriptions go into the system prompt; the ``skill`` tool and
  ``/name`` load one; ``/skills`` lists them. A loaded skill's folder becomes readable to the
  file tools, so the model can read the files the skill names.
- ``/agents`` lists the subagents the ``agent`` tool can run.

Before each prompt the files are checked for changes: an added or edited command works at once.
A file that cannot be used is reported once, as a warning naming it. A file's command never
replaces a built-in one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cairn.content import FunctionCall, Part, Text
from cairn.debug_log import get_logger
from cairn.ids import random_hex
from cairn.session.commands import COMMANDS, CommandOutcome, SlashCommand
from cairn.session.turn_hooks import TurnHook
from cairn.tools.base import ToolContext, ToolResult
from cairn.vocabulary.events import EventSink, Notice
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.abort import AbortSignal
    from cairn.agent.client import AgentClient
    from cairn.agent.prompt import SystemPrompt
    from cairn.config.settings import Settings
    from cairn.extensions.agent_definition import AgentDefinition
    from cairn.extensions.catalog import Catalog, CatalogState
    from cairn.extensions.commands import CommandFile
    from cairn.extensions.skills import Skill
    from cairn.extensions.templates import Expansion
    from cairn.hooks.runner import HookRunner
    from cairn.llm.types import Provider
    from cairn.session.attachments import Attachments
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest, Session
    from cairn.session.turn import Carryover
    from cairn.tools.permissions import PermissionRules
    from cairn.tools.registry import ToolRegistry
    from cairn.tools.scheduler import ToolScheduler
    from cairn.vocabulary.events import TurnResult

    class ExtendedSession(Protocol):
        """What the command, skill and agent files use of their session."""

        id: str
        cwd: Path
        runtime: Runtime
        settings: Settings
        registry: ToolRegistry  # the skill, agent and web tools join it
        scheduler: ToolScheduler  # runs a file's shell steps; grants its allowed-tools
        client: AgentClient
        system_prompt: SystemPrompt
        carry: Carryover  # warnings about files, shown when the next turn starts
        approval_mode: str

        @property
        def hooks(self) -> HookRunner: ...

        def offer_commands(self, source: str, commands: Sequence[SlashCommand]) -> None: ...

        async def set_commands(self, source: str, commands: Sequence[SlashCommand]) -> None: ...

        def refresh_system_prompt(self) -> None: ...

        def tool_context(self, abort: AbortSignal | None = None) -> ToolContext: ...

        async def attach_text(self, text: str) -> Attachments: ...


__all__ = ["COMMANDS_SOURCE", "SessionExtensions"]

COMMANDS_SOURCE = "extensions"  # the name this module offers its commands under
_EXIT_CODE = re.compile(r"\n\nExit code: (.+)\Z")
_log = get_logger("EXTENSIONS")


class SessionExtensions(TurnHook):
    """One session's view of its project's command, skill and agent files."""

    def __init__(self, session: ExtendedSession) -> None:
        self.session = session
        self.catalog: Catalog = session.runtime.extensions()
        self.readable_roots: list[Path] = []  # folders of the skills loaded in this session
        self._generation = -1

    # ----- keeping up with the files -----

    @property
    def state(self) -> CatalogState:
        return self.catalog.state

    def load(self) -> None:
        """Read the files now (a session being built: no one is listening yet)."""
        try:
            self.catalog.refresh()
        except Exception as exc:  # files of the user's are never a reason for a session to fail
            _log.warning(f"reading command, skill and agent files failed: {exc!r}")
        self._generation = self.catalog.generation
        self.session.offer_commands(COMMANDS_SOURCE, self.commands())
        self._sync_skill_tool()
        from cairn.tools.web_fetch import WebFetchTool

        self.session.registry.register(
            WebFetchTool(
                self.session.runtime.provider,
                allow_private=self.session.settings.tools.web_fetch.allow_private_addresses,
                session_id=self.session.id,
            )
        )
        self._register_web_search()
        if self.session.settings.agents.enabled:
            from cairn.extensions.subagents import Subagents
            from cairn.tools.agent import AgentTool

            self.session.registry.register(AgentTool(Subagents(self)))

    def _register_web_search(self) -> None:
        """``web_search`` when a provider is configured; a provider without its key is a
        warning, never a failed session."""
        settings = self.session.settings.tools.web_search
        if settings.provider is None:
            return  # no provider, no tool: its module stays unimported
        from cairn.tools.web_search import web_search_tool

        try:
            tool = web_search_tool(settings)
        except ValueError as exc:
            _log.warning(f"no web_search tool: {exc}")
            self.session.carry.add_notice(Notice("warning", str(exc), "extensions"))
            return
        if tool is not None:
            self.session.registry.register(tool)

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        try:
            await asyncio.to_thread(self.catalog.refresh)
        except Exception as exc:
            _log.warning(f"reading command, skill and agent files failed: {exc!r}")
        if self.catalog.generation != self._generation:
            self._generation = self.catalog.generation
            self._sync_skill_tool()
            session.refresh_system_prompt()
            await session.set_commands(COMMANDS_SOURCE, self.commands())
        for warning in self.catalog.take_warnings():
            session.carry.add_notice(Notice("warning", warning, "extensions"))

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        self.end_grant()

    # ----- what the session offers -----

    def commands(self) -> list[SlashCommand]:
        """``/skills``, ``/agents``, then a command per skill and per command file (a skill
        wins a name clash, as in Claude Code; a built-in name is never taken)."""
        offered = [
            SlashCommand("skills", "List the skills the model can load", self._list_skills),
            SlashCommand("agents", "List the subagents the agent tool can run", self._list_agents),
        ]
        taken = {c.name for c in COMMANDS} | {c.name for c in offered}
        state = self.state
        if self.session.settings.skills.enabled:
            for skill in state.skills:
                if skill.user_invocable and self._free(skill.name, skill.where, taken):
                    offered.append(self._skill_command(skill))
        for command in state.commands:
            if self._free(command.name, command.where, taken):
                offered.append(self._file_command(command))
        return offered

    def _free(self, name: str, where: str, taken: set[str]) -> bool:
        if name.lower() in taken:
            if name.lower() in {c.name for c in COMMANDS}:
                warning = f"{where} is not used: /{name} is a built-in command."
                if self.catalog.first_time(warning):
                    self.session.carry.add_notice(Notice("warning", warning, "extensions"))
            return False
        taken.add(name.lower())
        return True

    def skills_section(self) -> str:
        if not self.session.settings.skills.enabled:
            return ""
        from cairn.extensions.skill_tool import skills_section

        return skills_section(self.state.skills)

    def _sync_skill_tool(self) -> None:
        """The ``skill`` tool is offered while there is a skill the model may load."""
        from cairn.extensions.skill_tool import SKILL_TOOL, SkillTool

        registry = self.session.registry
        wanted = self.session.settings.skills.enabled and any(
            s.model_invocable for s in self.state.skills
        )
        if wanted and SKILL_TOOL not in registry:
            registry.register(SkillTool(lambda: self.state.skills, self._load_skill_for_tool))
        elif not wanted and SKILL_TOOL in registry:
            registry.unregister(SKILL_TOOL)

    # ----- command files -----

    def _file_command(self, command: CommandFile) -> SlashCommand:
        async def run(session: Session, args: str, sink: EventSink) -> CommandOutcome:
            return await self._run_file_command(command, args, sink)

        return SlashCommand(command.name, command.description, run, command.argument_hint)

    async def _run_file_command(
        self, command: CommandFile, args: str, sink: EventSink
    ) -> CommandOutcome:
        from cairn.extensions.templates import expand_template

        invocation = f"/{command.name} {args}".strip()
        expansion = expand_template(
            command.body,
            args,
            dialect=command.dialect,
            variables=self._variables(),
            invocation=invocation,
        )
        allowed, outputs = await self._granted_steps(command, expansion, f"/{command.name}", sink)
        if isinstance(outputs, str):
            self.end_grant()
            return CommandOutcome(outputs, refused=True)
        parts = await self._prompt_parts(expansion, outputs, sink)
        return CommandOutcome(
            prompt=expansion.text(outputs),
            parts=parts,
            model=command.model,
            allowed_tools=allowed,
        )

    # ----- skills -----

    def _skill_command(self, skill: Skill) -> SlashCommand:
        async def run(session: Session, args: str, sink: EventSink) -> CommandOutcome:
            return await self._run_skill_command(skill, args, sink)

        return SlashCommand(skill.name, skill.description, run, skill.argument_hint)

    async def _run_skill_command(self, skill: Skill, args: str, sink: EventSink) -> CommandOutcome:
        from cairn.extensions.skill_tool import skill_text

        expansion = self._skill_expansion(skill, args)
        allowed, outputs = await self._granted_steps(skill, expansion, f"/{skill.name}", sink)
        if isinstance(outputs, str):
            self.end_grant()
            return CommandOutcome(outputs, refused=True)
        self._readable(skill)
        text = skill_text(skill, expansion.text(outputs))
        prompt = f"The user ran the skill /{skill.name}. Follow it.\n\n{text}"
        return CommandOutcome(prompt=prompt, allowed_tools=allowed)

    async def _load_skill_for_tool(self, skill: Skill, args: str, ctx: ToolContext) -> ToolResult:
        """The ``skill`` tool's call: the body, after its shell steps ran (asking, if needed)."""
        from cairn.extensions.skill_tool import skill_text

        expansion = self._skill_expansion(skill, args)
        _, outputs = await self._granted_steps(
            skill, expansion, f"skill {skill.name}", ctx.events, ctx=ctx
        )
        if isinstance(outputs, str):
            return ToolResult(error=outputs)
        self._readable(skill)
        return ToolResult(
            output=skill_text(skill, expansion.text(outputs)),
            display=f"Loaded skill {skill.name} ({skill.where})",
        )

    def _skill_expansion(self, skill: Skill, args: str) -> Expansion:
        from cairn.extensions.templates import expand_template

        variables = {**self._variables(), "CLAUDE_SKILL_DIR": str(skill.directory)}
        return expand_template(
            skill.body,
            args,
            dialect="skill",
            variables=variables,
            argument_names=skill.arguments,
            invocation=f"/{skill.name} {args}".strip(),
        )

    def _readable(self, skill: Skill) -> None:
        directory = skill.directory.resolve()
        if directory not in self.readable_roots:
            self.readable_roots.append(directory)

    async def _list_skills(self, session: Session, args: str, sink: EventSink) -> CommandOutcome:
        if not session.settings.skills.enabled:
            return CommandOutcome("Skills are off (`skills.enabled` in settings).")
        skills = self.state.skills
        if not skills:
            folders = ", ".join(f.label for f in self.catalog.folders("skills"))
            return CommandOutcome(f"No skills. cairn looks for <name>/SKILL.md in: {folders}.")
        lines = ["Skills (the model loads one when a task matches it; /name runs it yourself):"]
        for skill in skills:
            who = ""
            if not skill.model_invocable:
                who = " [only you run it]"
            elif not skill.user_invocable:
                who = " [only the model loads it]"
            lines.append(f"- {skill.name}{who} — {skill.description} ({skill.where})")
        return CommandOutcome("\n".join(lines))

    async def _list_agents(self, session: Session, args: str, sink: EventSink) -> CommandOutcome:
        if not session.settings.agents.enabled:
            return CommandOutcome("Subagents are off (`agents.enabled` in settings).")
        lines = ["Subagents the model can run with the agent tool:"]
        for agent in self.state.agents:
            tools = ", ".join(agent.tools) if agent.tools is not None else "all tools"
            lines.append(f"- {agent.name} — {agent.description} ({agent.where}; {tools})")
        return CommandOutcome("\n".join(lines))

    # ----- what subagents get from the session (cairn.extensions.subagents.SubagentHost) -----

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def cwd(self) -> Path:
        return self.session.cwd

    @property
    def settings(self) -> Settings:
        return self.session.settings

    @property
    def provider(self) -> Provider:
        return self.session.runtime.provider

    def parent_model(self) -> str:
        return self.session.client.model

    def parent_tools(self) -> ToolRegistry:
        return self.session.registry

    def parent_scheduler(self) -> ToolScheduler:
        return self.session.scheduler

    def parent_hooks(self) -> HookRunner | None:
        return self.session.hooks

    def approval_mode(self) -> str:
        return self.session.approval_mode

    def agent_definitions(self) -> Sequence[AgentDefinition]:
        return self.state.agents

    def subagent_context(self) -> str:
        prompt = self.session.system_prompt
        skills = prompt.skills if ToolName.SKILL in self.session.registry else ""
        return "\n\n".join(part for part in (prompt.context_files, skills) if part)

    # ----- the parts both share -----

    def _variables(self) -> dict[str, str]:
        project = str(self.session.runtime.project_root)
        return {
            "CLAUDE_PROJECT_DIR": project,
            "CAIRN_PROJECT_DIR": project,
            "CLAUDE_SESSION_ID": self.session.id,
        }

    async def _run_steps(
        self,
        expansion: Expansion,
        label: str,
        sink: EventSink | None,
        *,
        ctx: ToolContext | None = None,
    ) -> list[str] | str:
        """Run each shell step as a ``run_shell_command`` call; their outputs, or why the
        command is not sent (a step refused, declined or failed)."""
        outputs: list[str] = []
        session = self.session
        emit = sink or _ignore
        for step in expansion.steps:
            call = FunctionCall(
                f"command-{random_hex(12)}",
                ToolName.SHELL,
                {"command": step.command, "description": f"{label}, before its prompt"},
            )
            context = ctx or session.tool_context()
            (outcome,) = await session.scheduler.run([call], context, emit)
            result = outcome.result
            if outcome.status != "completed" or result is None or result.output is None:
                why = outcome.response.response.get("error", "it did not run")
                return f"{label} was not run: its shell step `{step.command}` did not run ({why})"
            outputs.append(_step_output(result.output))
        return outputs

    async def _prompt_parts(
        self, expansion: Expansion, outputs: Sequence[str], sink: EventSink
    ) -> list[Part]:
        """The prompt with the files its own text mentions (``@path``) attached; mentions in
        the shell steps' output attach nothing."""
        mentioned = await self.session.attach_text(expansion.text([""] * len(outputs)))
        for warning in mentioned.warnings:
            await sink(Notice("warning", warning, "attachment"))
        return [Text(expansion.text(outputs)), *mentioned.parts[1:]]

    async def _granted_steps(
        self,
        file: CommandFile | Skill,
        expansion: Expansion,
        label: str,
        sink: EventSink | None,
        *,
        ctx: ToolContext | None = None,
    ) -> tuple[tuple[str, ...], list[str] | str]:
        """Grant ``file``'s allowed-tools for the turn, then run its shell steps: the rules
        granted, and the steps' outputs or why the file is not sent (as :meth:`_run_steps`)."""
        allowed = await self._allowed_tools(file, sink)
        self.begin_grant(allowed)
        return allowed, await self._run_steps(expansion, label, sink, ctx=ctx)

    async def _allowed_tools(
        self, file: CommandFile | Skill, sink: EventSink | None
    ) -> tuple[str, ...]:
        """The ``allowed-tools`` rules to grant for the turn: a project's file grants nothing
        while its folder is not trusted."""
        if not file.allowed_tools:
            return ()
        root = self.session.runtime.project_root
        if file.folder.scope == "project" and not await asyncio.to_thread(
            _project_grants, root, file
        ):
            if sink is not None:
                text = (
                    f"The allowed-tools of {file.where} are not applied: a project's own files "
                    "grant tools only in a trusted folder (`cairn trust` trusts it)."
                )
                await sink(Notice("warning", text, "permissions"))
            return ()
        return file.allowed_tools

    def begin_grant(self, rules: Sequence[str]) -> None:
        """Let ``rules`` (permission rules, as in ``permissions.allow``) allow tool calls until
        the turn ends."""
        if not rules:
            return
        grant = _parse_grant(rules)
        for warning in grant.warnings:
            self.session.carry.add_notice(Notice("warning", warning, "permissions"))
        self.session.scheduler.grant(grant)

    def end_grant(self) -> None:
        self.session.scheduler.end_grant()


def _step_output(output: str) -> str:
    """A shell step's output as the prompt shows it: the exit code only when it failed."""
    match = _EXIT_CODE.search(output)
    if match is None:
        return output
    text = output[: match.start()]
    if text == "(no output)":
        text = ""
    code = match.group(1)
    return text if code == "0" else f"{text}\n[exit code {code}]".lstrip("\n")


def _parse_grant(rules: Sequence[str]) -> PermissionRules:
    from cairn.tools.permissions import PermissionRules

    return PermissionRules.parse(allow=list(rules))


def _project_grants(project_root: Path, file: CommandFile | Skill) -> bool:
    """Whether a project's file may grant its ``allowed-tools`` as loaded: its folder is
    trusted with exactly that grant among the ones it makes now (cairn.config.trust)."""
    from cairn.config.trust import project_trust

    return project_trust(project_root).grants(file.path, file.allowed_tools)


async def _ignore(event: object) -> None:
    return None
