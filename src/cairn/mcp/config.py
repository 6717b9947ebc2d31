"""MCP server configurations: where they come from, what they mean, and which may start.

Three sources, lowest to highest priority on a name clash:

- settings ``mcpServers`` (user, then project ``.cairn/settings.json``) in the shape Qwen Code and
  Gemini CLI use: ``command`` (stdio), ``url`` (SSE), ``httpUrl`` (streamable HTTP);
- the project's ``.mcp.json`` in Claude Code's shape (``{"mcpServers": {name: {"type": ...}}}``);
  it sits between the two settings files: project settings override it;
- servers an editor (ACP ``session/new``) or a daemon client (``POST /session``) passes in.

This module imports neither the MCP SDK nor anything heavy; a start-up imports it only when
:func:`cairn.mcp.sources.may_configure_servers` says a server may be configured.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from cairn.config.paths import find_git_root
from cairn.mcp.sources import MCP_JSON, mcp_json_path, project_entries

if TYPE_CHECKING:
    from cairn.config.settings import McpServerSettings, Settings

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MCP_JSON",
    "McpConfigError",
    "ProxySettings",
    "Scope",
    "ServerConfig",
    "Transport",
    "collect_servers",
    "mcp_json_path",
    "read_mcp_json",
    "servers_from_client",
    "workspace_trusted",
]

DEFAULT_TIMEOUT_MS = 600_000  # a tool call may run 10 minutes before it is cancelled

Transport: TypeAlias = Literal["stdio", "sse", "http"]
Scope: TypeAlias = Literal["user", "project", "mcp.json", "client"]
_CLAUDE_ENV_REF = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


class McpConfigError(ValueError):
    """A server configuration cannot be used; the message names where, the key and the fix."""


@dataclass(frozen=True)
class ProxySettings:
    """Where an HTTP server's proxy may be set besides the process's environment: the
    ``proxy`` setting and the settings' ``env`` (the fallback for ``HTTPS_PROXY``...)."""

    proxy: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as cairn runs it, whatever file or client it came from."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: float = DEFAULT_TIMEOUT_MS
    trust: bool = False
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    description: str | None = None
    disabled: bool = False
    scope: Scope = "user"
    source: str = ""  # the file (or "ACP session/new") it was read from
    disabled_reason: str | None = None
    # Connect only to public addresses, checked as each connection is made (web_fetch's
    # policy): the HTTP and SSE servers a daemon's tenant passes (#24).
    public_only: bool = False

    @property
    def target(self) -> str:
        """What it runs or reaches, for lists: the command line or the URL."""
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args]).strip()
        return self.url or ""

    def offers(self, tool: str) -> bool:
        """``includeTools`` / ``excludeTools`` allow this server tool (exclude wins)."""
        if tool in self.exclude_tools:
            return False
        return self.include_tools is None or tool in self.include_tools

    def identity(self) -> tuple[Any, ...]:
        """What makes two configs the same running server (scope and source aside)."""
        return (
            self.transport,
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            self.cwd,
            self.url,
            tuple(sorted(self.headers.items())),
            self.public_only,
        )


def from_settings(
    name: str, entry: McpServerSettings, *, scope: Scope, source: str
) -> ServerConfig:
    """A settings entry (validated by the settings schema) as a :class:`ServerConfig`."""
    transport: Transport
    url = entry.http_url or entry.url
    if entry.type == "stdio" or (entry.type is None and entry.command and not url):
        transport = "stdio"
    elif entry.type == "http" or entry.http_url:
        transport = "http"
    else:
        transport = "sse"
    return ServerConfig(
        name=name,
        transport=transport,
        command=entry.command if transport == "stdio" else None,
        args=tuple(entry.args),
        env=dict(entry.env),
        cwd=entry.cwd,
        url=None if transport == "stdio" else url,
        headers=dict(entry.headers),
        timeout_ms=entry.timeout if entry.timeout > 0 else DEFAULT_TIMEOUT_MS,
        trust=entry.trust,
        include_tools=None if entry.include_tools is None else tuple(entry.include_tools),
        exclude_tools=tuple(entry.exclude_tools),
        description=entry.description,
        disabled=entry.disabled,
        scope=scope,
        source=source,
    )


