"""The daemon's settings: where it listens, who may talk to it, and its limits."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLIENT_ID_HEADER",
    "DEFAULT_HOST",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_PORT",
    "DaemonConfig",
    "DaemonConfigError",
    "is_loopback_host",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4170
DEFAULT_MAX_SESSIONS = 64  # live sessions at once; past it POST /session answers 503
MAX_PENDING_PROMPTS = 5  # prompts admitted per session (running + waiting); more → 429
EVENT_RING_SIZE = 8000  # events kept per session for Last-Event-ID replay
MAX_QUEUED_EVENTS = 256  # live frames buffered per SSE subscriber before it is evicted
HEARTBEAT_SECONDS = 15.0  # ": heartbeat" comment interval on an idle event stream
MAX_BODY_BYTES = 10 * 1024 * 1024  # request body limit (413 beyond it)
PERMISSION_TIMEOUT_SECONDS = 300.0  # an unanswered permission request resolves as cancelled
RECAP_TIMEOUT_SECONDS = 60.0  # backstop for POST /session/{id}/recap
RETRY_AFTER_SECONDS = 5  # Retry-After sent with 503 session_limit_exceeded
SHUTDOWN_GRACE_SECONDS = 5.0  # open connections get this long to finish on SIGTERM
CLIENT_ID_HEADER = "x-cairn-client-id"  # names the client a request comes from
DRAIN_SECONDS = 30.0  # a replica's running turns get this long to end on SIGTERM
LEASE_SECONDS = 6.0  # a replica's lease on a session lasts this long unless renewed
LINGER_SECONDS = 2.0  # an idle session's lease is kept this long (its next prompt reuses it)
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 1.0, 300.0  # --lease-seconds' bounds
MAX_DRAIN_SECONDS = 3600.0  # --drain-seconds' bound

_LOOPBACK_NAMES = frozenset({"localhost", "[::1]"})
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")
_REPLICA_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class DaemonConfigError(ValueError):
    """A flag combination the daemon refuses to start with."""


def is_loopback_host(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost`` (not ``0.0.0.0``, which listens everywhere)."""
    name = host.strip().lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class DaemonConfig:
    workspace: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    allow_origins: tuple[str, ...] = ()
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_pending_prompts: int = MAX_PENDING_PROMPTS
    event_ring_size: int = EVENT_RING_SIZE
    max_queued_events: int = MAX_QUEUED_EVENTS
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    max_body_bytes: int = MAX_BODY_BYTES
    permission_timeout_seconds: float = PERMISSION_TIMEOUT_SECONDS
    recap_timeout_seconds: float = RECAP_TIMEOUT_SECONDS
    tenant_header: str | None = None  # each request names its tenant in this header (#15)
    # A tenant's HTTP MCP servers may reach loopback and private addresses (#24).
    allow_private_mcp: bool = False
    # Several replicas (#31): sessions live in this PostgreSQL database, not in this process.
    database: str | None = None
    replica_id: str | None = None  # this replica's name (default: host, process id, random)
    advertise_url: str | None = None  # where the other replicas reach this one
    lease_seconds: float = LEASE_SECONDS
    drain_seconds: float = DRAIN_SECONDS
    linger_seconds: float = LINGER_SECONDS
    workspace_root: Path | None = None  # each tenant works in <root>/<tenant>

    def workspace_for(self, tenant: str | None) -> Path:
        """Where a tenant's sessions work: its own folder under ``--workspace-root``, else the
        daemon's workspace."""
        if tenant is None or self.workspace_root is None:
            return self.workspace
        return self.workspace_root / tenant

    @property
    def replicated(self) -> bool:
        return self.database is not None

    def __post_init__(self) -> None:
        token = (self.token or "").strip() or None
        object.__setattr__(self, "token", token)
        header = (self.tenant_header or "").strip() or None
        object.__setattr__(self, "tenant_header", header)
        object.__setattr__(self, "database", (self.database or "").strip() or None)
        object.__setattr__(self, "replica_id", (self.replica_id or "").strip() or None)
        object.__setattr__(self, "advertise_url", (self.advertise_url or "").strip() or None)
        object.__setattr__(self, "allow_origins", tuple(o.strip() for o in self.allow_origins))

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)

    def validate(self, *, replica_flags: tuple[str, ...] = ()) -> None:
        """Raise :class:`DaemonConfigError` for a configuration that would be unsafe or broken
        (``replica_flags``: the replicas' flags given, which need ``--database``)."""
        if ":" in self.host and not _is_ipv6(self.host):
            raise DaemonConfigError(
                f"--host {self.host!r} looks like host:port; pass the port with --port."
            )
        if not self.loopback and self.token is None:
            raise DaemonConfigError(
                f"Refusing to listen on {self.host} without a token: set --token or "
                "CAIRN_SERVER_TOKEN, or bind to 127.0.0.1."
            )
        if "*" in self.allow_origins and self.token is None:
            raise DaemonConfigError(
                "--allow-origin '*' needs a token (--token or CAIRN_SERVER_TOKEN)."
            )
        if self.tenant_header is not None:
            if self.token is None:
                raise DaemonConfigError(
                    "--tenant-header needs a token (--token or CAIRN_SERVER_TOKEN): without "
                    "one, any client could name any tenant and read its memory."
                )
            if not _HEADER_NAME.fullmatch(self.tenant_header):
                raise DaemonConfigError(
                    f"--tenant-header {self.tenant_header!r} is not an HTTP header name."
                )
        if not 0 <= self.port <= 65535:
            raise DaemonConfigError(f"--port must be between 0 and 65535, not {self.port}.")
        if self.max_sessions < 1:
            raise DaemonConfigError(f"--max-sessions must be at least 1, not {self.max_sessions}.")
        if not self.workspace.is_dir():
            raise DaemonConfigError(f"The workspace {self.workspace} is not a folder.")
        if self.allow_private_mcp and self.tenant_header is None:
            raise DaemonConfigError(
                "--allow-private-mcp is about the MCP servers tenants pass: it needs "
                "--tenant-header."
            )
        if self.workspace_root is not None:
            if self.tenant_header is None:
                raise DaemonConfigError(
                    "--workspace-root gives each tenant its folder: it needs --tenant-header."
                )
            if not self.workspace_root.is_dir():
                raise DaemonConfigError(
                    f"The workspace root {self.workspace_root} is not a folder."
                )
        self._validate_replica(replica_flags)

    def _validate_replica(self, flags: tuple[str, ...]) -> None:
        if self.database is None:
            given = [*flags]
            given += [flag for flag, value in (
                ("--replica-id", self.replica_id),
                ("--advertise-url", self.advertise_url),
            ) if value is not None]  # fmt: skip
            if given:
                raise DaemonConfigError(f"{given[0]} needs --database (or CAIRN_DATABASE_URL).")
            return
        if self.replica_id is not None and not _REPLICA_ID.fullmatch(self.replica_id):
            raise DaemonConfigError(
                f"--replica-id {self.replica_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ -"
            )
        if self.advertise_url is not None and not self.advertise_url.startswith(
            ("http://", "https://")
        ):
            raise DaemonConfigError(
                f"--advertise-url {self.advertise_url!r} must be an http:// or https:// URL."
            )
        if self.advertise_url is None and self.host.strip("[]") in ("0.0.0.0", "::"):  # noqa: S104
            raise DaemonConfigError(
                f"--host {self.host} listens on every address: set --advertise-url to the one "
                "the other replicas reach this one at."
            )
        if not MIN_LEASE_SECONDS <= self.lease_seconds <= MAX_LEASE_SECONDS:
            raise DaemonConfigError(
                f"--lease-seconds must be between {MIN_LEASE_SECONDS:g} and "
                f"{MAX_LEASE_SECONDS:g}, not {self.lease_seconds:g}."
            )
        if not 0.0 <= self.drain_seconds <= MAX_DRAIN_SECONDS:
            raise DaemonConfigError(
                f"--drain-seconds must be between 0 and {MAX_DRAIN_SECONDS:g}, not "
                f"{self.drain_seconds:g}."
            )


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:
        return False
