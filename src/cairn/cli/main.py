"""The ``cairn`` command. Only argument handling lives here; every feature is in its package.

:func:`main` reads the command lines that start an agent (``cairn -p``, ``cairn --acp``,
``cairn serve``) with :func:`cairn.cli.options.parse_fast` and the plain forms of
``cairn memory search|show|forget|list`` with :func:`cairn.cli.memory_argv.read_quick`, and hands
everything else to the typer app in :mod:`cairn.cli.app`. Whichever parser read it, an agent's
command line ends in :mod:`cairn.cli.dispatch` (which runs the front end) and those memory
commands in :mod:`cairn.cli.memory_actions`. A bare ``cairn --version`` is answered before
any of that is imported.

:func:`run` is the program (``cairn``, ``python -m cairn.cli.main``): :func:`main`, then an exit
without the interpreter's teardown once everything is flushed
(:func:`cairn._startup.exit_now`).
"""

from __future__ import annotations

import os
import sys

from cairn._startup import exit_now, pause_collection
from cairn._version import __version__
from cairn.exit_codes import ExitCode

__all__ = ["exit_now", "main", "run"]

CLICK_USAGE_ERROR = 2  # the exit code typer (click) gives a usage error


def main() -> None:
    try:
        _run_command(sys.argv[1:])
    except SystemExit as exc:
        # typer reports a usage error (unknown option, invalid value) with exit code 2; cairn
        # calls that bad input everywhere, code 42. No cairn command exits with 2 itself.
        sys.exit(ExitCode.BAD_INPUT if exc.code == CLICK_USAGE_ERROR else exc.code)
    except KeyboardInterrupt:
        sys.exit(ExitCode.CANCELLED)
    except Exception as exc:  # the last line of defence: a message, not a traceback
        _report_crash(exc)
        sys.exit(ExitCode.ERROR)


def run() -> None:
    """The ``cairn`` program: :func:`main` with the collector paused for the start-up, then
    :func:`cairn._startup.exit_now` with its exit status."""
    pause_collection()
    try:
        main()
    except SystemExit as exc:
        exit_now(exc.code)
        raise


def _run_command(args: list[str]) -> None:
    if args == ["--version"]:  # what typer would print, without importing it (or anything)
        print(__version__)
        sys.exit(ExitCode.OK)
    import shlex

    from cairn.cli.dispatch import run_root, run_serve
    from cairn.cli.options import (
        RootOptions,
        ServeOptions,
        misspelt_command,
        parse_fast,
        split_initial_prompt,
        with_bare_prompt,
    )
    from cairn.values import replace

    argv = with_bare_prompt(args)
    options = parse_fast(argv)
    if isinstance(options, RootOptions):
        sys.exit(run_root(options))
    if isinstance(options, ServeOptions):
        sys.exit(run_serve(options))
    _run_memory_quickly(argv)
    from cairn.cli.app import app, command_names, mount_command_groups

    commands = command_names()
    rest, words = split_initial_prompt(argv, commands)
    if words is not None and (meant := misspelt_command(argv, commands)):
        quoted = shlex.quote(words)
        quoted = f" (to send it as a prompt: cairn {quoted})" if " " in words else ""
        sys.stderr.write(
            f"cairn: {words.split()[0]!r} is not a command; did you mean `cairn {meant}`?{quoted}\n"
        )
        sys.exit(ExitCode.BAD_INPUT)
    if words is not None and isinstance(first := parse_fast(rest), RootOptions):
        sys.exit(run_root(replace(first, initial_prompt=words)))
    mount_command_groups(rest)
    app(args=rest, obj=words)  # the root command gets the words as its first prompt


def _run_memory_quickly(argv: list[str]) -> None:
    """``cairn memory search|show|forget|list`` in a plain form: run without typer (whose
    import is most of their start-up) and exit; any other command line returns."""
    if argv[:1] != ["memory"]:
        return
    from cairn.cli.memory_argv import read_quick, run_quick

    if (quick := read_quick(argv)) is not None:
        run_quick(quick)
        sys.exit(ExitCode.OK)


def _report_crash(exc: Exception) -> None:
    import traceback

    from cairn.debug_log import get_logger

    details = "".join(traceback.format_exception(exc))
    get_logger("CRASH").error(details)
    if os.environ.get("CAIRN_DEBUG", "").strip() not in ("", "0"):
        sys.stderr.write(details)
    sys.stderr.write(
        f"cairn: internal error: {type(exc).__name__}: {exc}\n"
        "This is a bug. Set CAIRN_DEBUG=1 to see the traceback; the debug log has it too.\n"
    )


if __name__ == "__main__":
    run()
