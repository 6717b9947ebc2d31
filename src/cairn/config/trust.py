"""Trusted folders: a project's own files may not run commands, widen permissions or send
anything anywhere new until its folder is trusted.

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

What a project settings file may set without trust is an allowlist,
:data:`UNTRUSTED_PROJECT_KEYS`; every other key it sets needs trust. The decision is made on
the file as the settings read it (validated, ``$VAR`` expanded), never on its raw keys, and the
settings read a key only in its camelCase spelling, so no spelling of a key escapes the list.

A project file can never trust itself: its ``security`` trust keys are ignored. The settings
loader keeps only the allowed keys of an untrusted project file (the hooks then never run) and
shows :attr:`ProjectTrust.notice`; the MCP manager skips ``.mcp.json`` unless
``project_trust(root).trusted``.

A process deciding again and again (a session each) keeps what a project's files would run
while every file the check read is unchanged (:data:`COMMANDS_CACHE`); the rest of the decision
(the user's settings, ``trusted-folders.json``, ``--trust``) is read every time.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from cairn.config.claude_hooks import CLAUDE_PROJECT_FILES
from cairn.config.extension_folders import MAX_DEPTH
from cairn.config.file_stamps import Inputs, StampedCache
from cairn.config.loader import (
    SettingsError,
    read_settings_file,
    referenced_variables,
    settings_as_read,
)
from cairn.config.paths import cairn_home, find_git_root, user_settings_path
from cairn.config.programs import programs
from cairn.config.settings import Settings
from cairn.config.untrusted import (
    PROJECT_IGNORED,
    PROJECT_IGNORED_KEYS,
    UNTRUSTED_PROJECT_KEYS,
    allowed_part,
    decisions,
)
from cairn.fsutil import atomic_write_json
from cairn.values import Value
from cairn.vocabulary.terminal import escape_for_terminal

__all__ = [
    "COMMANDS_CACHE",
    "PROJECT_IGNORED",
    "TRUST_FILE_NAME",
    "UNTRUSTED_PROJECT_KEYS",
    "ProjectCommand",
    "ProjectTrust",
    "TrustFileError",
    "commands_kept",
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
    "trusted_this_run",
]

TRUST_FILE_NAME = "trusted-folders.json"
# What each project's files would run, kept while every file the check read is unchanged
# (:mod:`cairn.config.file_stamps`); the decision on it is made again on every call.
COMMANDS_CACHE: StampedCache[tuple[ProjectCommand, ...]] = StampedCache()
_SETTINGS = ".cairn/settings.json"
_MCP_JSON = ".mcp.json"
_run_trust = {"granted": False}
MAX_SCRIPT_BYTES = 16 << 20  # of a project script read into the fingerprint

# Command and skill files of a project whose ``allowed-tools`` grant tools (the extensions).
_GRANT_FOLDERS = tuple(
    f"{dot}/{kind}"
    for dot in (".cairn", ".claude", ".qwen", ".agents")
    for kind in ("commands", "skills")
)
MAX_FILES_NAMED = 4  # files a notice names before "and N more"
# How a hook command names the project folder (the variables hooks get).
_PROJECT_DIR_NAMES = tuple(
    form
    for name in ("CAIRN_PROJECT_DIR", "CLAUDE_PROJECT_DIR")
    for form in (f"${{{name}}}", f"${name}")
)

CommandKind = Literal[
    "hook", "mcp", "permissions", "sandbox", "endpoint", "file", "setting", "grant", "settings"
]
_MAX_SHOWN = 200  # characters of a value the listing shows
# Reasons a folder is trusted with exactly its listed commands (else: whatever it defines).
_REVIEWED = frozenset({"no commands", "trusted"})


class TrustFileError(Exception):
    """``trusted-folders.json`` cannot be written; the message names the file."""


class ProjectCommand(Value):
    """One thing a project's files would make cairn run or allow."""

    kind: CommandKind
    source: str  # ".cairn/settings.json" or ".mcp.json"
    key: str  # "hooks.PreToolUse", "mcpServers.github", "tools.approvalMode", ...
    text: str  # the command line, the URL, the value
    digest: str = ""  # of everything written at the key, for the fingerprint
    scripts: tuple[str, ...] = ()  # "path sha256" of each project file the command runs

    def describe(self) -> str:
        """One line for a terminal: control characters and bidi overrides shown, not run."""
        return escape_for_terminal(f"{self.source} {self.key}: {self.text}", keep_newlines=False)


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

    def grants(self, path: Path, tools: Iterable[str]) -> bool:
        """May the project's file ``path``, as loaded, grant ``tools``? In a folder trusted
        whatever it defines, yes; in one trusted with its commands, only a grant among those
        commands: one the check did not see (or saw otherwise) is never applied."""
        if not self.trusted:
            return False
        if self.reason not in _REVIEWED:
            return True
        try:
            source = path.absolute().relative_to(self.folder).as_posix()
        except ValueError:
            return False  # not a file of this project: not one the check listed
        text = ", ".join(tools)
        return any(
            (c.kind, c.source, c.text) == ("grant", source, text) for c in self.commands
        )

    @property
    def notice(self) -> str:
        """The one message an untrusted folder gets: what is off and how to trust it."""
        if self.trusted:
            return ""
        what = ", ".join(_counted(self.commands))
        since = " changed since you trusted it, so" if self.changed else ""
        folder = escape_for_terminal(str(self.folder), keep_newlines=False)
        return (
            f"{folder} is not a trusted folder: its project settings{since} are not used "
            f"({what}). Review them ({self._files()}), then trust it with `cairn trust`, "
            "run with `--trust`, or list it in security.trustedFolders of your user settings."
        )

    def _files(self) -> str:
        files = list(dict.fromkeys(c.source for c in self.commands))
        shown = escape_for_terminal(", ".join(files[:MAX_FILES_NAMED]), keep_newlines=False)
        return shown + (
            f" and {len(files) - MAX_FILES_NAMED} more" if len(files) > MAX_FILES_NAMED else ""
        )


