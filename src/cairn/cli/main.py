"""The ``cairn`` command. Only argument handling lives here; every feature is in its package.

:func:`main` reads the command lines that start an agent (``cairn -p``, ``cairn --acp``,
``cairn serve``) with :func:`cairn.cli.options.parse_fast` and hands everything else to the typer
app in :mod:`cairn.cli.app`; both end in :func:`run_root` or :func:`run_serve`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from cairn.cli.options import RootOptions, ServeOptions, parse_fast

if TYPE_CHECKING:
    from cairn.headless.output import OutputFormat

__all__ = ["main", "run_root", "run_serve"]

CLICK_USAGE_ERROR = 2  # the exit code typer (click) gives a usage error
EXIT_BAD_INPUT = 42  # cairn's exit code for bad input


def run_root(options: RootOptions) -> int:
    """``cairn [options]``: the version, the ACP agent, the terminal UI or one headless turn."""
    if options.version:
        from cairn import __version__

        print(__version__)
        return 0
    mode = "yolo" if options.yolo else options.approval_mode
    if options.acp:
        from cairn.acp import run_acp_agent

        return run_acp_agent(model=options.model, approval_mode=mode)

    piped = _read_stdin()
    if options.prompt is None and piped is None:
        from cairn.ui import run_interactive

        return run_interactive(
            model=options.model,
            approval_mode=mode,
            resume=options.resume,
            continue_latest=options.continue_latest,
        )
    text = "\n\n".join(t for t in (piped, options.prompt) if t and t.strip())
    from cairn.headless.runner import HeadlessOptions, run_headless

    return run_headless(
        HeadlessOptions(
            prompt=text,
            cwd=Path.cwd(),
            output_format=cast("OutputFormat", options.output_format),  # one of Format
            max_session_turns=options.max_session_turns,
            approval_mode=mode,
            resume=options.resume,
            continue_latest=options.continue_latest,
            model=options.model,
        )
    )


def run_serve(options: ServeOptions) -> int:
    """``cairn serve``: the HTTP daemon."""
    from cairn.daemon import run_daemon

    return run_daemon(
        host=options.host,
        port=options.port,
        token=options.token,
        allow_origins=list(options.allow_origin),
        max_sessions=options.max_sessions,
        workspace=options.workspace or Path.cwd(),
    )


def _read_stdin() -> str | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        data = sys.stdin.read()
    except (OSError, ValueError):
        return None
    return data if data.strip() else None


def main() -> None:
    try:
        options = parse_fast(sys.argv[1:])
        if isinstance(options, RootOptions):
            sys.exit(run_root(options))
        if isinstance(options, ServeOptions):
            sys.exit(run_serve(options))
        from cairn.cli.app import app, mount_memory

        if len(sys.argv) > 1 and sys.argv[1] == "memory":
            mount_memory()
        app()
    except SystemExit as exc:
        # typer reports a usage error (unknown option, invalid value) with exit code 2; cairn
        # calls that bad input everywhere, code 42. No cairn command exits with 2 itself.
        sys.exit(EXIT_BAD_INPUT if exc.code == CLICK_USAGE_ERROR else exc.code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the last line of defence: a message, not a traceback
        _report_crash(exc)
        sys.exit(1)


def _report_crash(exc: Exception) -> None:
    import os
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
    main()
