"""TCP keepalive and the connect timeout for cairn's PostgreSQL connections, so they notice a
database host that is gone.

A host that vanishes without a word (power lost, a network partition) sends no FIN or RST: a
statement sent to it waits for the kernel's retransmission timeout (about 15 minutes on Linux),
and an idle connection never learns. libpq's keepalive parameters bound both: an idle connection
is probed after :data:`KEEPALIVE_IDLE_SECONDS` and closed when a probe goes unanswered, and data
left unacknowledged for :data:`TCP_USER_TIMEOUT_MS` ends the connection (with a probe out, Linux
also ends an idle one whose peer has been silent that long: about 40 s in all). The statement
then fails with a lost connection, which its caller handles as any other.

Each parameter the DSN sets itself is left to it (the user's value wins). A DSN that names a
``service`` (or ``PGSERVICE``) gets none: libpq would let ours override the service file's. On
a Unix-domain socket libpq ignores them.

The connect timeout (:func:`connect_timeout_option`): a database that does not answer a new
connection within cairn's default is unavailable, unless the DSN sets ``connect_timeout`` itself
(or ``PGCONNECT_TIMEOUT`` is set): then that value is libpq's, as it is for any libpq client.
"""

from __future__ import annotations

import os

__all__ = ["KEEPALIVE_PARAMETERS", "connect_timeout_option", "keepalive_options"]

KEEPALIVE_IDLE_SECONDS = 30  # an idle connection's first probe (the pool's SELECT 1 comes as late)
KEEPALIVE_INTERVAL_SECONDS = 10  # between probes that go unanswered
KEEPALIVE_COUNT = 3  # unanswered probes before the connection is dead (without the user timeout)
TCP_USER_TIMEOUT_MS = 30_000  # data unacknowledged this long: the host is gone
TCP_USER_TIMEOUT_LIBPQ = 120_000  # the libpq version (12) that knows tcp_user_timeout

KEEPALIVE_PARAMETERS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
    "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
    "keepalives_count": KEEPALIVE_COUNT,
    "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
}


def keepalive_options(dsn: str) -> dict[str, int]:
    """The keepalive parameters to connect to ``dsn`` with: those it does not set itself. Call it
    with psycopg installed; a DSN it cannot parse gets none (connecting reports the error)."""
    from psycopg import Error, pq
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(dsn)
    except Error:
        return {}
    if "service" in given or os.environ.get("PGSERVICE"):
        return {}
    options = {name: value for name, value in KEEPALIVE_PARAMETERS.items() if name not in given}
    if pq.version() < TCP_USER_TIMEOUT_LIBPQ:
        options.pop("tcp_user_timeout", None)
    return options


def connect_timeout_option(dsn: str, default: int) -> dict[str, int]:
    """``connect_timeout=default`` unless ``dsn`` sets its own (``?connect_timeout=2``) or
    ``PGCONNECT_TIMEOUT`` is set: the user's value wins (libpq's floor is 2 s). A DSN it
    cannot parse gets the default (connecting reports the error)."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(dsn)
    except Error:
        given = {}
    if "connect_timeout" in given or os.environ.get("PGCONNECT_TIMEOUT"):
        return {}
    return {"connect_timeout": default}
