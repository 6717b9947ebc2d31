"""The ``tools`` and ``permissions`` sections of the settings: the approval mode, permission
rules, the shell sandbox, web fetch and web search."""

# Annotations are evaluated here, not postponed: a section reads its fields' types from them.
from collections.abc import Mapping
from typing import Any, Literal

from cairn.config.schema_fields import editable, section
from cairn.config.sections import Field, Section, field_validator

__all__ = [
    "APPROVAL_MODES",
    "WEB_SEARCH_KEY_VARIABLES",
    "ApprovalMode",
    "PermissionsSettings",
    "SandboxSettings",
    "ToolsSettings",
    "WebFetchSettings",
    "WebSearchSettings",
]

ApprovalMode = Literal["plan", "default", "auto-edit", "yolo"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("plan", "default", "auto-edit", "yolo")


class PermissionsSettings(Section):
    allow: list[str] = Field(
        default_factory=list, description='Tool calls that never ask, e.g. `"Bash(git status*)"`.'
    )
    ask: list[str] = Field(default_factory=list, description="Tool calls that always ask.")
    deny: list[str] = Field(default_factory=list, description="Tool calls that are refused.")


class SandboxSettings(Section):
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


class WebFetchSettings(Section):  # the extensions track's
    allow_private_addresses: bool = Field(
        False,
        description="Let `web_fetch` read pages on private, loopback and link-local addresses "
        "(your intranet, `localhost`); off, such URLs are refused.",
    )


WEB_SEARCH_KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "google": "GOOGLE_API_KEY"}


class WebSearchSettings(Section):
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


class ToolsSettings(Section):
    approval_mode: ApprovalMode = editable(
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
    web_fetch: WebFetchSettings = section(WebFetchSettings, "The `web_fetch` tool.")
    web_search: WebSearchSettings = section(WebSearchSettings, "The `web_search` tool.")
    sandbox: SandboxSettings = section(
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
