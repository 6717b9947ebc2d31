"""Trusted folders: a project's own settings may not run commands or widen permissions until
its folder is trusted.

A repository you merely open can carry ``.cairn/settings.json`` (hooks, MCP servers, a
``yolo`` approval mode, allow rules, secrets passed to shell commands, a loosened sandbox, an
endpoint that would receive your key, a memory database that would receive your memories)
and a ``.mcp.json``, and its command and skill files can grant tools (``allowed-tools``).
:func:`project_commands` lists what such files would make cairn run or allow;
:func:`project_trust` decides whether they may. A folder is trusted when

- it defines none of these,
- ``security.folderTrust.enabled`` is ``false`` in the *user* settings,
- ``cairn --trust`` (or ``cairn serve --trust``) runs this process (:func:`trust_this_run`),
- it lies inside a folder of the *user* settings' ``security.trustedFolders``, or
- it was trusted (``cairn trust``, or the terminal UI's dialog) with exactly this set of commands
  (kept in ``$CAIRN_HOME/trusted-folders.json``): a changed set asks again.

A project file can never trust itself: its ``security`` trust keys are ignored. The settings
loader drops an untrusted project file's keys (the hooks then never run) and shows
:attr:`ProjectTrust.notice`; the MCP manager skips ``.mcp.json`` unless
``project_trust(root).trusted``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from cairn.config.paths import cairn_home, find_git_root, user_settings_path
from cairn.fsutil import atomic_write_json
from cairn.values import Value

__all__ = [
    "TRUST_FILE_NAME",
    "ProjectCommand",
    "ProjectTrust",
    "TrustFileError",
    "fingerprint",
    "forget_folder",
    "keep_trust_after_approved_change",
    "project_commands",
    "project_root_of",
    "project_trust",
    "strip_untrusted",
    "trust_file_path",
    "trust_folder",
    "trust_this_run",
    "trusted_folders",
]

TRUST_FILE_NAME = "trusted-folders.json"
_SETTINGS = ".cairn/settings.json"
_MCP_JSON = ".mcp.json"
_WIDE_MODES = ("yolo", "auto-edit")  # approval modes that run tools without asking
# What a project file may never say about trust (only the user's own settings can).
PROJECT_IGNORED_KEYS = ("trustedFolders", "folderTrust")
_run_trust = {"granted": False}
MAX_SCRIPT_BYTES = 16 << 20  # of a project script read into the fingerprint
# Programs whose first argument is the script they run.
_INTERPRETERS = frozenset({"python", "bash", "sh", "zsh", "node", "deno", "bun", "ruby", "perl"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

# Command and skill files of a project whose ``allowed-tools`` grant tools (the extensions).
_GRANT_FOLDERS = tuple(
    f"{dot}/{kind}"
    for dot in (".cairn", ".claude", ".qwen", ".agents")
    for kind in ("commands", "skills")
)
MAX_FILES_NAMED = 4  # files a notice names before "and N more"
MAX_GRANT_FILES = 500  # command/skill files looked at per project
_GRANT_HEAD_BYTES = 16 << 10  # of each file: its front matter is at the top
_GRANT_KEY = re.compile(r"^allowed[-_]?tools[ \t]*:(?P<value>.*)$", re.IGNORECASE)

CommandKind = Literal["hook", "mcp", "permissions", "sandbox", "endpoint", "grant"]


class TrustFileError(Exception):
    """``trusted-folders.json`` cannot be written; the message names the file."""


class ProjectCommand(Value):
    """One thing a project's files would make cairn run or allow."""

    kind: CommandKind
    source: str  # ".cairn/settings.json" or ".mcp.json"
    key: str  # "hooks.PreToolUse", "mcpServers.github", "tools.approvalMode", ...
    text: str  # the command line, the URL, the value
    scripts: tuple[str, ...] = ()  # "path sha256" of each project file the command runs

    def describe(self) -> str:
        return f"{self.source} {self.key}: {self.text}"


