"""The settings schema: every key cairn reads from ``settings.json``.

Keys are camelCase in JSON (as in the reference system's files) and snake_case in Python.
Each field's description is the user documentation; ``docs/configuration.md`` lists them all
and a test keeps the two in step. Fields marked ``editable`` can be changed from ``/settings``
without a restart.
"""

# Annotations are evaluated here, not postponed: a section reads its fields' types from them.
from collections.abc import Mapping
from typing import Any, Literal, Self

from cairn.config.sections import Field, InvalidSetting, Section, field_validator, model_validator

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

ApprovalMode = Literal["plan", "default", "auto-edit", "yolo"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("plan", "default", "auto-edit", "yolo")


def _editable(**kwargs: Any) -> Any:
    return Field(json_schema_extra={"editable": True}, **kwargs)


class _Section(Section):
    """A group of settings (:class:`cairn.config.sections.Section`: strict, unknown keys kept,
    camelCase keys in files)."""


def _section(model: type[_Section], description: str | None = None) -> Any:
    """A field holding a section, whose default is made without validation."""
    return Field(default_factory=model.defaults, description=description)


class CheckpointingSettings(_Section):
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


class GeneralSettings(_Section):
    show_session_recap: bool = _editable(
        default=False,
        description="Show a one-line 'where were we' recap when you come back to an idle "
        "terminal session after being away.",
    )
    session_recap_away_threshold_minutes: float = _editable(
        default=5,
        description="Minutes the terminal must be unfocused before the away recap fires "
        "(minimum 1; a non-positive value means 5).",
    )
    checkpointing: CheckpointingSettings = _section(
        CheckpointingSettings, "Checkpoints for `/rewind`."
    )
    session_titles: bool = Field(
        True,
        description="After a session's first turn, ask `fastModel` (when one is set) for a short "
        "title; off, or without a fast model, the first prompt's first line stays the title.",
    )


class SamplingParams(_Section):
    temperature: float | None = Field(None, description="Sampling temperature.")
    top_p: float | None = Field(None, alias="top_p", description="Nucleus sampling.")
    max_tokens: int | None = Field(
        None,
        alias="max_tokens",
        description="Output token budget of a main request (default 8192; "
        "`maxOutputTokens.main` wins).",
    )


def _bound(default: int, what: str) -> Any:
    return Field(None, gt=0, description=f"{what} (default {default}).")


class OutputBounds(_Section):
    """The output bound of each kind of request (its ``X-Cairn-Purpose``); ``None``: the kind's
    default (:data:`cairn.llm.limits.OUTPUT_TOKEN_LIMITS`)."""

    main: int | None = _bound(8192, "The conversation (`samplingParams.max_tokens` sets it too)")
    subagent: int | None = _bound(8192, "An `agent` tool call's own conversation")
    extract: int | None = _bound(4096, "The memory extraction agent")
    dream: int | None = _bound(8192, "The memory consolidation agent")
    compress: int | None = _bound(8192, "The summary that replaces older history")
    recap: int | None = _bound(300, "The session recap")
    title: int | None = _bound(64, "The session title")
    recall_selector: int | None = Field(
        None, gt=0, alias="recall-selector", description="Recall's selector (default 1024)."
    )
    forget: int | None = _bound(2048, "Forget's selector")
    web_fetch: int | None = Field(
        None, gt=0, alias="web-fetch", description="The answer `web_fetch` writes (default 4096)."
    )

    def by_kind(self) -> dict[str, int]:
        """The bounds set, by request kind (``recall-selector``, ``web-fetch`` ...)."""
        return {
            info.alias or name: value
            for name, info in type(self).model_fields.items()
            if (value := getattr(self, name)) is not None
        }


class GenerationConfig(_Section):
    timeout: float = Field(
        120,
        description="Seconds to wait for the provider's response headers and for each event "
        "of the stream (keep-alive comments do not count); a stream idle that long is retried.",
    )
    request_deadline: float = Field(
        1800,
        description="Seconds one request may take from sending to the end of the answer; "
        "a request past it fails and is not retried.",
    )
    max_retries: int = Field(
        7,
        description="Attempts for a request that fails with HTTP 429 or 5xx (at least 1). "
        "`Retry-After` is honoured up to 60 s, and no retry starts 5 minutes after the first "
        "attempt. A refused connection or an unknown host is retried once.",
    )
    sampling_params: SamplingParams = _section(
        SamplingParams, "Sampling parameters sent with main requests."
    )
    max_output_tokens: OutputBounds = _section(
        OutputBounds,
        "Output bounds (`max_tokens`) by request kind; an answer cut at its bound is reported "
        "as cut.",
    )
    context_window_size: int | None = Field(
        None,
        description="The model's context window in tokens (default: what the server says, "
        "else 131072; the smaller of this and the server's).",
    )
    thinking_budget: int | None = Field(
        None,
        description="Extended thinking for Anthropic models: the tokens the model may think "
        "before answering (at least 1024; null: off). Side queries never think.",
    )


class ChatCompressionSettings(_Section):
    context_percentage_threshold: float = Field(
        0.7,
        description="Compress the conversation when the last prompt used more than this "
        "fraction of the context window (0 turns automatic compression off).",
    )


StructuredOutput = Literal["auto", "json_schema", "json_object", "tool", "prompt"]
PromptCaching = Literal["auto", "on", "off"]


class ModelChoice(_Section):
    """One entry of ``model.available``: a model, and where it is served if not at the main
    endpoint (the shape of Qwen Code's ``modelProviders`` entries)."""

    id: str = Field(description="The model's name on its endpoint (sent as `model`).")
    name: str | None = Field(None, description="The label menus show (default: `id`).")
    description: str | None = Field(None, description="One line menus show under the label.")
    auth_type: Literal["openai", "anthropic"] | None = Field(
        None,
        description="The wire of the model's endpoint (default: the main endpoint's; with "
        "neither this nor `baseUrl`, the model is served by the main endpoint).",
    )
    base_url: str | None = Field(
        None,
        description="The model's endpoint (default: the main endpoint's URL on the same wire, "
        "`https://api.anthropic.com` for `anthropic`).",
    )
    env_key: str | None = Field(
        None,
        description="The environment variable holding the key for `baseUrl` (default: the "
        "main endpoint's key on the same wire, else `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).",
    )

    @model_validator(mode="after")
    def _id_not_blank(self) -> Self:
        if not self.id.strip():
            raise InvalidSetting("blank_model", "an entry with a non-blank `id`")
        return self


class ModelSettings(_Section):
    name: str | None = Field(None, description="The main model (e.g. `gpt-4.1`, `qwen3-coder`).")
    available: list[str | ModelChoice] | Literal["auto"] = Field(
        default_factory=list,
        description="The models `/model`, the ACP model menu and the daemon offer: names, "
        "entries `{id, name, description, authType, baseUrl, envKey}` (a model served "
        "elsewhere), or `auto` (the endpoint's `GET /models`, read once per process). "
        "Empty: only the main model.",
    )
    structured_output: StructuredOutput = Field(
        "auto",
        description="How side queries that need JSON ask for it: `json_schema` "
        "(`response_format` carrying the schema), `json_object` (`response_format` asking for "
        "any JSON object), `tool` (a forced `respond_in_schema` tool call), `prompt` (the "
        "schema in the prompt only), or `auto` (`json_schema`, falling back per endpoint when "
        "it is refused).",
    )
    supports_images: bool = Field(
        True,
        description="The model takes images. Off (a text-only model): each image is sent as a "
        "one-line note naming it instead.",
    )
    prompt_caching: PromptCaching = Field(
        "auto",
        description="Mark the stable prefix of each request for the endpoint to cache "
        "(`cache_control`): `auto` for endpoints known to honour it (DashScope, Anthropic "
        "models through OpenRouter, the Anthropic API), `on` everywhere, `off` nowhere.",
    )
    max_session_turns: int = Field(
        -1, description="Stop after this many model requests in a session (-1: no limit)."
    )
    session_token_limit: int | None = Field(
        None, description="Refuse to send a request whose prompt exceeds this many tokens."
    )
    skip_loop_detection: bool = Field(
        False, description="Turn off loop detection (repeated tool calls or repeated text)."
    )
    skip_startup_context: bool = Field(
        False, description="Do not start the conversation with the environment summary."
    )
    chat_compression: ChatCompressionSettings = _section(
        ChatCompressionSettings, "Automatic compression."
    )
    generation_config: GenerationConfig = _section(GenerationConfig, "Request settings.")


class FileFilteringSettings(_Section):
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


class ContextSettings(_Section):
    file_name: str | list[str] = Field(
        default_factory=lambda: ["AGENTS.md", "CAIRN.md"],
        description="Context file names collected into the system prompt: names (or relative "
        "paths) inside each folder, never absolute or through `..`; a project's file is read "
        "only if it resolves inside the project.",
    )
    file_filtering: FileFilteringSettings = _section(
        FileFilteringSettings, "What the file tools skip."
    )


MemoryBackendName = Literal["files", "postgres"]


class MemoryPostgresSettings(_Section):
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


class MemorySettings(_Section):
    backend: MemoryBackendName = Field(
        "files",
        description="Where memory is kept: `files` (Markdown files on this machine) or "
        "`postgres` (one memory shared by processes and machines; see `memory.postgres`).",
    )
    postgres: MemoryPostgresSettings = _section(MemoryPostgresSettings)
    enable_managed_auto_memory: bool = _editable(
        default=True,
        description="Managed auto-memory: Recall before each turn, Extract after it, and the "
        "memory section of the system prompt. Off: none of it runs or costs tokens.",
    )
    enable_managed_auto_dream: bool = _editable(
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
        description="How long `cairn -p` waits for a background extraction before exiting.",
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


class PermissionsSettings(_Section):
    allow: list[str] = Field(
        default_factory=list, description='Tool calls that never ask, e.g. `"Bash(git status*)"`.'
    )
    ask: list[str] = Field(default_factory=list, description="Tool calls that always ask.")
    deny: list[str] = Field(default_factory=list, description="Tool calls that are refused.")


class SandboxSettings(_Section):
    enabled: bool = Field(
        False,
        description="Run `run_shell_command` under bubblewrap (Linux): the workspace writable, "
        "the rest read-only, secrets hidden. `--sandbox` or `CAIRN_SANDBOX=1` turn it on for "
        "one run.",
    )
    network: Literal["none", "loopback", "full"] = Field(
        "none",
        description="What a sandboxed command may reach: `none`, `loopback` (the TCP ports "
        "listening on this machine's loopback when it starts) or `full`.",
    )
    writable_paths: list[str] = Field(
        default_factory=list,
        description="More folders a sandboxed command may write (absolute, `~/...`, or "
        "relative to the workspace).",
    )
    read_only_paths: list[str] = Field(
        default_factory=list,
        description="Paths bound read-only last: re-expose one inside a hidden folder (e.g. "
        "`~/.ssh/known_hosts`) or protect one inside the workspace.",
    )
    hidden_paths: list[str] = Field(
        default_factory=list,
        description="More paths a sandboxed command must not see, besides `~/.ssh`, "
        "`~/.aws`, `~/.config/gh`, `$CAIRN_HOME` and the other defaults.",
    )


class WebFetchSettings(_Section):  # the extensions track's
    allow_private_addresses: bool = Field(
        False,
        description="Let `web_fetch` read pages on private, loopback and link-local addresses "
        "(your intranet, `localhost`); off, such URLs are refused.",
    )


WEB_SEARCH_KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "google": "GOOGLE_API_KEY"}


class WebSearchSettings(_Section):
    provider: Literal["tavily", "google"] | None = Field(
        None,
        description="The search provider of the `web_search` tool: `tavily` or `google` "
        "(Programmable Search). Unset, there is no `web_search` tool.",
    )
    api_key: str | None = Field(
        None,
        description="The provider's key; unset, `TAVILY_API_KEY` or `GOOGLE_API_KEY` is used.",
    )
    search_engine_id: str | None = Field(
        None,
        description="Google's Programmable Search engine id (`cx`); unset, "
        "`GOOGLE_SEARCH_ENGINE_ID` is used.",
    )
    base_url: str | None = Field(
        None,
        description="Another address of the provider's API (a proxy); unset, "
        "`https://api.tavily.com` or `https://www.googleapis.com`.",
    )
    max_results: int = Field(5, ge=1, le=20, description="Results per search (Google: at most 10).")

    def key(self, environ: Mapping[str, str]) -> str:
        """The provider's key: ``apiKey``, else its standard variable ("" with no provider)."""
        if self.provider is None:
            return ""
        return self.api_key or environ.get(WEB_SEARCH_KEY_VARIABLES[self.provider], "")


class ToolsSettings(_Section):
    approval_mode: ApprovalMode = _editable(
        default="default",
        description="`plan` (read-only), `default` (ask before edits and shell), `auto-edit` "
        "(edits allowed, shell asks), `yolo` (never ask).",
    )
    shell_timeout_seconds: float = Field(
        120, description="Default time limit of `run_shell_command`."
    )
    pass_secrets_to_shell: list[str] = Field(
        default_factory=list,
        description="cairn's secret variables (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, "
        "`CAIRN_SERVER_TOKEN`, `CAIRN_MEMORY_DSN`, `CAIRN_DATABASE_URL`, or one holding a key "
        "cairn uses: the endpoint's, the web search provider's, a `model.available` entry's "
        "`envKey`) that shell commands and hooks may still see; by default they see none.",
    )
    web_fetch: WebFetchSettings = _section(WebFetchSettings, "The `web_fetch` tool.")
    web_search: WebSearchSettings = _section(WebSearchSettings, "The `web_search` tool.")
    sandbox: SandboxSettings = _section(
        SandboxSettings,
        'The bubblewrap sandbox of shell commands (`true` is short for `{"enabled": true}`).',
    )

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox_shorthand(cls, value: Any) -> Any:
        if isinstance(value, bool):  # Qwen Code's `"sandbox": true`
            return {"enabled": value}
        if isinstance(value, str):
            raise ValueError(
                "true, false or an object: cairn's sandbox is bubblewrap, not a container"
            )
        return value


WireType = Literal["openai", "anthropic"]


class AuthSettings(_Section):
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


class FolderTrustSettings(_Section):
    enabled: bool = Field(
        True,
        description="Ask before using a project's hooks, MCP servers and permission-widening "
        "settings (user settings only; `false` trusts every folder).",
    )


class SecuritySettings(_Section):
    auth: AuthSettings = _section(AuthSettings, "Endpoint and key.")
    folder_trust: FolderTrustSettings = _section(FolderTrustSettings, "Trusted folders.")
    trusted_folders: list[str] = Field(
        default_factory=list,
        description="Folders (absolute or `~/...`) whose projects, and those below them, are "
        "trusted whatever they define. Read from the user settings only.",
    )


HookType = Literal["command", "prompt"]
HookToolNames = Literal["claude", "cairn"]


class HookCommand(_Section):
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


class HookMatcher(_Section):
    matcher: str = Field("", description="Regex on the tool name (PreToolUse); empty = all.")
    hooks: list[HookCommand] = Field(default_factory=list)
    tool_names: HookToolNames | None = Field(
        None,
        description="The tool names (and argument names) the group's hooks see: `claude` "
        "(`Bash`, `Write`, ...) or `cairn` (`run_shell_command`, `write_file`, ...; Qwen Code's). "
        "Default: `claude`, or `cairn` when the matcher names tools only by cairn's names.",
    )


class HooksSettings(_Section):
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


class ClaudeHooksSettings(_Section):
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


class CommandsSettings(_Section):
    import_from: list[CommandsImport] = Field(
        default_factory=_claude_and_qwen,
        description="Also read slash commands from these tools' folders: `claude` "
        "(`.claude/commands/`, `~/.claude/commands/`), `qwen` (`.qwen/commands/`, "
        "`~/.qwen/commands/`). cairn's own folders win a clash; `[]` reads only cairn's.",
    )


class SkillsSettings(_Section):
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


class NotificationSettings(_Section):
    idle_seconds: float = Field(
        60,
        ge=0,
        description="Seconds a finished turn waits for your next prompt before `Notification` "
        "hooks hear `idle_prompt` (0: never).",
    )


class AgentsSettings(_Section):
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


class McpServerSettings(_Section):
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


class McpSettings(_Section):
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


class TelemetrySettings(_Section):
    enabled: bool = Field(True, description="Record telemetry events in the debug log.")
    outfile: str | None = Field(
        None, description="Also append telemetry events as JSON lines to this file."
    )


class Settings(_Section):
    general: GeneralSettings = _section(GeneralSettings, "General.")
    fast_model: str = Field(
        "",
        description="A cheaper model for side queries (Recall's selector, Forget's selector, "
        "the session recap). Empty: the main model.",
    )
    model: ModelSettings = _section(ModelSettings, "The main model.")
    context: ContextSettings = _section(ContextSettings, "Context files.")
    memory: MemorySettings = _section(MemorySettings, "Managed memory.")
    tools: ToolsSettings = _section(ToolsSettings, "Tools.")
    permissions: PermissionsSettings = _section(PermissionsSettings, "Permission rules.")
    security: SecuritySettings = _section(SecuritySettings, "Security.")
    hooks: HooksSettings = _section(HooksSettings, "Command hooks.")
    disable_all_hooks: bool = Field(False, description="Ignore every configured hook.")
    claude_hooks: ClaudeHooksSettings = _section(
        ClaudeHooksSettings, "Hooks from Claude Code's settings files."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Fallback environment variables (lowest priority)."
    )
    telemetry: TelemetrySettings = _section(TelemetrySettings, "Telemetry.")
    mcp_servers: dict[str, McpServerSettings] = Field(
        default_factory=dict, alias="mcpServers", description="MCP servers, by name."
    )
    mcp: McpSettings = _section(McpSettings, "MCP client behaviour.")
    commands: CommandsSettings = _section(CommandsSettings, "Slash commands from files.")
    skills: SkillsSettings = _section(SkillsSettings, "Skills.")
    agents: AgentsSettings = _section(AgentsSettings, "Subagents.")
    notifications: NotificationSettings = _section(
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
