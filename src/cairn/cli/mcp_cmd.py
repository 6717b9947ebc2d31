"""``cairn mcp``: list, get, add and remove MCP servers.

Argument parsing and output only: the servers are read by :mod:`cairn.mcp.config`, checked by
connecting with :mod:`cairn.mcp.manager`, and settings files are written atomically.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from cairn.cli.app import group_app
from cairn.config.loader import SettingsError, load_settings, project_settings_path
from cairn.config.paths import user_settings_path
from cairn.config.trust import TrustFileError, keep_trust_after_approved_change, project_trust
from cairn.exit_codes import ExitCode
from cairn.mcp.config import ServerConfig, collect_servers

if TYPE_CHECKING:
    from cairn.config.settings import Settings

__all__ = ["mcp_app"]

CHECK_TIMEOUT_SECONDS = 30.0  # how long `list` and `get` wait for servers to connect

mcp_app = group_app("mcp")


def _fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    sys.stderr.write(f"{message}\n")
    raise typer.Exit(code)


def _servers() -> tuple[Settings, list[ServerConfig]]:
    cwd = Path.cwd()
    try:
        loaded = load_settings(cwd)
    except SettingsError as exc:
        _fail(str(exc), ExitCode.CONFIG)
    warnings = list(loaded.warnings)
    servers = collect_servers(cwd, loaded.settings, warnings=warnings)
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")
    return loaded.settings, servers


def _server_environment(settings: Settings) -> dict[str, str]:
    """What a session's stdio servers get: cairn's environment without its secrets."""
    from cairn.config.endpoint import NoAuthError, resolve_endpoint
    from cairn.tools.environment import settings_command_environment

    try:
        key: str | None = resolve_endpoint(settings).api_key
    except NoAuthError:  # no model configured: the settings' key may still be set
        key = None
    return settings_command_environment(settings, key)


async def _connect(settings: Settings, servers: list[ServerConfig]) -> Any:
    from cairn.mcp.manager import SessionMcp

    environ = _server_environment(settings)
    view = SessionMcp(None, servers, cwd=Path.cwd(), environ=environ)
    view.start()
    await view.wait_for_discovery(CHECK_TIMEOUT_SECONDS)
    return view


@mcp_app.command("list")
def list_servers() -> None:
    """Each server: transport, status (connected, failed, disabled), tool count, the error."""
    from cairn.session.mcp import describe_servers

    settings, servers = _servers()
    if not servers:
        typer.echo(describe_servers([]))
        return

    async def run() -> str:
        view = await _connect(settings, servers)
        try:
            return describe_servers(view.statuses())
        finally:
            await view.aclose()

    typer.echo(asyncio.run(run()))


@mcp_app.command("get")
def get_server(name: Annotated[str, typer.Argument(help="The server's name.")]) -> None:
    """One server's status, and its tools (with descriptions), prompts and resources."""
    from cairn.mcp.names import NameAllocator
    from cairn.session.mcp import describe_servers

    settings, servers = _servers()
    server = next((s for s in servers if s.name == name), None)
    if server is None:
        _fail(f"No MCP server named {name!r}. `cairn mcp list` shows them.", ExitCode.BAD_INPUT)

    async def run() -> str:
        view = await _connect(settings, [server])
        try:
            [connection] = view.connections
            lines = [describe_servers(view.statuses()), f"source: {server.source}"]
            names = NameAllocator()
            offered = [t for t in connection.tools if server.offers(t.name)]
            if offered:
                lines.append("tools:")
            for tool in offered:
                about = (tool.description or "").strip().splitlines()
                lines.append(f"  {names.allocate(server.name, tool.name)}")
                lines += [f"      {line}" for line in about[:3]]
            for prompt in connection.prompts:
                lines.append(f"prompt: /{names.allocate(server.name, prompt.name)}")
            for resource in connection.resources:
                lines.append(f"resource: {resource.uri} ({resource.name})")
            return "\n".join(lines)
        finally:
            await view.aclose()

    typer.echo(asyncio.run(run()))