class ProjectTrust(Value):
    """Whether a folder's project commands may run, and why."""

    folder: Path
    commands: tuple[ProjectCommand, ...]
    trusted: bool
    reason: str  # "no commands", "trusted", "trusted this run", "security.trustedFolders", ...
    changed: bool = False  # trusted before with a different set of commands
    declined: bool = False  # the user said no to exactly this set (the dialog does not ask)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.commands)

    @property
    def notice(self) -> str:
        """The one message an untrusted folder gets: what is off and how to trust it."""
        if self.trusted:
            return ""
        what = ", ".join(_counted(self.commands))
        since = " changed since you trusted it, so" if self.changed else ""
        return (
            f"{self.folder} is not a trusted folder: its project settings{since} are not used "
            f"({what}). Review them ({self._files()}), then trust it with `cairn trust`, "
            "run with `--trust`, or list it in security.trustedFolders of your user settings."
        )

    def _files(self) -> str:
        files = list(dict.fromkeys(c.source for c in self.commands))
        shown = ", ".join(files[:MAX_FILES_NAMED])
        return shown + (
            f" and {len(files) - MAX_FILES_NAMED} more" if len(files) > MAX_FILES_NAMED else ""
        )


def project_root_of(path: Path) -> Path:
    """The folder whose trust counts for ``path``: its git root, else the folder itself."""
    return find_git_root(path) or path.resolve()


def trust_this_run(granted: bool = True) -> None:
    """``--trust``: every folder's project commands may run in this process (not recorded)."""
    _run_trust["granted"] = granted


def trust_file_path() -> Path:
    return cairn_home() / TRUST_FILE_NAME


# ----- what a project would run -----


def project_commands(
    folder: Path, project_settings: Mapping[str, Any] | None = None
) -> list[ProjectCommand]:
    """What ``folder``'s ``.cairn/settings.json`` and ``.mcp.json`` would run or allow.

    ``project_settings``: the settings file already read (else it is read here, leniently).
    """
    raw = dict(project_settings) if project_settings is not None else _read_json(folder / _SETTINGS)
    found = list(_settings_commands(raw))
    found += _mcp_json_commands(folder / _MCP_JSON)
    found += _grant_commands(folder)
    return [_with_scripts(command, folder) for command in found]


def _with_scripts(command: ProjectCommand, folder: Path) -> ProjectCommand:
    """A command that runs a file of the project is trusted with that file's content: editing
    the script (a pull, a rebase) asks again, as editing the command does."""
    if command.kind not in ("hook", "mcp"):
        return command
    root = folder.resolve()
    scripts = []
    for word in _programs(command.text):
        for name in ("$CAIRN_PROJECT_DIR", "${CAIRN_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR"):
            word = word.replace(name, str(root))
        path = Path(word) if os.path.isabs(word) else root / word
        with contextlib.suppress(OSError, ValueError):
            resolved = path.resolve()
            if root in resolved.parents and resolved.is_file():
                relative = resolved.relative_to(root).as_posix()
                scripts.append(f"{relative} {_file_digest(resolved)}")
    if not scripts:
        return command
    return ProjectCommand(command.kind, command.source, command.key, command.text, tuple(scripts))


