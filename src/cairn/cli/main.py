"""The ``cairn`` command. Only argument handling lives here; every feature is in its package."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    help="cairn: a terminal AI coding agent with a managed long-term memory.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


class Format(StrEnum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


class Mode(StrEnum):
    plan = "plan"
    default = "default"
    auto_edit = "auto-edit"
    yolo = "yolo"


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="Run one turn without a UI and exit.")
    ] = None,
    output_format: Annotated[
        Format, typer.Option("--output-format", "-o", help="Headless output format.")
    ] = Format.text,
    max_session_turns: Annotated[
        int | None, typer.Option("--max-session-turns", help="Stop after this many model requests.")
    ] = None,
    approval_mode: Annotated[
        Mode | None, typer.Option("--approval-mode", help="When to ask before running tools.")
    ] = None,
    yolo: Annotated[
        bool, typer.Option("--yolo", "-y", help="Never ask (approval mode yolo).")
    ] = False,
    resume: Annotated[str | None, typer.Option("--resume", help="Resume a session by ID.")] = None,
    continue_latest: Annotated[
        bool, typer.Option("--continue", "-c", help="Resume the latest session of this project.")
    ] = False,
    model: Annotated[str | None, typer.Option("--model", "-m", help="The model to use.")] = None,
    acp: Annotated[
        bool, typer.Option("--acp", help="Serve the Agent Client Protocol on stdio.")
    ] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    if version:
        from cairn import __version__

        typer.echo(__version__)
        raise typer.Exit(0)
    mode = "yolo" if yolo else (approval_mode.value if approval_mode else None)
    if acp:
        from cairn.acp import run_acp_agent

        raise typer.Exit(run_acp_agent(model=model, approval_mode=mode))

    piped = _read_stdin()
    if prompt is None and piped is None:
        from cairn.ui import run_interactive

        raise typer.Exit(
            run_interactive(
                model=model, approval_mode=mode, resume=resume, continue_latest=continue_latest
            )
        )
    text = "\n\n".join(t for t in (piped, prompt) if t and t.strip())
    from cairn.headless.runner import HeadlessOptions, run_headless

    options = HeadlessOptions(
        prompt=text,
        cwd=Path.cwd(),
        output_format=output_format.value,
        max_session_turns=max_session_turns,
        approval_mode=mode,
        resume=resume,
        continue_latest=continue_latest,
        model=model,
    )
    raise typer.Exit(run_headless(options))


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the temporary project afterwards.")] = False,
) -> None:
    """Run a scripted session against the built-in scripted model (no API key needed)."""
    from cairn.demo import run_demo

    raise typer.Exit(run_demo(keep=keep))


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", "--hostname", help="Address to bind.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 4170,
    token: Annotated[
        str | None,
        typer.Option(help="Bearer token (or CAIRN_SERVER_TOKEN).", envvar="CAIRN_SERVER_TOKEN"),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option("--allow-origin", help="Allow browser requests from this origin."),
    ] = None,
    max_sessions: Annotated[int, typer.Option(help="Most live sessions at once.")] = 64,
    workspace: Annotated[
        Path | None, typer.Option(help="The workspace (default: the current folder).")
    ] = None,
) -> None:
    """Serve cairn sessions over HTTP for editors, scripts and the Python SDK."""
    from cairn.daemon import run_daemon

    raise typer.Exit(
        run_daemon(
            host=host,
            port=port,
            token=token,
            allow_origins=allow_origin or [],
            max_sessions=max_sessions,
            workspace=workspace or Path.cwd(),
        )
    )


def _mount_memory() -> None:
    from cairn.cli.memory_cmd import memory_app

    app.add_typer(
        memory_app, name="memory", help="List, search, recall, forget and restore memories."
    )


def _read_stdin() -> str | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        data = sys.stdin.read()
    except (OSError, ValueError):
        return None
    return data if data.strip() else None


def _acp_shortcut(argv: list[str]) -> tuple[str | None, str | None] | None:
    """``(model, approval mode)`` for ``cairn --acp [-m M] [--approval-mode X | --yolo]``.

    Editors start ``cairn --acp`` for every agent session and typer's start-up costs ~0.2 s of
    the 1 s budget, so these exact forms skip it; anything else (and any invalid value) goes
    through typer as usual.
    """
    acp = yolo = False
    model: str | None = None
    mode: str | None = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        name, has_value, inline = arg.partition("=")
        if arg == "--acp" and not acp:
            acp = True
        elif arg in ("--yolo", "-y"):
            yolo = True
        elif name in ("--model", "-m", "--approval-mode") and (has_value or rest):
            value = inline if has_value else rest.pop(0)
            if name == "--approval-mode":
                if value not in {m.value for m in Mode}:
                    return None
                mode = value
            else:
                model = value
        else:
            return None
    return (model, "yolo" if yolo else mode) if acp else None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "memory":
        _mount_memory()  # imported only when used: it pulls in the memory package and rich tables
    shortcut = _acp_shortcut(sys.argv[1:])
    if shortcut is not None:
        from cairn.acp import run_acp_agent

        sys.exit(run_acp_agent(model=shortcut[0], approval_mode=shortcut[1]))
    try:
        app()
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
