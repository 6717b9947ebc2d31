"""Runs one command so that nothing it starts can slip away from cairn (Linux; stdlib only).

Run as a plain script, ``python -I -S reaper.py MODE PARENT [REPORT_FD] -- command...``, by
:mod:`cairn.hooks.process` (hooks), :mod:`cairn.mcp.stdio` (stdio MCP servers) and
:mod:`cairn.tools.shell` (shell commands outside the sandbox). It makes
itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a process the command starts and
orphans (a ``setsid`` child whose parent exited, a daemon that double-forked) is re-parented to
it instead of to init, so every process the command started stays below it in the process tree,
where :func:`kill_tree` finds it. Then it runs the command (stdin, stdout and stderr are the
command's own; it keeps no copy), writes ``pid <PID>`` (or ``error <errno>`` when the command
cannot be started) to ``REPORT_FD`` when given, and waits:

- the command exits: the reaper exits with its status (killed by a signal: by the same signal);
  in ``server`` mode it first kills everything the command started (no server outlives its
  session); in ``hook`` mode what the hook left running on purpose stays; in ``shell`` mode
  too, unless the command was being stopped (a SIGTERM came first: cairn stops a timed-out,
  aborted or cancelled command so), when everything it started is killed with it;
- cairn goes away, even killed with SIGKILL (``PR_SET_PDEATHSIG`` sends the reaper SIGHUP), or
  sends SIGHUP itself: it kills everything the command started, then exits. Only the first
  SIGHUP counts: the kernel sends the parent-death signal again each time the reaper passes to
  another of a dying cairn's threads, and a later one must not cut the killing short;
- SIGTERM and SIGINT are the command's business (cairn signals the whole process group); in
  ``shell`` mode a SIGTERM also marks the command as being stopped.

cairn kills a hook or server that must end now with :func:`kill_tree` on the reaper's PID, then
SIGKILL to the reaper's process group. A machine without ``prctl`` runs the command all the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

__all__ = ["descendants", "kill_tree", "main"]

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 50  # of scanning and killing, for commands that fork while being killed
ROUND_PAUSE_SECONDS = 0.005  # between rounds: the killed processes go
NOT_FOUND = 127  # exit code when the command cannot be started (the shell's)


MODES = ("hook", "server", "shell")


class _Orphaned(Exception):
    """cairn is gone (or asked for everything to end now)."""


_hung_up: list[int] = []  # the SIGHUP that raised _Orphaned, once one has


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` in the process tree (from ``/proc``), zombies left out."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: nothing can be found
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def kill_tree(root: int) -> None:
    """SIGKILL every process below ``root`` until none is left (one that forked meanwhile has
    its child found in the next round); ``root`` itself is left alone."""
    for _ in range(KILL_ROUNDS):
        live = descendants(root)
        if not live:
            return
        for pid in live:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if root == os.getpid():
            _reap()
        time.sleep(ROUND_PAUSE_SECONDS)


def main(args: list[str]) -> int:
    if "--" not in args or len(args) < 4 or args[0] not in MODES:
        sys.stderr.write(
            "usage: python -I -S reaper.py hook|server|shell PARENT [FD] -- command...\n"
        )
        return 2
    split = args.index("--")
    mode, parent, argv = args[0], int(args[1]), args[split + 1 :]
    report = int(args[2]) if split == 3 else None
    if report is not None:
        os.set_inheritable(report, False)  # the command must not hold it open
    signal.signal(signal.SIGHUP, _orphaned)
    for passed_on in (signal.SIGTERM, signal.SIGINT):
        signal.signal(passed_on, _leave_to_the_command)  # a handler, not SIG_IGN: not inherited
    stopping: list[int] = []
    if mode == "shell":
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    _become_subreaper()
    try:
        if os.getppid() != parent:
            return 0  # cairn went away before we could tell: run nothing
        try:
            child = os.posix_spawnp(argv[0], argv, os.environ)
        except OSError as exc:
            _report(report, f"error {exc.errno or 0}")
            sys.stderr.write(f"{argv[0]}: {exc.strerror or exc}\n")
            return NOT_FOUND
        _report(report, f"pid {child}")
        _let_go_of_the_output()
        status = _wait_for(child)
        if mode == "server" or stopping:
            kill_tree(os.getpid())
    except _Orphaned:
        kill_tree(os.getpid())
        return 128 + signal.SIGHUP
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    return os.waitstatus_to_exitcode(status)


def _report(fd: int | None, text: str) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, f"{text}\n".encode())
    with contextlib.suppress(OSError):
        os.close(fd)


def _become_subreaper() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass  # not Linux: the command runs, without the guarantees


def _let_go_of_the_output() -> None:
    """The command has its own stdin, stdout and stderr; copies kept here would keep cairn's
    pipes open after the command closed them."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _wait_for(child: int) -> int:
    """Reap orphans re-parented here until ``child`` exits; its wait status."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return status


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _orphaned(signum: int, frame: object) -> None:
    """Raise :class:`_Orphaned` on the first SIGHUP only: a killed multi-threaded cairn hands the
    reaper from thread to thread as they exit, each handover another SIGHUP, and a second raise
    would end the reaper in the middle of its kill_tree, leaving the command's children to init."""
    if _hung_up:
        return
    _hung_up.append(signum)
    raise _Orphaned


def _leave_to_the_command(signum: int, frame: object) -> None:
    pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
