"""Start-up: from a folder and the command-line flags to a ready runtime, for every front end.

The terminal UI, ``cairn -p``, ``cairn --acp`` and ``cairn serve`` start the same way: read the
settings files (collecting their warnings), resolve the model endpoint, configure telemetry,
choose the session to resume and build the :class:`~cairn.session.runtime.Runtime`. A failure is
a :class:`StartupError` whose message is for the user and whose ``exit_code`` is the process's;
each front end only decides how to report it (a stderr prefix, an ACP auth method, the daemon's
listen-first boot).

It comes in two steps so a front end can stop between them: :func:`load_startup` reads and
checks, and does not import the runtime (``cairn serve`` runs it before it listens);
:meth:`Startup.open_runtime` builds the runtime. :func:`open_runtime` does both and picks the
session to resume, for the terminal UI and ``cairn -p``. The way out is one call too:
:meth:`Runtime.aclose` with ``memory_wait``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cairn._startup import startup_done
from cairn.config.loader import (
    Endpoint,
    NoAuthError,
    SettingsError,
    load_settings,
    resolve_endpoint,
)
from cairn.config.settings import Settings
from cairn.exit_codes import ExitCode
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.session.runtime import Runtime

__all__ = [
    "NO_EARLIER_SESSION",
    "OpenedRuntime",
    "Startup",
    "StartupError",
    "load_startup",
    "open_runtime",
]

# --continue in a project without recordings starts a new session (as Qwen Code does) and says so.
NO_EARLIER_SESSION = "No earlier session to continue in this project; starting a new one."


class StartupError(Exception):
    """Start-up cannot go on: ``str(error)`` tells the user why, ``exit_code`` ends the process."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# Values rather than NamedTuples or dataclasses: nothing compiled when their classes are made.


class Startup(Value):
    """What a front end starts from: the merged settings, their warnings and the model endpoint."""

    cwd: Path
    settings: Settings
    endpoint: Endpoint | None  # None only when loaded with require_endpoint=False
    warnings: tuple[str, ...] = ()
    auth_error: str | None = None  # why there is no endpoint: what to set

    def open_runtime(self, *, connection_pools: int = 1, record_chats: bool = True) -> Runtime:
        """The runtime over these settings and endpoint (``NO_AUTH`` when there is none)."""
        if self.endpoint is None:
            message = self.auth_error or "No model endpoint is configured."
            raise StartupError(message, ExitCode.NO_AUTH)
        from cairn.session.runtime import Runtime

        return Runtime.from_endpoint(
            cwd=self.cwd,
            settings=self.settings,
            endpoint=self.endpoint,
            record_chats=record_chats,
            connection_pools=connection_pools,
        )


def load_startup(
    cwd: Path,
    *,
    model: str | None = None,
    max_session_turns: int | None = None,
    require_endpoint: bool = True,
    configure_telemetry: bool = True,
) -> Startup:
    """Read the settings for ``cwd`` and resolve the model endpoint.

    ``model`` and ``max_session_turns`` are the command line's overrides. Without
    ``require_endpoint`` a missing endpoint is not an error: ``auth_error`` says what to set
    (``cairn --acp`` still serves, and explains it when a session is asked for).
    ``configure_telemetry`` applies the settings' telemetry to the process: once, at its start.
    """
    try:
        loaded = load_settings(cwd)
    except SettingsError as exc:
        raise StartupError(str(exc), ExitCode.CONFIG) from None
    settings = loaded.settings
    if max_session_turns is not None:
        settings.model.max_session_turns = max_session_turns
    endpoint, auth_error = None, None
    try:
        endpoint = resolve_endpoint(settings, model=model)
    except NoAuthError as exc:
        if require_endpoint:
            raise StartupError(str(exc), ExitCode.NO_AUTH) from None
        auth_error = str(exc)
    if configure_telemetry:
        from cairn import telemetry

        telemetry.configure(enabled=settings.telemetry.enabled, outfile=settings.telemetry.outfile)
    warnings = (*loaded.warnings, *_sandbox_warnings(settings))
    return Startup(cwd, settings, endpoint, warnings, auth_error)


def _sandbox_warnings(settings: Settings) -> list[str]:
    """A sandbox asked for that cannot run: said once at start, then each command refuses."""
    if not settings.tools.sandbox.enabled and "CAIRN_SANDBOX" not in os.environ:
        return []  # not asked for: the tools stay unimported (cairn serve boots before them)
    from cairn.tools.sandbox import bwrap_problem, sandbox_requested

    if not sandbox_requested(settings.tools.sandbox):
        return []
    problem = bwrap_problem()
    if problem is None:
        return []
    return [f"the shell sandbox is on but {problem}: shell commands will be refused"]


class OpenedRuntime(Value):
    """A runtime ready for its first session, and what the user should be told first."""

    runtime: Runtime
    warnings: tuple[str, ...]  # the settings' warnings, then a --continue that found nothing
    resume: str | None  # the session to open: --resume's, --continue's latest, or None (new)


def open_runtime(
    cwd: Path,
    *,
    model: str | None = None,
    max_session_turns: int | None = None,
    resume: str | None = None,
    continue_latest: bool = False,
) -> OpenedRuntime:
    """Everything the terminal UI and ``cairn -p`` do before their first session.

    ``resume`` must name a recorded session of the project (``BAD_INPUT`` otherwise), checked
    before anything else starts. ``continue_latest`` picks the project's newest session; with
    none recorded yet, a new session starts and :data:`NO_EARLIER_SESSION` is among the warnings.
    """
    startup = load_startup(cwd, model=model, max_session_turns=max_session_turns)
    warnings = list(startup.warnings)
    chosen = _session_to_resume(cwd, resume, continue_latest, warnings)
    runtime = startup.open_runtime()
    warnings += _certificate_warnings()
    opened = OpenedRuntime(runtime, tuple(warnings), chosen)
    startup_done()  # the collector as usual from here (cairn._startup)
    return opened


def _certificate_warnings() -> list[str]:
    """An unusable ``NODE_EXTRA_CA_CERTS``: said at start in the terminal UI and ``cairn -p``
    (``cairn --acp`` and ``cairn serve`` print the debug log's warnings on stderr)."""
    from cairn.llm import extra_ca_warning  # loaded with the runtime's provider by now

    problem = extra_ca_warning()
    return [problem] if problem is not None else []


def _session_to_resume(
    cwd: Path, resume: str | None, continue_latest: bool, warnings: list[str]
) -> str | None:
    if not resume and not continue_latest:
        return None  # the common start: no recording is looked at (or its reader imported)
    from cairn.config.paths import chats_dir, project_root
    from cairn.recording.listing import latest_session, session_path
    from cairn.session.runtime import SessionNotFound

    chats = chats_dir(project_root(cwd))
    if resume:
        if session_path(chats, resume) is None:
            raise StartupError(str(SessionNotFound(resume)), ExitCode.BAD_INPUT)
        return resume
    latest = latest_session(chats)
    if latest is None:
        warnings.append(NO_EARLIER_SESSION)
        return None
    return latest.session_id