def _programs(text: str) -> list[str]:
    """What a command line runs: each command's program, and the script an interpreter is
    given (``python hooks/check.py``); not its other arguments (data files change)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    programs: list[str] = []
    segment: list[str] = []
    redirect_target = False
    for token in [*tokens, ";"]:
        if token and all(c in "<>" for c in token):
            redirect_target = True  # "> file": the file is no program
        elif token and all(c in ";&|()" for c in token):
            programs += _segment_programs(segment)
            segment, redirect_target = [], False
        elif redirect_target:
            redirect_target = False
        else:
            segment.append(token)
    return programs


def _segment_programs(words: list[str]) -> list[str]:
    words = [w for w in words if not _ASSIGNMENT.match(w)]
    if not words:
        return []
    found = [words[0]]
    if os.path.basename(words[0]).rstrip("0123456789.") in _INTERPRETERS:
        script = next((w for w in words[1:] if not w.startswith("-")), None)
        if script is not None:
            found.append(script)
    return found


def _settings_commands(raw: Mapping[str, Any]) -> Iterable[ProjectCommand]:
    hooks = raw.get("hooks")
    if isinstance(hooks, Mapping):
        for event, groups in hooks.items():
            for command in _hook_commands(groups):
                yield ProjectCommand("hook", _SETTINGS, f"hooks.{event}", command)
    yield from _servers(raw.get("mcpServers"), _SETTINGS)
    tools = _section(raw, "tools")
    mode = tools.get("approvalMode")
    if mode in _WIDE_MODES:
        yield ProjectCommand("permissions", _SETTINGS, "tools.approvalMode", str(mode))
    permissions = raw.get("permissions")
    if isinstance(permissions, Mapping) and permissions.get("allow"):
        rules = permissions["allow"]
        text = ", ".join(map(str, rules)) if isinstance(rules, list) else json.dumps(rules)
        yield ProjectCommand("permissions", _SETTINGS, "permissions.allow", text)
    secrets = tools.get("passSecretsToShell")
    if secrets:
        text = ", ".join(map(str, secrets)) if isinstance(secrets, list) else json.dumps(secrets)
        yield ProjectCommand("permissions", _SETTINGS, "tools.passSecretsToShell", text)
    yield from _sandbox_loosening(tools.get("sandbox"))
    yield from _endpoint(raw)


def _hook_commands(groups: Any) -> Iterable[str]:
    if not isinstance(groups, list):
        yield json.dumps(groups)[:200]
        return
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, Mapping) else None
        for hook in hooks if isinstance(hooks, list) else [hooks]:
            command = hook.get("command") if isinstance(hook, Mapping) else hook
            if command:
                yield str(command)


def _servers(servers: Any, source: str) -> Iterable[ProjectCommand]:
    if not isinstance(servers, Mapping):
        if servers:
            yield ProjectCommand("mcp", source, "mcpServers", json.dumps(servers)[:200])
        return
    for name, entry in servers.items():
        yield ProjectCommand("mcp", source, f"mcpServers.{name}", _server_text(entry))


def _server_text(entry: Any) -> str:
    if not isinstance(entry, Mapping):
        return json.dumps(entry)[:200]
    for key in ("command", "httpUrl", "url"):
        value = entry.get(key)
        if isinstance(value, str) and value:
            if key != "command":
                return value
            args = entry.get("args")
            words = [value, *(map(str, args) if isinstance(args, list) else [])]
            return " ".join(words)
    return json.dumps(entry, sort_keys=True)[:200]


def _sandbox_loosening(sandbox: Any) -> Iterable[ProjectCommand]:
    if sandbox is False or (isinstance(sandbox, Mapping) and sandbox.get("enabled") is False):
        yield ProjectCommand("sandbox", _SETTINGS, "tools.sandbox.enabled", "false")
    if not isinstance(sandbox, Mapping):
        return
    if sandbox.get("network") in ("loopback", "full"):
        yield ProjectCommand("sandbox", _SETTINGS, "tools.sandbox.network", str(sandbox["network"]))
    for key in ("writablePaths", "readOnlyPaths"):
        if sandbox.get(key):
            value = sandbox[key]
            text = ", ".join(map(str, value)) if isinstance(value, list) else json.dumps(value)
            yield ProjectCommand("sandbox", _SETTINGS, f"tools.sandbox.{key}", text)


def _endpoint(raw: Mapping[str, Any]) -> Iterable[ProjectCommand]:
    auth = _section(_section(raw, "security"), "auth")
    if auth.get("baseUrl"):
        yield ProjectCommand("endpoint", _SETTINGS, "security.auth.baseUrl", str(auth["baseUrl"]))
    search = _section(_section(raw, "tools"), "webSearch").get("baseUrl")
    if search:  # the user's search key would be sent there
        yield ProjectCommand("endpoint", _SETTINGS, "tools.webSearch.baseUrl", str(search))
    dsn = _section(_section(raw, "memory"), "postgres").get("dsn")
    if dsn:  # the user's memories would be read from and written to that database
        yield ProjectCommand("endpoint", _SETTINGS, "memory.postgres.dsn", str(dsn))
    env = raw.get("env")
    if isinstance(env, Mapping) and env:
        text = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
        yield ProjectCommand("endpoint", _SETTINGS, "env", text)


def _mcp_json_commands(path: Path) -> list[ProjectCommand]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        digest = _file_digest(path)
        return [ProjectCommand("mcp", _MCP_JSON, "(unreadable)", f"sha256 {digest}")]
    servers = data.get("mcpServers") if isinstance(data, Mapping) else data
    return list(_servers(servers, _MCP_JSON))


def _grant_commands(folder: Path) -> list[ProjectCommand]:
    """The ``allowed-tools`` of the project's command and skill files: each lets its command
    run tools without asking."""
    found: list[ProjectCommand] = []
    seen = 0
    for relative in _GRANT_FOLDERS:
        base = folder / relative
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.md")):
            seen += 1
            if seen > MAX_GRANT_FILES:
                return found
            grant = _allowed_tools(path)
            if grant is not None:
                source = path.relative_to(folder).as_posix()
                found.append(ProjectCommand("grant", source, "allowed-tools", grant))
    return found


def _allowed_tools(path: Path) -> str | None:
    """The ``allowed-tools`` value of a file's front matter as written, items joined (``None``:
    it grants nothing). Read leniently: any line of the key counts, whatever YAML makes of it."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_GRANT_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    lines = head.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for index, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            return None
        match = _GRANT_KEY.match(line)
        if match is None:
            continue
        items = [match["value"].strip().strip("[]")]
        for item in lines[index + 1 :]:
            if item.strip() == "---" or not (item[:1].isspace() or item.startswith("- ")):
                break
            items.append(item.strip().removeprefix("-").strip())
        text = ", ".join(i.strip("'\"") for i in items if i.strip("'\""))
        return text or None
    return None


