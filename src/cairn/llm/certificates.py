"""The certificate authorities cairn trusts for HTTPS: the model endpoint and MCP servers.

- certifi's bundle, or instead what ``SSL_CERT_FILE`` (a PEM bundle) or ``SSL_CERT_DIR`` (a
  folder of hashed certificates) name, as httpx's ``trust_env`` reads them;
- plus the PEM file ``NODE_EXTRA_CA_CERTS`` names, *added* to those, as Node.js does: Qwen
  Code, Claude Code and Gemini CLI tell users behind a TLS-intercepting proxy to set it, so the
  variable they already have works here too.

Reading a bundle costs milliseconds of CPU (OpenSSL parses every certificate; it releases the
GIL meanwhile), so :func:`verifying_context` builds the context in a daemon thread, once per
process for the same variables, and every client shares it. An extra file that cannot be read
is a warning naming it (the debug log, and stderr under ``cairn --acp`` and ``cairn serve``;
:func:`extra_ca_warning` checks it at the start of ``cairn -p`` and the terminal UI, which show
it with the settings' warnings) and the rest of the trust store still applies;
:func:`extra_ca_problem` says why, for the message of a certificate that is then not trusted.
"""

from __future__ import annotations

import concurrent.futures
import os
import ssl
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "EXTRA_CA_VARIABLE",
    "extra_ca_problem",
    "extra_ca_warning",
    "in_thread",
    "verifying_context",
]

EXTRA_CA_VARIABLE = "NODE_EXTRA_CA_CERTS"  # a PEM file of CAs added to the bundle (Node's name)
_TRUST_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", EXTRA_CA_VARIABLE)
_T = TypeVar("_T")
_lock = threading.Lock()
_contexts: dict[tuple[str, ...], concurrent.futures.Future[ssl.SSLContext]] = {}
_problems: dict[str, str] = {}  # NODE_EXTRA_CA_CERTS's value -> why it was not loaded


def verifying_context() -> concurrent.futures.Future[ssl.SSLContext]:
    """The verifying TLS context for the trust store the environment names (see the module's
    docstring), being built in a worker thread or built already. Waiting on it never raises for
    an unreadable ``NODE_EXTRA_CA_CERTS``; it does for an unreadable ``SSL_CERT_FILE`` (OSError),
    which replaces the bundle and so cannot be left out."""
    key = tuple(os.environ.get(name, "") for name in _TRUST_VARIABLES)
    with _lock:
        future = _contexts.get(key)
        if future is None or (future.done() and future.exception() is not None):
            future = in_thread(lambda: _build(key[-1].strip()))
            _contexts[key] = future
        return future


def extra_ca_problem() -> str | None:
    """Why the file ``NODE_EXTRA_CA_CERTS`` names was not added, when it was not (a sentence
    naming it), else None."""
    extra = os.environ.get(EXTRA_CA_VARIABLE, "").strip()
    return _problems.get(extra) if extra else None


def extra_ca_warning() -> str | None:
    """Why the file ``NODE_EXTRA_CA_CERTS`` names cannot be added (a sentence naming it), else
    None: read now, into a context of its own (the file's certificates only: a millisecond,
    where the whole bundle is the worker thread's), for the start-up warnings."""
    extra = os.environ.get(EXTRA_CA_VARIABLE, "").strip()
    if not extra:
        return None
    return _added(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), extra)


def _added(context: ssl.SSLContext, extra: str) -> str | None:
    """Add the CAs of the file ``extra`` to ``context``; None, or why they were not."""
    try:
        context.load_verify_locations(cafile=extra)
    except (OSError, ssl.SSLError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problem = (
            f"{EXTRA_CA_VARIABLE} names {extra!r}, which was not added to the trusted "
            f"certificates: {why or type(exc).__name__}"
        )
        _problems[extra] = problem
        return problem
    return None


def _build(extra: str) -> ssl.SSLContext:
    from cairn.llm._httpx import httpx  # loaded with the transport that builds the context

    context = httpx.create_ssl_context(trust_env=True)
    problem = _added(context, extra) if extra else None
    if problem is not None:
        from cairn.debug_log import get_logger

        get_logger("TLS").warning(problem)
    return context


def in_thread(build: Callable[[], _T]) -> concurrent.futures.Future[_T]:
    """Run ``build`` in a daemon thread (one that never delays the process's exit)."""
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(build())
        except BaseException as exc:  # handed to whoever waits for the result
            future.set_exception(exc)

    threading.Thread(target=run, name="cairn-tls-context", daemon=True).start()
    return future