def project_root_of(path: Path) -> Path:
    """The folder whose trust counts for ``path``: its git root, else the folder itself."""
    return find_git_root(path) or path.resolve()


def trust_this_run(granted: bool = True) -> None:
    """``--trust``: every folder's project commands may run in this process (not recorded)."""
    _run_trust["granted"] = granted


def trusted_this_run() -> bool:
    """Whether ``--trust`` was given to this process (its extract worker is given it too)."""
    return bool(_run_trust.get("granted"))


def trust_file_path() -> Path:
    return cairn_home() / TRUST_FILE_NAME


# ----- what a project would run -----


def project_commands(
    folder: Path,
    project_settings: Mapping[str, Any] | None = None,
    validated: Settings | None = None,
) -> list[ProjectCommand]:
    """What ``folder``'s ``.cairn/settings.json`` and ``.mcp.json`` would run or allow: every
    key of the settings file outside :data:`UNTRUSTED_PROJECT_KEYS`, every hook of its Claude
    Code settings files (``.claude/settings.json``, ``.claude/settings.local.json``), every server
    of ``.mcp.json``, every ``allowed-tools`` grant of its command and skill files.

    ``project_settings`` / ``validated``: the settings file already read, and as the settings
    read it (else both are done here). A file the settings refuse is one command: the loader
    refuses it too, and trusting it must not carry over to what it is fixed to say.
    """
    found = list(_project_settings_commands(folder, project_settings, validated))
    found += _claude_hook_commands(folder)
    found += _mcp_json_commands(folder / _MCP_JSON)
    found += _grant_commands(folder)
    return [_with_scripts(command, folder) for command in found]


def _project_settings_commands(
    folder: Path, raw: Mapping[str, Any] | None, validated: Settings | None
) -> list[ProjectCommand]:
    path = folder / _SETTINGS
    try:
        if raw is None:
            if not os.path.lexists(path):
                return []
            raw = read_settings_file(path)
        if validated is None:
            validated = settings_as_read(raw, str(path))
    except SettingsError as exc:
        problem = str(exc).splitlines()[0][:_MAX_SHOWN]
        return [ProjectCommand("settings", _SETTINGS, "(unusable)", problem, _file_digest(path))]
    return list(_settings_commands(raw, validated))


def _claude_hook_commands(folder: Path) -> list[ProjectCommand]:
    """Each hook of the project's Claude Code settings files, read as the loader reads them
    (:mod:`cairn.config.claude_hooks`), whatever ``claudeHooks`` says."""
    from cairn.config.claude_hooks import project_claude_hooks

    return [
        ProjectCommand("hook", hooks.source, f"hooks.{event}", text, _digest(group))
        for hooks in project_claude_hooks(folder)
        for event, text, group in hooks.commands()
    ]