def fingerprint(commands: Iterable[ProjectCommand]) -> str:
    items = sorted((c.kind, c.source, c.key, c.text, *c.scripts) for c in commands)
    return "sha256:" + hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


# ----- the decision -----


def project_trust(
    folder: Path,
    *,
    user_settings: Mapping[str, Any] | None = None,
    project_settings: Mapping[str, Any] | None = None,
) -> ProjectTrust:
    """May ``folder``'s project commands run? (See the module docstring.)

    ``user_settings`` / ``project_settings``: the raw files already read (else read here).
    """
    root = project_root_of(folder)
    commands = tuple(project_commands(root, project_settings))
    if not commands:
        return ProjectTrust(root, commands, True, "no commands")
    user = dict(user_settings) if user_settings is not None else _read_json(user_settings_path())
    security = _section(user, "security")
    folder_trust = security.get("folderTrust")
    if isinstance(folder_trust, Mapping) and folder_trust.get("enabled") is False:
        return ProjectTrust(root, commands, True, "security.folderTrust.enabled is false")
    if _run_trust["granted"]:
        return ProjectTrust(root, commands, True, "trusted for this run (--trust)")
    if _inside_any(root, security.get("trustedFolders")):
        return ProjectTrust(root, commands, True, "security.trustedFolders")
    record = trusted_folders().get(str(root))
    if record is None:
        return ProjectTrust(root, commands, False, "never trusted")
    same = record.get("fingerprint") == fingerprint(commands)
    if record.get("decision") == "trust":
        if same:
            return ProjectTrust(root, commands, True, "trusted")
        return ProjectTrust(root, commands, False, "commands changed", changed=True)
    return ProjectTrust(root, commands, False, "declined", declined=same)


def _inside_any(root: Path, folders: Any) -> bool:
    if not isinstance(folders, list):
        return False
    for entry in folders:
        if not isinstance(entry, str) or not entry.strip():
            continue
        trusted = Path(os.path.expandvars(entry)).expanduser()
        if not trusted.is_absolute():
            continue
        trusted = trusted.resolve()
        if root == trusted or trusted in root.parents:
            return True
    return False


