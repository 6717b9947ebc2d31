"""What a parsed ``cairn`` command line runs: the version, the ACP agent, the terminal UI, one
headless turn, or the daemon.

Both parsers end here, :func:`cairn.cli.options.parse_fast` (called by :mod:`cairn.cli.main`)
and the typer app (:mod:`cairn.cli.app`), so the two never start a front end differently. Each
front end is imported only when it runs: their libraries stay off the others' start-up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs, urlsplit

from cairn._startup import startup_done
from cairn._version import __version__
from cairn.cli.options import RootOptions, ServeOptions
from cairn.exit_codes import ExitCode

if TYPE_CHECKING:
    from cairn.headless.output import OutputFormat
    from cairn.headless.runner import HeadlessMemory

__all__ = ["run_root", "run_serve"]


def run_root(options: RootOptions) -> int:
    """``cairn [options]``: the version, the ACP agent, the terminal UI or one headless turn."""
    if options.version:
        print(__version__)
        return ExitCode.OK
    mode = "yolo" if options.yolo else options.approval_mode
    _safety_this_run(options.sandbox, options.trust)
    _proxy_this_run(options.proxy)
    if options.acp:
        from cairn.acp import run_acp_agent

        # the collector as usual once its SDK is imported (acp/main.py, cairn._startup)
        return run_acp_agent(model=options.model, approval_mode=mode)

    piped = _read_stdin()
    if options.prompt is None and piped is None:
        from cairn.ui import run_interactive

        return run_interactive(
            model=options.model,
            approval_mode=mode,
            resume=options.resume,
            continue_latest=options.continue_latest,
            initial_prompt=options.initial_prompt,
        )
    if options.include_partial_messages and options.output_format != "stream-json":
        print("--include-partial-messages needs --output-format stream-json", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if options.wait_memory and options.no_wait_memory:
        print("--wait-memory and --no-wait-memory cannot be given together", file=sys.stderr)
        return ExitCode.BAD_INPUT
    parts = (piped, options.prompt, options.initial_prompt)
    text = "\n\n".join(t for t in parts if t and t.strip())
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
            memory=_headless_memory(options),
            partial_messages=options.include_partial_messages,
        )
    )


def _headless_memory(options: RootOptions) -> HeadlessMemory:
    if options.no_wait_memory:
        return "later"
    return "wait" if options.wait_memory else "worker"


def run_serve(options: ServeOptions) -> int:
    """``cairn serve``: the HTTP daemon."""
    try:
        token = serve_token(options, sys.argv[1:])
        _warn_database_password(options.database, sys.argv[1:])
    except ValueError as exc:
        print(f"cairn serve: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    _safety_this_run(options.sandbox, options.trust)
    _proxy_this_run(options.proxy)
    from cairn.daemon import run_daemon

    startup_done()  # a long-running front end: the collector as usual (cairn._startup)
    return run_daemon(
        host=options.host,
        port=options.port,
        token=token,
        allow_origins=list(options.allow_origin),
        max_sessions=options.max_sessions,
        workspace=options.workspace or Path.cwd(),
        tenant_header=options.tenant_header,
        allow_private_mcp=options.allow_private_mcp,
        database=options.database,
        replica_id=options.replica_id,
        advertise_url=options.advertise_url,
        workspace_root=options.workspace_root,
        lease_seconds=options.lease_seconds,
        drain_seconds=options.drain_seconds,
    )


TOKEN_FILE_MAX_BYTES = 64 * 1024
BY_VALUE_WARNING = (
    "cairn serve: warning: --token shows the token to every user of this machine (ps, "
    "/proc/<pid>/cmdline); pass it with --token-file or CAIRN_SERVER_TOKEN instead."
)


DATABASE_BY_VALUE_WARNING = (
    "cairn serve: warning: --database shows the database's password to every user of this "
    "machine (ps, /proc/<pid>/cmdline); set CAIRN_DATABASE_URL instead, or keep the password "
    "in ~/.pgpass."
)


def _warn_database_password(database: str | None, argv: Sequence[str]) -> None:
    """Warn when ``--database`` on the command line (``argv``) carries a password (in the URL's
    user part, or a ``password=`` key of a URL query or a key/value DSN)."""
    if not database or not any(a == "--database" or a.startswith("--database=") for a in argv):
        return
    try:
        parts = urlsplit(database)
        in_url = parts.password is not None or "password" in parse_qs(parts.query)
    except ValueError:
        in_url = False
    if in_url or "password=" in database.replace(" ", "").lower():
        print(DATABASE_BY_VALUE_WARNING, file=sys.stderr)


def serve_token(options: ServeOptions, argv: Sequence[str]) -> str | None:
    """The daemon's token: ``--token`` (or ``CAIRN_SERVER_TOKEN``), or the content of
    ``--token-file`` (or ``CAIRN_SERVER_TOKEN_FILE``) without its surrounding whitespace.

    A token written on the command line (``argv``, as the parsers read it: ``--token X`` or
    ``--token=X``) is in the process list for every local user to read: that is warned about.
    Raises :class:`ValueError` for both at once, or a token file that is unreadable or empty.
    """
    if any(arg == "--token" or arg.startswith("--token=") for arg in argv):
        print(BY_VALUE_WARNING, file=sys.stderr)
    if options.token_file is None:
        return options.token
    path = Path(options.token_file)
    if options.token:
        raise ValueError(
            "give the token by --token (or CAIRN_SERVER_TOKEN) or by --token-file "
            "(or CAIRN_SERVER_TOKEN_FILE), not both."
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(TOKEN_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read the token file {path}: {exc.strerror or exc}.") from None
    if len(data) > TOKEN_FILE_MAX_BYTES:
        raise ValueError(f"the token file {path} is over {TOKEN_FILE_MAX_BYTES} bytes.")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"the token file {path} is not UTF-8 text.") from None
    if not token:
        raise ValueError(f"the token file {path} is empty.")
    return token


def _safety_this_run(sandbox: bool, trust: bool) -> None:
    """``--sandbox`` is ``CAIRN_SANDBOX=1`` (which the commands' own cairn runs inherit);
    ``--trust`` trusts project commands in this process only."""
    if sandbox:
        os.environ["CAIRN_SANDBOX"] = "1"
    if trust:
        from cairn.config.trust import trust_this_run

        trust_this_run()


PROXY_BY_VALUE_WARNING = (
    "cairn: warning: --proxy shows the proxy's password to every user of this machine (ps, "
    "/proc/<pid>/cmdline); set CAIRN_PROXY or HTTPS_PROXY instead."
)


def _proxy_this_run(proxy: str | None) -> None:
    """``--proxy``: ``CAIRN_PROXY`` for this run and the cairn processes it starts (a memory
    worker), read by :mod:`cairn.llm.proxies` over the ``proxy`` setting. A password in it is
    warned about, as ``--database``'s is."""
    if proxy is None:
        return
    os.environ["CAIRN_PROXY"] = proxy
    address = proxy.partition("://")[2] if "://" in proxy else proxy
    if ":" in address.rpartition("@")[0]:  # user:password@
        print(PROXY_BY_VALUE_WARNING, file=sys.stderr)


def _read_stdin() -> str | None:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        data = sys.stdin.read()
    except (OSError, ValueError):
        return None
    return data if data.strip() else None
