"""``cairn`` run inside the test process: the console script's own entry point
(:func:`cairn.cli.main.main`, ``[project.scripts]``) with its arguments, working folder,
environment and standard streams as a ``cairn`` process would have them.

For tests whose behaviour under test is the command (its argument handling, its messages and
exit code, the files it writes), not the process: a spawned ``cairn`` costs about half a second
of CPU to start, the call here a few milliseconds once the modules are loaded. What only a
process shows (start-up imports, signals, stdin/stdout wiring, the interpreter's exit) stays a
real-process test; each module that runs commands here keeps at least one real-process check of
the same path.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["run_main"]


def run_main(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    input: str = "",
) -> subprocess.CompletedProcess[str]:
    """``cairn *args`` in ``cwd`` with exactly the variables ``env``, ``input`` on a stdin that
    is not a terminal and stdout and stderr into pipes (UTF-8, read back as text mode reads
    them): what ``subprocess.run([*CAIRN, *args], ..., text=True)`` would return."""
    from cairn.cli.main import main

    stdin = io.TextIOWrapper(io.BytesIO(input.encode()), encoding="utf-8")
    stdout = _pipe("strict")
    stderr = _pipe("backslashreplace")
    with _as_process(["cairn", *args], cwd, env, stdin, stdout, stderr):
        try:
            main()
            code = 0
        except SystemExit as exit:
            code = _exit_status(exit.code, stderr)
    return subprocess.CompletedProcess(list(args), code, _read(stdout), _read(stderr))


def _pipe(errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _read(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="strict").read()


def _exit_status(code: object, stderr: io.TextIOWrapper) -> int:
    """The status the interpreter exits with for ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)  # (an ExitCode)
    stderr.write(f"{code}\n")
    return 1


@contextmanager
def _as_process(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin: io.TextIOWrapper,
    stdout: io.TextIOWrapper,
    stderr: io.TextIOWrapper,
) -> Iterator[None]:
    saved_environ = dict(os.environ)
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr)
    saved_cwd = os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    sys.argv, sys.stdin, sys.stdout, sys.stderr = argv, stdin, stdout, stderr
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        os.environ.clear()
        os.environ.update(saved_environ)