def strip_untrusted(project_settings: Mapping[str, Any], trust: ProjectTrust) -> dict[str, Any]:
    """The project file without what ``trust`` does not allow (and never its trust keys)."""
    raw = json.loads(json.dumps(project_settings))  # a deep copy of plain JSON
    security = raw.get("security")
    if isinstance(security, dict):
        for key in PROJECT_IGNORED_KEYS:
            security.pop(key, None)
    if trust.trusted:
        return raw
    for command in trust.commands:
        if command.source == _SETTINGS:
            _drop(raw, command.key)
    return raw


def _drop(raw: dict[str, Any], key: str) -> None:
    parts = key.split(".")
    if parts[0] in ("hooks", "mcpServers", "env"):
        raw.pop(parts[0], None)
        return
    node: Any = raw
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(parts[-1], None)
    tools = raw.get("tools")
    if key == "tools.sandbox.enabled" and isinstance(tools, dict) and tools.get("sandbox") is False:
        tools.pop("sandbox")


# ----- the record -----


def trusted_folders() -> dict[str, dict[str, Any]]:
    """``trusted-folders.json``'s entries by folder; an unreadable file reads as empty."""
    data = _read_json(trust_file_path())
    folders = data.get("folders")
    if not isinstance(folders, dict):
        return {}
    return {k: v for k, v in folders.items() if isinstance(k, str) and isinstance(v, dict)}


def trust_folder(folder: Path, *, trusted: bool = True) -> ProjectTrust:
    """Record the answer for ``folder``'s current commands; the folder's new trust."""
    root = project_root_of(folder)
    commands = project_commands(root)
    folders = trusted_folders()
    folders[str(root)] = {
        "decision": "trust" if trusted else "decline",
        "fingerprint": fingerprint(commands),
        "decidedAt": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commands": [c.describe() for c in commands],
    }
    path = trust_file_path()
    try:
        atomic_write_json(path, {"version": 1, "folders": folders})
        os.chmod(path, 0o600)
    except OSError as exc:
        raise TrustFileError(f"{path}: cannot record the folder's trust ({exc})") from None
    return project_trust(root)


def keep_trust_after_approved_change(folder: Path, trusted_before: ProjectTrust) -> ProjectTrust:
    """The user approved a change to the project's settings in cairn's own dialog: a folder
    that was trusted (or ran nothing) before stays trusted with the new commands. A folder that
    was not stays untrusted: approving one change does not vouch for what was already there.
    Trust given for one run (``--trust``) is not recorded."""
    current = project_trust(folder)
    if current.trusted or not trusted_before.trusted or _run_trust["granted"]:
        return current
    return trust_folder(folder)


def forget_folder(folder: Path) -> bool:
    """Remove ``folder``'s recorded answer; True when there was one."""
    root = project_root_of(folder)
    folders = trusted_folders()
    if folders.pop(str(root), None) is None:
        return False
    path = trust_file_path()
    try:
        atomic_write_json(path, {"version": 1, "folders": folders})
    except OSError as exc:
        raise TrustFileError(f"{path}: cannot update the trusted folders ({exc})") from None
    return True


def _section(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _file_digest(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return hashlib.sha256(handle.read(MAX_SCRIPT_BYTES)).hexdigest()[:16]
    except OSError:
        return "unreadable"


def _counted(commands: Iterable[ProjectCommand]) -> list[str]:
    labels = {
        "hook": "hook",
        "mcp": "MCP server",
        "permissions": "permission setting",
        "sandbox": "sandbox setting",
        "endpoint": "endpoint setting",
        "grant": "tool grant",
    }
    counts: dict[str, int] = {}
    for command in commands:
        counts[command.kind] = counts.get(command.kind, 0) + 1
    return [f"{n} {labels[k]}{'s' if n != 1 else ''}" for k, n in counts.items()]
