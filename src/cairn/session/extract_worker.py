"""``cairn -p``'s extraction in a worker of its own: the command returns once its answer is out.

Extract after a ``cairn -p`` turn is one or more model requests (seconds); waiting for it kept
the user's command (and the script running it) after the answer. Instead, for a runtime whose
``extract_in_worker`` is set, the turn's extraction is *handed off*: the memory manager notes the
session pending (``extract-pending.json``, as for an extraction cut short) without starting it,
and :func:`start_workers`, called once the answer is written, claims the session
(:func:`cairn.memory.background.pending.claim_session`) and starts
``python -m cairn.session.extract_worker`` detached: a session of its own, stdin, stdout and
stderr on ``/dev/null`` (a pipe reading the command's output ends with the command), the claim's
lock inherited. The worker reads the same settings (``--trust`` passed on) and model, extracts
the session from its recording under the memory roots' locks as an in-process extraction does,
within ``memory.headlessExtractWaitSeconds``, and drops it from the pending list; then it runs
Dream when Dream's gates pass (``cairn -p`` itself schedules none: it would be cancelled at exit,
so a project used only through ``-p`` never consolidated), and exits.

Nothing is lost when the worker cannot run: a worker that fails to start, dies or times out
releases the claim with its process, and the session is still pending, so the project's next
extraction (any front end) runs it from the recording. While the worker runs, other processes
leave the claimed session to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cairn._startup import exit_now, pause_collection, startup_done
from cairn.debug_log import get_logger, set_process_session

if TYPE_CHECKING:
    from cairn.session.runtime import Runtime

__all__ = ["main", "start_workers"]

_log = get_logger("MEMORY")
DREAM_WAIT_SECONDS = 15 * 60.0  # beyond the Dream agent's own time limit (5 min by default)


def start_workers(runtime: Runtime, *, model: str | None = None) -> list[str]:
    """Start a worker for each extraction this runtime handed off; the sessions left to this
    process because their worker could not start (they stay pending meanwhile)."""
    if not runtime.memory_enabled:
        return []
    from cairn.memory.background.pending import claim_session

    manager = runtime.memory_manager()
    left: list[str] = []
    for session_id in manager.background.take_handed_off():
        try:
            claim = claim_session(manager.roots.state_dir, session_id)
        except (OSError, ValueError) as error:
            _log.warning(f"could not claim the extraction of {session_id}: {error!r}")
            left.append(session_id)
            continue
        if claim is None:  # another process extracts it already
            continue
        try:
            _spawn(runtime.cwd, session_id, claim.fd, model)
        except OSError as error:
            _log.warning(f"could not start the extract worker: {error!r}")
            claim.release()
            left.append(session_id)
            continue
        os.close(claim.fd)  # the worker holds the claim now, and removes its file
    return left


def _spawn(cwd: Path, session_id: str, claim_fd: int, model: str | None) -> None:
    command = [
        sys.executable, "-m", "cairn.session.extract_worker",
        "--session", session_id, "--claim-fd", str(claim_fd),
    ]  # fmt: skip
    if model:
        command += ["--model", model]
    from cairn.config.trust import trusted_this_run

    if trusted_this_run():  # `cairn -p --trust`: the same settings, read the same way
        command.append("--trust")
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(claim_fd,),
        start_new_session=True,  # no terminal's Ctrl+C or hang-up, no process group of ours
    )
    process.returncode = 0  # never waited for: it outlives this process by design


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # the worker's own: `cairn -p` imports this module for start_workers only

    parser = argparse.ArgumentParser(prog="python -m cairn.session.extract_worker")
    parser.add_argument("--session", required=True)
    parser.add_argument("--claim-fd", type=int, required=True)
    parser.add_argument("--model")
    parser.add_argument("--trust", action="store_true")
    args = parser.parse_args(argv)
    set_process_session(args.session)
    if args.trust:
        from cairn.config.trust import trust_this_run

        trust_this_run()
    try:
        return asyncio.run(_extract(Path.cwd(), args.session, args.claim_fd, args.model))
    except KeyboardInterrupt:
        return 130


async def _extract(cwd: Path, session_id: str, claim_fd: int, model: str | None) -> int:
    from cairn.memory.background.pending import CLAIMS_FOLDER, Claim
    from cairn.session.startup import StartupError, load_startup

    try:
        runtime = load_startup(cwd, model=model).open_runtime(record_chats=False)
    except StartupError as error:
        _log.warning(f"extract worker: {error}")
        return 1
    startup_done()
    claim: Claim | None = None
    try:
        if not runtime.memory_enabled:
            return 0
        manager = runtime.memory_manager()
        claim = Claim(manager.roots.state_dir / CLAIMS_FOLDER / f"{session_id}.lock", claim_fd)
        bound = runtime.settings.memory.headless_extract_wait_seconds
        try:
            await asyncio.wait_for(
                manager.background.extract_handed_off(session_id, runtime), bound
            )
        except TimeoutError:  # cut short: still pending, for the next extraction
            _log.warning(f"the handed-off extraction took over {bound} s and was stopped")
            return 1
        # Then Dream, when its gates pass: `cairn -p` stops at its answer, so a project used
        # only through it would never consolidate otherwise. Its agent's time limit bounds it.
        manager.schedule_dream(
            project_root=runtime.project_root, session_id=session_id, runtime=runtime
        )
        await manager.drain(DREAM_WAIT_SECONDS)
        return 0
    finally:
        with contextlib.suppress(Exception):
            await runtime.aclose()
        if claim is not None:
            claim.release()


if __name__ == "__main__":
    pause_collection()  # until the runtime is open (cairn._startup), as for `cairn` itself
    status = main()
    exit_now(status)  # no teardown once the atexit callbacks ran and nothing else runs
    sys.exit(status)