@mcp_app.command("add", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def add_server(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The server's name.")],
    target: Annotated[
        str | None, typer.Argument(help="The URL (http, sse) or the command (stdio).")
    ] = None,
    transport: Annotated[
        str, typer.Option("--transport", "-t", help="stdio, http or sse.")
    ] = "stdio",
    scope: Annotated[
        str, typer.Option("--scope", "-s", help="user (~/.cairn) or project (.cairn/).")
    ] = "user",
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for a stdio server.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="'Name: value' for HTTP/SSE.")
    ] = None,
    timeout: Annotated[int | None, typer.Option(help="Milliseconds a tool call may run.")] = None,
    trust: Annotated[bool, typer.Option(help="Run its tools without asking.")] = False,
) -> None:
    """Add a server: ``cairn mcp add NAME -- COMMAND ARGS...`` or
    ``cairn mcp add --transport http NAME URL``."""
    entry: dict[str, Any] = {}
    if transport == "stdio":
        words = [w for w in ([target] if target else []) + list(ctx.args) if w != "--"]
        if not words:
            _fail(
                "A stdio server needs a command: cairn mcp add NAME -- COMMAND ARGS...",
                ExitCode.BAD_INPUT,
            )
        entry["command"], entry["args"] = words[0], words[1:]
        if env:
            entry["env"] = dict(_pair(item, "=", "--env") for item in env)
    elif transport in ("http", "sse"):
        if not target or not target.startswith(("http://", "https://")):
            _fail(f"A {transport} server needs an http:// or https:// URL.", ExitCode.BAD_INPUT)
        entry["httpUrl" if transport == "http" else "url"] = target
        if header:
            entry["headers"] = dict(_pair(item, ":", "--header") for item in header)
    else:
        _fail(f"Unknown transport {transport!r}: use stdio, http or sse.", ExitCode.BAD_INPUT)
    if timeout is not None:
        entry["timeout"] = timeout
    if trust:
        entry["trust"] = True
    path = _scope_path(scope)
    data = _read(path)
    servers = data.setdefault("mcpServers", {})
    replaced = name in servers
    servers[name] = entry
    trusted_before = project_trust(Path.cwd()) if scope == "project" else None
    _write(path, data)
    if trusted_before is not None:  # the user added it: a trusted folder stays trusted
        try:
            keep_trust_after_approved_change(Path.cwd(), trusted_before)
        except TrustFileError as exc:
            sys.stderr.write(f"warning: {exc}\n")
    verb = "Replaced" if replaced else "Added"
    typer.echo(f"{verb} MCP server {name} ({transport}) in {path}.")


@mcp_app.command("remove")
def remove_server(
    name: Annotated[str, typer.Argument(help="The server's name.")],
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", help="user or project (default: where it is).")
    ] = None,
) -> None:
    """Remove a server from the settings file that defines it."""
    paths = [_scope_path(scope)] if scope else [_scope_path("project"), _scope_path("user")]
    for path in paths:
        data = _read(path)
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and name in servers:
            del servers[name]
            _write(path, data)
            typer.echo(f"Removed MCP server {name} from {path}.")
            return
    _fail(
        f"No MCP server named {name!r} in {' or '.join(str(p) for p in paths)}.", ExitCode.BAD_INPUT
    )


def _scope_path(scope: str) -> Path:
    if scope == "user":
        return user_settings_path()
    if scope == "project":
        return project_settings_path(Path.cwd())
    _fail(f"Unknown scope {scope!r}: use user or project.", ExitCode.BAD_INPUT)


def _pair(item: str, separator: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition(separator)
    if not sep or not key.strip():
        _fail(f"{option} {item!r}: expected KEY{separator}VALUE.", ExitCode.BAD_INPUT)
    return key.strip(), value.strip() if separator == ":" else value


def _read(path: Path) -> dict[str, Any]:
    from cairn.config.loader import read_settings_file

    if not path.exists():
        return {}
    try:
        return read_settings_file(path)
    except SettingsError as exc:
        _fail(f"{exc}; fix it before changing its servers", ExitCode.CONFIG)


def _write(path: Path, data: dict[str, Any]) -> None:
    from cairn.fsutil import atomic_write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, data)
