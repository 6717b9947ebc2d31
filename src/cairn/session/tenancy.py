"""What keeps the tenants of one daemon apart (``cairn serve --tenant-header``, #15, #24).

Tenants share the daemon's process, workspace, settings, model endpoint and configured MCP
servers; each has its own sessions, recordings and memory (:meth:`Runtime.for_tenant`). The
file tools cannot leave the workspace, but a shell command could read any file the daemon can,
so a tenant's shell commands always run in the bubblewrap sandbox, whatever the settings say:

- cairn's home (every tenant's recordings, debug logs, checkpoints) and the memory base (every
  tenant's memory) are hidden, as the user's secrets are;
- no network (``none``): the host's loopback serves every tenant alike (the daemon itself, a
  PostgreSQL holding all tenants' memory, a cloud metadata address); ``web_fetch`` may not
  reach private addresses either.

:func:`tenancy_problems` lists what would break that promise, so that a daemon refuses to start
in tenant mode rather than serve tenants it cannot keep apart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.config.paths import cairn_home

if TYPE_CHECKING:
    from cairn.config.settings import Settings
    from cairn.tools.sandbox import RunLater, SandboxPolicy

__all__ = ["tenancy_problems", "tenant_sandbox_policy", "tenant_shared_folders"]

_FALSE = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"1", "true", "yes", "on"})


def tenant_shared_folders(environ: Mapping[str, str] = os.environ) -> tuple[Path, ...]:
    """The folders holding every tenant's files: cairn's home and the memory base."""
    from cairn.memory.paths import memory_base

    return tuple(dict.fromkeys((cairn_home(environ), memory_base(environ))))


def tenant_sandbox_policy(
    settings: Settings,
    workspace: Path,
    environ: Mapping[str, str] = os.environ,
    *,
    run_later: Sequence[RunLater] = (),
) -> SandboxPolicy:
    """How a tenant's shell commands are fenced: the settings' sandbox, turned on, with no
    network and every tenant's folders hidden (``run_later``: as for any sandbox)."""
    from cairn.tools.sandbox import SANDBOX_ENV, sandbox_policy

    policy = sandbox_policy(
        settings.tools.sandbox,
        workspace=workspace,
        environ={**environ, SANDBOX_ENV: "1"},
        run_later=run_later,
    )
    assert policy is not None  # asked for above
    hidden = tuple(dict.fromkeys((*policy.hidden, *tenant_shared_folders(environ))))
    return replace(policy, network="none", hidden=hidden)


def tenancy_problems(
    settings: Settings, workspace: Path, environ: Mapping[str, str] = os.environ
) -> list[str]:
    """Why the tenants of a daemon serving ``workspace`` could reach each other's files; empty
    when they cannot (see the module docs)."""
    from cairn.memory.paths import LOCAL_ENV
    from cairn.tools.sandbox import SANDBOX_ENV, bwrap_problem

    problems: list[str] = []
    if environ.get(LOCAL_ENV, "").strip().lower() in _TRUE:
        problems.append(
            f"{LOCAL_ENV}=1 keeps memory in the workspace, which every tenant shares: unset it"
        )
    if environ.get(SANDBOX_ENV, "").strip().lower() in _FALSE:
        problems.append(
            f"{SANDBOX_ENV}=0 turns the shell sandbox off, and a tenant's shell commands must "
            "run in it: unset it"
        )
    problem = bwrap_problem()
    if problem is not None:
        problems.append(f"a tenant's shell commands must run in the sandbox, but {problem}")
    sandbox = settings.tools.sandbox
    if sandbox.network != "none":
        problems.append(
            f"tools.sandbox.network is {sandbox.network!r}: a tenant's commands would reach "
            "the services of this machine that serve every tenant (this daemon, a database "
            "holding every tenant's memory, a cloud metadata address); set it to 'none'"
        )
    if settings.tools.web_fetch.allow_private_addresses:
        problems.append(
            "tools.webFetch.allowPrivateAddresses is on: a tenant's web_fetch would reach this "
            "daemon and the other services of this machine's network; turn it off"
        )
    real = workspace.resolve()
    shared = tenant_shared_folders(environ)
    for folder in shared:
        if folder == real or real in folder.parents:
            problems.append(
                f"{folder} holds every tenant's files and lies inside the workspace {real}, "
                "which the file tools of every tenant read: set CAIRN_HOME (and "
                "CAIRN_MEMORY_BASE_DIR) to a folder outside it"
            )
    problems += _reexposed(settings, real, shared)
    return problems


def _reexposed(settings: Settings, workspace: Path, shared: tuple[Path, ...]) -> list[str]:
    """``tools.sandbox`` paths that would make a hidden tenant folder visible again."""
    from cairn.tools.sandbox import SANDBOX_ENV, sandbox_policy

    policy = sandbox_policy(settings.tools.sandbox, workspace=workspace, environ={SANDBOX_ENV: "1"})
    assert policy is not None
    problems = []
    for key, paths in (
        ("writablePaths", policy.writable),
        ("readOnlyPaths", policy.read_only),
    ):
        for path in paths:
            if any(path == f or f in path.parents or path in f.parents for f in shared):
                problems.append(
                    f"tools.sandbox.{key} lists {path}, which would show a tenant's commands "
                    "the files of every tenant: remove it"
                )
    return problems