def read_mcp_json(path: Path, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of a Claude Code ``.mcp.json``; :class:`McpConfigError` names the problem."""
    from cairn.config.loader import (
        SettingsError,
        ValidationError,
        describe_validation_error,
        read_settings_file,
    )
    from cairn.config.settings import McpServerSettings

    try:
        raw = read_settings_file(path)
    except SettingsError as exc:
        raise McpConfigError(str(exc)) from None
    servers = raw.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(f"{path}: `mcpServers` must be an object (got {_kind(servers)})")
    env = os.environ if environ is None else environ
    found: list[ServerConfig] = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise McpConfigError(f"{path}: `mcpServers.{name}` must be an object")
        expanded = _expand_claude(entry, env)
        try:
            settings = McpServerSettings.model_validate(expanded, by_name=False)  # as settings
        except ValidationError as exc:
            raise McpConfigError(
                describe_validation_error(exc, str(path), path.read_text(), f"mcpServers.{name}")
            ) from None
        found.append(from_settings(name, settings, scope="mcp.json", source=str(path)))
    return found


def collect_servers(
    cwd: Path,
    settings: Settings,
    *,
    user_path: Path | None = None,
    warnings: list[str] | None = None,
) -> list[ServerConfig]:
    """Every configured server of this workspace, in order, project entries winning a clash.

    A broken ``.mcp.json`` is a warning (the session still starts without its servers);
    settings were validated when they were loaded.
    """
    from cairn.config.loader import project_settings_path
    from cairn.config.paths import user_settings_path

    project_file = project_settings_path(cwd)
    project_servers = project_entries(project_file)
    by_name: dict[str, ServerConfig] = {}
    user_file = user_path or user_settings_path()
    # The loader kept the project file's servers only in a trusted folder: else a server of
    # that name in the settings is the user's own.
    project_used = bool(project_servers) and workspace_trusted(cwd, settings)
    for name, entry in settings.mcp_servers.items():
        in_project = project_used and name in project_servers
        by_name[name] = from_settings(
            name,
            entry,
            scope="project" if in_project else "user",
            source=str(project_file if in_project else user_file),
        )
    left_out = {name: raw for name, raw in project_servers.items() if name not in by_name}
    if left_out and not workspace_trusted(cwd, settings):
        # The loader dropped the project file's servers; they are still listed, as disabled.
        for name, raw in left_out.items():
            dropped = _dropped_server(name, raw, project_file)
            if dropped is not None:
                by_name[name] = dropped
    json_path = mcp_json_path(cwd)
    if json_path.is_file():
        try:
            for server in read_mcp_json(json_path):
                current = by_name.get(server.name)
                if current is None or current.scope == "user":
                    by_name[server.name] = server
        except McpConfigError as exc:
            if warnings is not None:
                warnings.append(f"{exc}; the servers of {json_path} are not started")
    return [_gate(server, cwd, settings) for server in by_name.values()]


def servers_from_client(entries: Iterable[Any], *, source: str) -> list[ServerConfig]:
    """Servers in the ACP ``mcpServers`` shape (``session/new``, ``POST /session``).

    stdio: ``{"name", "command", "args", "env": [{"name", "value"}]}``; HTTP and SSE:
    ``{"type": "http"|"sse", "name", "url", "headers": [{"name", "value"}]}``. Objects as
    settings write them (``env`` and ``headers`` as objects) are accepted too.
    """
    servers: list[ServerConfig] = []
    for index, entry in enumerate(entries):
        where = f"{source}: mcpServers[{index}]"
        if hasattr(entry, "model_dump"):  # an ACP SDK model
            entry = entry.model_dump(by_alias=True, exclude_none=True)
        if not isinstance(entry, Mapping):
            raise McpConfigError(f"{where} must be an object (got {_kind(entry)})")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(f"{where}: `name` must be a non-empty string")
        kind = entry.get("type", "stdio" if "command" in entry else None)
        if kind not in ("stdio", "http", "sse"):
            raise McpConfigError(f'{where}: `type` must be "stdio", "http" or "sse" (got {kind!r})')
        pairs = _pairs(entry.get("env" if kind == "stdio" else "headers"), where)
        if kind == "stdio":
            command = entry.get("command")
            args = entry.get("args", [])
            if not isinstance(command, str) or not command:
                raise McpConfigError(f"{where}: `command` must be a non-empty string")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise McpConfigError(f"{where}: `args` must be a list of strings")
            servers.append(
                ServerConfig(
                    name,
                    "stdio",
                    command=command,
                    args=tuple(args),
                    env=pairs,
                    cwd=entry.get("cwd") if isinstance(entry.get("cwd"), str) else None,
                    scope="client",
                    source=source,
                )
            )
            continue
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpConfigError(f"{where}: `url` must be an http:// or https:// URL")
        servers.append(
            ServerConfig(name, kind, url=url, headers=pairs, scope="client", source=source)
        )
    return servers


def workspace_trusted(cwd: Path, settings: Settings) -> bool:
    """May this workspace's own servers (its ``.mcp.json``) start? The trusted-folders check.

    The settings loader already drops an untrusted project file's ``mcpServers``.
    """
    import importlib

    try:  # the trusted-folders module of #12, once it is there
        trust = importlib.import_module("cairn.config.trust")
    except ImportError:
        return True
    root = find_git_root(cwd) or cwd.resolve()
    return bool(trust.project_trust(root).trusted)


def _gate(server: ServerConfig, cwd: Path, settings: Settings) -> ServerConfig:
    """Mark a server that must not start, with the reason shown in ``cairn mcp list``."""
    from dataclasses import replace

    reason: str | None = None
    if server.disabled:
        reason = "disabled in settings"
    elif server.name in settings.mcp.excluded:
        reason = "listed in mcp.excluded"
    elif settings.mcp.allowed is not None and server.name not in settings.mcp.allowed:
        reason = "not listed in mcp.allowed"
    elif server.scope in ("project", "mcp.json") and not workspace_trusted(cwd, settings):
        reason = (
            "this folder is not trusted, so its project servers do not start; "
            "review them, then run `cairn trust`"
        )
    if reason is None:
        return server
    return replace(server, disabled=True, disabled_reason=reason)


def _dropped_server(name: str, raw: Any, path: Path) -> ServerConfig | None:
    """A project server the loader left out (an untrusted folder), for the listing only."""
    from cairn.config.loader import ValidationError
    from cairn.config.settings import McpServerSettings

    try:
        entry = McpServerSettings.model_validate(raw, by_name=False)
    except ValidationError:
        return None
    return from_settings(name, entry, scope="project", source=str(path))


def _pairs(value: Any, where: str) -> dict[str, str]:
    """ACP's ``[{"name", "value"}]`` (or a plain object) as a dict of strings."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        items = []
        for item in value:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise McpConfigError(f'{where}: expected [{{"name": ..., "value": ...}}] pairs')
            items.append((item["name"], item.get("value", "")))
    else:
        raise McpConfigError(f"{where}: `env`/`headers` must be a list of name/value pairs")
    if not all(isinstance(v, str) for _, v in items):
        raise McpConfigError(f"{where}: every `env`/`headers` value must be a string")
    return dict(items)


def _expand_claude(value: Any, env: Mapping[str, str]) -> Any:
    """Claude Code's ``${VAR}`` and ``${VAR:-default}`` in every string (unset: left as is)."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(3)
            if name in env:
                return env[name]
            default = match.group(2)
            return default if default is not None else match.group(0)

        return _CLAUDE_ENV_REF.sub(one, value)
    if isinstance(value, dict):
        return {k: _expand_claude(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_claude(v, env) for v in value]
    return value


def _kind(value: Any) -> str:
    return json.dumps(value)[:40] if not isinstance(value, dict | list) else type(value).__name__