def _with_scripts(command: ProjectCommand, folder: Path) -> ProjectCommand:
    """A command that runs a file of the project is trusted with that file's content: editing
    the script (a pull, a rebase) asks again, as editing the command does."""
    if command.kind not in ("hook", "mcp"):
        return command
    root = folder.resolve()
    scripts = []
    for path in _program_paths(command, root):
        with contextlib.suppress(OSError, ValueError):
            resolved = path.resolve()
            if root in resolved.parents and resolved.is_file():
                relative = resolved.relative_to(root).as_posix()
                scripts.append(f"{relative} {_file_digest(resolved)}")
    if not scripts:
        return command
    return ProjectCommand(
        command.kind, command.source, command.key, command.text, command.digest, tuple(scripts)
    )


def _program_paths(command: ProjectCommand, root: Path) -> list[Path]:
    """The files a hook or server command runs (its programs and scripts), as paths."""
    paths: list[Path] = []
    if command.kind not in ("hook", "mcp"):
        return paths
    for word in programs(command.text):
        for name in _PROJECT_DIR_NAMES:
            word = word.replace(name, str(root))
        paths.append(Path(word) if os.path.isabs(word) else root / word)
    return paths


def _settings_commands(raw: Mapping[str, Any], validated: Settings) -> Iterable[ProjectCommand]:
    """What the project file sets outside :data:`UNTRUSTED_PROJECT_KEYS`: decided on
    ``validated`` (the file as the settings read it), shown as ``raw`` writes it."""
    for decision in decisions(validated, raw):
        if decision.allowed:
            continue
        written = _at(raw, decision.path)
        listed: list[ProjectCommand] = []
        if decision.key == "mcpServers":
            listed += _servers(written, _SETTINGS)
        elif decision.path[0] == "hooks" and len(decision.path) == 2:
            listed += (
                ProjectCommand("hook", _SETTINGS, decision.key, command, _digest(written))
                for command in _hook_commands(written)
            )
        # A key that needs trust is always listed, even when it names no command (yet).
        yield from listed or [
            ProjectCommand(
                _kind(decision.key), _SETTINGS, decision.key, _shown(written), _digest(written)
            )
        ]


# How the listing groups a key that needs trust, by the key or a section above it.
_KINDS: Mapping[str, CommandKind] = {
    "hooks": "hook",
    "tools.approvalMode": "permissions",
    "permissions": "permissions",
    "tools.passSecretsToShell": "permissions",
    "disableAllHooks": "permissions",
    "agents.maxConcurrent": "permissions",
    "tools.sandbox": "sandbox",
    "security": "endpoint",
    "tools.webSearch": "endpoint",
    "tools.webFetch": "endpoint",
    "model.available": "endpoint",
    "memory": "endpoint",
    "env": "endpoint",
    "proxy": "endpoint",  # the model's requests, with the user's key, through the project's host
    "telemetry.outfile": "file",
}


def _kind(key: str) -> CommandKind:
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        kind = _KINDS.get(".".join(parts[:end]))
        if kind is not None:
            return kind
    return "setting"


