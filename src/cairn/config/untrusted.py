"""What a project's ``.cairn/settings.json`` may set in a folder that is not trusted
(:mod:`cairn.config.trust`): an allowlist of keys, each with the test its value must pass,
decided on the file as the settings read it (validated, camelCase only), never on its raw keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cairn.config.sections import Section
from cairn.values import Value

__all__ = [
    "PROJECT_IGNORED",
    "PROJECT_IGNORED_KEYS",
    "UNTRUSTED_PROJECT_KEYS",
    "Decision",
    "allowed_part",
    "decisions",
]


def _serves_on_the_main_endpoint(available: Any) -> bool:
    """``model.available`` names models only: no entry with its own wire, URL or key, which
    would receive the user's key (or another variable's value) once chosen."""
    if not isinstance(available, list):
        return True  # "auto": the main endpoint's own list
    return all(
        isinstance(entry, str)
        or (entry.auth_type is None and entry.base_url is None and entry.env_key is None)
        for entry in available
    )


def _asks_before_running(mode: Any) -> bool:
    return mode in ("plan", "default")


# The keys a project's ``.cairn/settings.json`` may set in a folder that is not trusted (dotted,
# as files spell them), each with the test its value must pass (None: any valid value). A key
# names a whole section or one setting; every other key a file sets needs the folder trusted.
# What is here can neither run anything, nor let a tool run without asking, nor send a request,
# a key or a memory anywhere new, nor write outside the project, nor loosen the sandbox, nor
# run more at once than the defaults.
UNTRUSTED_PROJECT_KEYS: Mapping[str, Callable[[Any], bool] | None] = {
    "general": None,
    "fastModel": None,
    "model.name": None,
    "model.available": _serves_on_the_main_endpoint,
    "model.structuredOutput": None,
    "model.supportsImages": None,
    "model.promptCaching": None,
    "model.maxSessionTurns": None,
    "model.sessionTokenLimit": None,
    "model.skipLoopDetection": None,
    "model.skipStartupContext": None,
    "model.chatCompression": None,
    "model.generationConfig": None,
    "context": None,  # names of context files: inside the workspace only (context_files.py)
    "memory.backend": None,  # the database itself (its DSN) is the user's: memory.postgres.dsn
    "memory.postgres.pollSeconds": None,
    "memory.enableManagedAutoMemory": None,
    "memory.enableManagedAutoDream": None,
    "memory.agentTimeoutMinutes": None,
    "memory.agentMaxTurns": None,
    "memory.headlessExtractWaitSeconds": None,
    "memory.minAvailableMemoryMb": None,
    "memory.semanticCandidates": None,  # a local model of an installed package: nothing sent
    "tools.approvalMode": _asks_before_running,
    "tools.shellTimeoutSeconds": None,
    "tools.webFetch.allowPrivateAddresses": lambda allow: allow is False,
    "tools.webSearch.provider": None,  # the provider's own address, with the user's own key
    "tools.webSearch.maxResults": None,
    "tools.sandbox.enabled": lambda enabled: enabled is True,
    "tools.sandbox.network": lambda network: network == "none",
    "tools.sandbox.hiddenPaths": None,
    "permissions.ask": None,
    "permissions.deny": None,
    "telemetry.enabled": None,
    "mcp.discoveryTimeoutMs": None,
    "mcp.allowed": None,
    "mcp.excluded": None,
    "commands": None,
    "skills": None,
    "agents.enabled": None,
    "agents.importFrom": None,
    "agents.maxTurns": None,
    "agents.maxConcurrent": lambda most: most <= _DEFAULT_MAX_CONCURRENT_AGENTS,
    "notifications": None,
}
_DEFAULT_MAX_CONCURRENT_AGENTS = 4  # AgentsSettings.max_concurrent's default
# What a project file may never say about trust (only the user's own settings can): ignored,
# trusted folder or not.
PROJECT_IGNORED = frozenset({"security.trustedFolders", "security.folderTrust"})
PROJECT_IGNORED_KEYS = tuple(key.rsplit(".", 1)[1] for key in sorted(PROJECT_IGNORED))


class Decision(Value):
    """One key a project file sets, as the settings read it, and whether trust is needed."""

    key: str  # dotted, as files spell it: "tools.approvalMode"
    path: tuple[str, ...]  # the same key, one part per level
    value: Any  # the validated value
    allowed: bool


def decisions(model: Section, written: Any, path: tuple[str, ...] = ()) -> Iterator[Decision]:
    """Every key a project file sets, down to the keys of :data:`UNTRUSTED_PROJECT_KEYS` or to
    single settings, each decided against that list on ``model`` (the file as the settings read
    it). ``written`` is the same part of the file as written: a key is set when it is there in
    the one spelling the settings read; anything else (an unknown key, a Python name like
    ``approval_mode``) sets nothing and is not listed."""
    for name, key in _keys_set(model, written):
        here = (*path, key)
        dotted = ".".join(here)
        value = getattr(model, name)
        inner = written.get(key) if isinstance(written, Mapping) else None
        if dotted in PROJECT_IGNORED:
            continue
        if dotted in UNTRUSTED_PROJECT_KEYS:
            yield Decision(dotted, here, value, _passes(dotted, value))
        elif isinstance(value, Section):
            yield from decisions(value, inner, here)
        else:
            yield Decision(dotted, here, value, False)


def _keys_set(model: Section, written: Any) -> list[tuple[str, str]]:
    """``(field name, key)`` of each field of ``model`` that ``written`` sets: its key in the
    file's spelling, as the settings look it up (``by_name=False``). A section written in short
    (``"sandbox": false``) sets what its validator made of it."""
    fields = type(model).model_fields
    keys = [(name, info.alias or name) for name, info in fields.items()]
    if isinstance(written, Mapping):
        return [(name, key) for name, key in keys if key in written]
    made = model.model_fields_set - set(model.model_extra or {})
    return [(name, key) for name, key in keys if name in made]


def _passes(key: str, value: Any) -> bool:
    test = UNTRUSTED_PROJECT_KEYS[key]
    return test is None or bool(test(value))


def allowed_part(
    raw: Mapping[str, Any], model: Section, path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The part of ``raw`` (a project file) that :func:`_decisions` allows on ``model`` (the
    same file as the settings read it): the keys the settings read by their spelling in files,
    each kept as written or dropped."""
    fields = type(model).model_fields
    names = {info.alias or name: name for name, info in fields.items()}
    kept: dict[str, Any] = {}
    for key, written in raw.items():
        name = names.get(key)
        if name is None:
            continue  # unknown to the settings: nothing reads it
        here = (*path, key)
        dotted = ".".join(here)
        value = getattr(model, name)
        if dotted in PROJECT_IGNORED:
            continue
        if dotted in UNTRUSTED_PROJECT_KEYS:
            if _passes(dotted, value):
                kept[key] = written
        elif isinstance(value, Section):
            if isinstance(written, Mapping):
                inner = allowed_part(written, value, here)
                if inner:
                    kept[key] = inner
            elif all(d.allowed for d in decisions(value, written, here)):
                kept[key] = written  # a short form (`"sandbox": true`) of allowed keys
    return kept