def _at(raw: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` as the file writes it; where the file writes a section in short
    (``"sandbox": false``), that short value."""
    for part in path:
        if not isinstance(raw, Mapping) or part not in raw:
            return raw
        raw = raw[part]
    return raw


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return json.dumps(value, sort_keys=True)[:_MAX_SHOWN]


def _digest(value: Any) -> str:
    """Of everything written at a key (a hook's ``env``, a server's ``cwd`` too), so a change the
    short text does not show still asks again."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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
            text = json.dumps(servers)[:200]
            yield ProjectCommand("mcp", source, "mcpServers", text, digest=_digest(servers))
        return
    for name, entry in servers.items():
        yield ProjectCommand(
            "mcp", source, f"mcpServers.{name}", _server_text(entry), digest=_digest(entry)
        )


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
    """The ``allowed-tools`` of the project's command and skill files, each read as its loader
    reads it (:mod:`cairn.config.extension_files`: the same files, caps, parser and key): each
    lets its command run tools without asking. A folder holding more files than the loader
    reads is listed too: what cairn was not shown is not trusted silently."""
    bases = [folder / relative for relative in _GRANT_FOLDERS]
    bases = [base for base in bases if base.is_dir()]
    if not bases:
        return []
    from cairn.config import extension_files as files  # only for a project with such folders

    found: list[ProjectCommand] = []
    for base in bases:
        if base.name == "skills":
            limit = files.MAX_SKILLS_PER_FOLDER
            paths = files.skill_files(base, limit + 1)
            over = _entries(base) > limit
        else:
            limit = files.MAX_FILES_PER_FOLDER
            paths = list(files.walk_files(base, files.COMMAND_SUFFIXES, limit + 1))
            over = len(paths) > limit
        for path in paths[:limit]:
            try:
                tools = files.read_grant(path)
            except (files.ExtensionFileError, files.FrontMatterError):
                continue  # the loader skips it: it grants nothing
            if tools:
                source = path.relative_to(folder).as_posix()
                text = ", ".join(tools)
                found.append(ProjectCommand("grant", source, files.GRANT_KEY, text))
        if over:
            source = base.relative_to(folder).as_posix()
            text = f"more than {limit} entries: cairn reads the first {limit}"
            found.append(ProjectCommand("grant", source, "(too many files)", text))
    return found


def _entries(base: Path) -> int:
    try:
        return sum(1 for entry in os.scandir(base) if not entry.name.startswith("."))
    except OSError:
        return 0


def fingerprint(commands: Iterable[ProjectCommand]) -> str:
    items = sorted((c.kind, c.source, c.key, c.text, c.digest, *c.scripts) for c in commands)
    return "sha256:" + hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


# ----- the decision -----


def project_trust(
    folder: Path,
    *,
    user_settings: Mapping[str, Any] | None = None,
    project_settings: Mapping[str, Any] | None = None,
    validated: Settings | None = None,
) -> ProjectTrust:
    """May ``folder``'s project commands run? (See the module docstring.)

    ``user_settings`` / ``project_settings``: the raw files already read (else read here);
    ``validated``: the project file as the settings read it.
    """
    root = project_root_of(folder)
    if project_settings is None and validated is None:
        commands = COMMANDS_CACHE.get(
            _cache_key(root),
            lambda: tuple(project_commands(root)),
            lambda found: _read_by_check(root, found),
        )
    else:  # the caller's reading of the settings file decides (one reading)
        commands = tuple(project_commands(root, project_settings, validated))
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


def commands_kept(folder: Path) -> bool:
    """Is the listing of ``folder``'s commands kept, with none of its files changed since?"""
    return COMMANDS_CACHE.kept(_cache_key(project_root_of(folder)))


def _cache_key(root: Path) -> tuple[str, str]:
    # And the home folder: at the home folder, .claude/settings.json is the user's own file.
    return (str(root), os.path.expanduser("~"))


def _read_by_check(root: Path, commands: Iterable[ProjectCommand]) -> Inputs:
    """Every path :func:`project_commands` reads for ``root`` (the settings files in both
    spellings, ``.mcp.json``, the command and skill folders, the scripts ``commands`` run),
    whether there or not, and the environment variables the settings file names: what its
    answer is kept with in :data:`COMMANDS_CACHE`."""
    inputs = Inputs()
    top = inputs.resolved(str(root))
    for relative in (".", _SETTINGS, _MCP_JSON, *CLAUDE_PROJECT_FILES):
        inputs.file(os.path.join(top, relative))
    for relative in _GRANT_FOLDERS:
        inputs.tree(os.path.join(top, relative), MAX_DEPTH)
    for command in commands:
        for path in _program_paths(command, root):
            inputs.file(inputs.resolved(str(path)))
    with contextlib.suppress(SettingsError):  # unusable: it reads no variable
        settings = Path(top, _SETTINGS)
        raw = read_settings_file(settings) if os.path.lexists(settings) else {}
        for name in sorted(referenced_variables(raw)):
            inputs.variable(name)  # `$VAR`: the file as the settings read it
    return inputs


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


def strip_untrusted(
    project_settings: Mapping[str, Any], trust: ProjectTrust, validated: Settings | None = None
) -> dict[str, Any]:
    """The project file as far as ``trust`` allows: all of it but its trust keys in a trusted
    folder, else only what :data:`UNTRUSTED_PROJECT_KEYS` allows, as decided on ``validated``
    (the file as the settings read it; made here when not given)."""
    raw = json.loads(json.dumps(project_settings))  # a deep copy of plain JSON
    if trust.trusted:
        security = raw.get("security")
        if isinstance(security, dict):
            for key in PROJECT_IGNORED_KEYS:
                security.pop(key, None)
        return raw
    if validated is None:
        validated = settings_as_read(raw, _SETTINGS)
    return allowed_part(raw, validated)


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
        "file": "file setting",
        "setting": "other setting",
        "grant": "tool grant",
        "settings": "unusable settings file",
    }
    counts: dict[str, int] = {}
    for command in commands:
        counts[command.kind] = counts.get(command.kind, 0) + 1
    return [f"{n} {labels[k]}{'s' if n != 1 else ''}" for k, n in counts.items()]
